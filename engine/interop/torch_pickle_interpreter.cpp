// The pickle interpreter of the PyTorch checkpoint reader (torch_pickle.h): it runs an
// archive's data.pkl and builds its values, reading each storage's record from the archive as
// the pickle names it. Only the opcodes of protocols 2 to 5 and the classes a state dict uses
// are known; every size it reads is bounded by the file's own.
#include "engine/interop/torch_pickle_interpreter.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "engine/core/error.h"

namespace tfw::torch_pickle_detail {

namespace {

struct StorageType {
  const char* name;
  torch::ScalarType dtype;
};

// The storage classes of `torch.save` (legacy typed names, and UntypedStorage in bytes).
constexpr StorageType kStorageTypes[] = {
    {"torch.FloatStorage", torch::kFloat},  {"torch.DoubleStorage", torch::kDouble},
    {"torch.HalfStorage", torch::kHalf},    {"torch.BFloat16Storage", torch::kBFloat16},
    {"torch.LongStorage", torch::kLong},    {"torch.IntStorage", torch::kInt},
    {"torch.ShortStorage", torch::kShort},  {"torch.CharStorage", torch::kChar},
    {"torch.ByteStorage", torch::kByte},    {"torch.BoolStorage", torch::kBool},
    {"torch.UntypedStorage", torch::kByte},
};

class Interpreter {
 public:
  Interpreter(std::string path, caffe2::serialize::PyTorchStreamReader& archive, const char* data, std::size_t size)
      : path_(std::move(path)), archive_(archive), data_(data), size_(size) {}

  PyRef run() {
    while (true) {
      const auto op = static_cast<unsigned char>(read_bytes(1)[0]);
      if (op == '.') {  // STOP
        if (stack_.size() != 1) fail("the pickle ends with a malformed stack");
        return stack_.back();
      }
      if (!stack_op(op) && !container_op(op) && !scalar_op(op) && !object_op(op)) {
        fail(fmt::format("unsupported pickle opcode 0x{:02x} at byte {}", op, position_ - 1));
      }
    }
  }

 private:
  // Each *_op runs `op` when it is one of its group's opcodes and says whether it was.

  // The protocol and framing hints, MARK, the memo, and the stack's own opcodes.
  bool stack_op(unsigned char op) {
    switch (op) {
      case 0x80: read_bytes(1); break;                   // PROTO
      case 0x95: read_bytes(8); break;                   // FRAME (a hint only)
      case '(': marks_.push_back(stack_.size()); break;  // MARK
      case 'q': memo_[read_uint(1)] = top(); break;      // BINPUT
      case 'r': memo_[read_uint(4)] = top(); break;      // LONG_BINPUT
      case 0x94: memo_[memo_.size()] = top(); break;     // MEMOIZE
      case 'h': push(memo(read_uint(1))); break;         // BINGET
      case 'j': push(memo(read_uint(4))); break;         // LONG_BINGET
      case '0': pop(); break;                            // POP
      case '1': pop_to_mark(); break;                    // POP_MARK
      case '2': push(top()); break;                      // DUP
      default: return false;
    }
    return true;
  }

  // The opcodes that make and fill tuples, lists and dicts.
  bool container_op(unsigned char op) {
    switch (op) {
      case ')': push(make(PyValue::Kind::tuple)); break;  // EMPTY_TUPLE
      case ']': push(make(PyValue::Kind::list)); break;   // EMPTY_LIST
      case '}': push(make(PyValue::Kind::dict)); break;   // EMPTY_DICT
      case 0x8f: push(make(PyValue::Kind::list)); break;  // EMPTY_SET (kept as a list)
      case 't':
      case 'l':
      case 0x91: {  // TUPLE, LIST, FROZENSET
        PyRef value = make(op == 't' ? PyValue::Kind::tuple : PyValue::Kind::list);
        value->items = pop_to_mark();
        push(value);
        break;
      }
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1, TUPLE2, TUPLE3
        const std::size_t n = op - 0x84;
        // Never below the innermost MARK: a later pop_to_mark would point past the stack.
        if (stack_.size() < n || (!marks_.empty() && stack_.size() - n < marks_.back())) {
          fail("a tuple opcode finds too few values");
        }
        PyRef value = make(PyValue::Kind::tuple);
        value->items.assign(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
        stack_.resize(stack_.size() - n);
        push(value);
        break;
      }
      case 'd': {  // DICT
        PyRef value = make(PyValue::Kind::dict);
        set_items(value, pop_to_mark());
        push(value);
        break;
      }
      case 's': {  // SETITEM
        PyRef item = pop(), key = pop();
        set_items(top(), {key, item});
        break;
      }
      case 'u': {  // SETITEMS
        std::vector<PyRef> items = pop_to_mark();
        set_items(top(), items);
        break;
      }
      case 'a': {  // APPEND
        PyRef item = pop();
        append(top(), {item});
        break;
      }
      case 'e':
      case 0x90: {  // APPENDS, ADDITEMS
        std::vector<PyRef> items = pop_to_mark();
        append(top(), items);
        break;
      }
      default: return false;
    }
    return true;
  }

  // The opcodes that push a string, bytes, a number, a boolean or None.
  bool scalar_op(unsigned char op) {
    switch (op) {
      case 'X': push(make_text(PyValue::Kind::string, read_string(read_uint(4)))); break;   // BINUNICODE
      case 0x8c: push(make_text(PyValue::Kind::string, read_string(read_uint(1)))); break;  // SHORT_BINUNICODE
      case 0x8d: push(make_text(PyValue::Kind::string, read_string(read_uint(8)))); break;  // BINUNICODE8
      case 'T': push(make_text(PyValue::Kind::string, read_string(read_uint(4)))); break;   // BINSTRING
      case 'U': push(make_text(PyValue::Kind::string, read_string(read_uint(1)))); break;   // SHORT_BINSTRING
      case 'B': push(make_text(PyValue::Kind::bytes, read_string(read_uint(4)))); break;    // BINBYTES
      case 'C': push(make_text(PyValue::Kind::bytes, read_string(read_uint(1)))); break;    // SHORT_BINBYTES
      case 0x8e: push(make_text(PyValue::Kind::bytes, read_string(read_uint(8)))); break;   // BINBYTES8
      case 'J': push(make_integer(static_cast<std::int32_t>(read_uint(4)))); break;         // BININT
      case 'K': push(make_integer(static_cast<std::int64_t>(read_uint(1)))); break;         // BININT1
      case 'M': push(make_integer(static_cast<std::int64_t>(read_uint(2)))); break;         // BININT2
      case 0x8a: push(make_integer(read_long(read_uint(1)))); break;                        // LONG1
      case 0x8b: push(make_integer(read_long(read_uint(4)))); break;                        // LONG4
      case 'I': {  // INT (text; 00 and 01 are booleans)
        const std::string line = read_line();
        if (line == "00" || line == "01")
          push(make_integer(line == "01", PyValue::Kind::boolean));
        else
          push(make_integer(parse_integer(line)));
        break;
      }
      case 'G': {  // BINFLOAT (big-endian)
        const char* bytes = read_bytes(8);
        std::uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | static_cast<unsigned char>(bytes[i]);
        PyRef value = make(PyValue::Kind::real);
        std::memcpy(&value->real, &bits, sizeof bits);
        push(value);
        break;
      }
      case 'N': push(make(PyValue::Kind::none)); break;                 // NONE
      case 0x88: push(make_integer(1, PyValue::Kind::boolean)); break;  // NEWTRUE
      case 0x89: push(make_integer(0, PyValue::Kind::boolean)); break;  // NEWFALSE
      default: return false;
    }
    return true;
  }

  // Globals, calls, objects and persistent ids (a tensor's storage).
  bool object_op(unsigned char op) {
    switch (op) {
      case 'c': {  // GLOBAL
        std::string module = read_line();
        push(make_text(PyValue::Kind::global, module + "." + read_line()));
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        PyRef name = pop(), module = pop();
        if (name->kind != PyValue::Kind::string || module->kind != PyValue::Kind::string) {
          fail("STACK_GLOBAL without a module and a name");
        }
        push(make_text(PyValue::Kind::global, module->text + "." + name->text));
        break;
      }
      case 'R': {  // REDUCE
        PyRef args = pop(), callable = pop();
        push(reduce(callable, args));
        break;
      }
      case 0x81: {  // NEWOBJ
        pop();
        PyRef cls = pop();
        push(make_text(PyValue::Kind::object, cls->text));
        break;
      }
      case 0x92: {  // NEWOBJ_EX
        pop();
        pop();
        PyRef cls = pop();
        push(make_text(PyValue::Kind::object, cls->text));
        break;
      }
      case 'b': {  // BUILD: an object's state dict is kept
        PyRef state = pop();
        PyRef& object = top();
        if (object->kind == PyValue::Kind::object && state->kind == PyValue::Kind::dict && object->entries.empty()) {
          object->entries = state->entries;
        }
        break;
      }
      case 'Q': push(persistent_load(pop())); break;  // BINPERSID
      default: return false;
    }
    return true;
  }

  [[noreturn]] void fail(const std::string& why) const {
    throw UsageError(with_hint(fmt::format("{}: cannot read the checkpoint's pickle: {}", path_, why),
                               "the file may be truncated or corrupt; save it again with torch.save"));
  }

  const char* read_bytes(std::size_t n) {
    if (n > size_ - position_) fail("it ends early");
    const char* bytes = data_ + position_;
    position_ += n;
    return bytes;
  }
  std::uint64_t read_uint(std::size_t n) {
    const char* bytes = read_bytes(n);
    std::uint64_t value = 0;
    for (std::size_t i = n; i-- > 0;) value = (value << 8) | static_cast<unsigned char>(bytes[i]);
    return value;
  }
  std::int64_t read_long(std::uint64_t n) {
    if (n > 8) fail(fmt::format("an integer of {} bytes", n));
    if (n == 0) return 0;
    const char* bytes = read_bytes(n);
    std::uint64_t value = 0;
    for (std::size_t i = n; i-- > 0;) value = (value << 8) | static_cast<unsigned char>(bytes[i]);
    if (n < 8 && (static_cast<unsigned char>(bytes[n - 1]) & 0x80)) value |= ~std::uint64_t{0} << (8 * n);
    return static_cast<std::int64_t>(value);
  }
  std::string read_string(std::uint64_t n) {
    if (n > size_ - position_) fail("a string runs past the end");
    return std::string(read_bytes(n), n);
  }
  std::string read_line() {
    const void* end = std::memchr(data_ + position_, '\n', size_ - position_);
    if (end == nullptr) fail("a line runs past the end");
    const std::size_t n = static_cast<const char*>(end) - (data_ + position_);
    std::string line(read_bytes(n), n);
    read_bytes(1);
    return line;
  }
  std::int64_t parse_integer(const std::string& text) {
    try {
      return std::stoll(text);
    } catch (const std::exception&) {
      fail(fmt::format("a malformed integer '{}'", text));
    }
  }

  void push(PyRef value) { stack_.push_back(std::move(value)); }
  PyRef pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) fail("a value is missing");
    PyRef value = stack_.back();
    stack_.pop_back();
    return value;
  }
  PyRef& top() {
    if (stack_.empty()) fail("a value is missing");
    return stack_.back();
  }
  std::vector<PyRef> pop_to_mark() {
    if (marks_.empty()) fail("MARK is missing");
    const std::size_t mark = marks_.back();
    marks_.pop_back();
    if (mark > stack_.size()) fail("a MARK points past the stack");  // found by fuzzing
    std::vector<PyRef> items(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark);
    return items;
  }
  PyRef memo(std::uint64_t key) {
    auto it = memo_.find(key);
    if (it == memo_.end()) fail(fmt::format("memo entry {} is missing", key));
    return it->second;
  }
  void set_items(const PyRef& target, const std::vector<PyRef>& items) {
    if (items.size() % 2 != 0) fail("SETITEMS with an odd number of values");
    if (target->kind != PyValue::Kind::dict) return;  // an object's items are not needed
    for (std::size_t i = 0; i < items.size(); i += 2) {
      if (items[i]->kind == PyValue::Kind::string) {
        auto [it, inserted] = target->index.emplace(items[i]->text, target->entries.size());
        if (!inserted) {
          target->entries[it->second].second = items[i + 1];
          continue;
        }
      }
      target->entries.emplace_back(items[i], items[i + 1]);
    }
  }
  void append(const PyRef& target, const std::vector<PyRef>& items) {
    if (target->kind == PyValue::Kind::list) target->items.insert(target->items.end(), items.begin(), items.end());
  }

  PyRef reduce(const PyRef& callable, const PyRef& args) {
    if (callable->kind != PyValue::Kind::global) return make(PyValue::Kind::object);
    const std::string& name = callable->text;
    const std::vector<PyRef>& a = args->items;
    if (name == "collections.OrderedDict") return make(PyValue::Kind::dict);
    if (name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_tensor") {
      if (a.size() < 4 || a[0]->kind != PyValue::Kind::storage) fail(fmt::format("{} with malformed arguments", name));
      return rebuild_tensor(a[0]->tensor, integer_of(a[1]), integers_of(a[2]), integers_of(a[3]));
    }
    if (name == "torch._utils._rebuild_parameter" || name == "torch._utils._rebuild_parameter_with_state") {
      if (a.empty() || a[0]->kind != PyValue::Kind::tensor) fail(fmt::format("{} without a tensor", name));
      return a[0];
    }
    return make_text(PyValue::Kind::object, name);
  }

  std::int64_t integer_of(const PyRef& value) {
    if (value->kind != PyValue::Kind::integer) fail("an integer was expected");
    return value->integer;
  }
  std::vector<std::int64_t> integers_of(const PyRef& value) {
    if (value->kind != PyValue::Kind::tuple && value->kind != PyValue::Kind::list) fail("a tuple was expected");
    std::vector<std::int64_t> out;
    for (const PyRef& item : value->items) out.push_back(integer_of(item));
    return out;
  }

  PyRef rebuild_tensor(const torch::Tensor& storage, std::int64_t offset, const std::vector<std::int64_t>& size,
                       const std::vector<std::int64_t>& stride) {
    if (size.size() != stride.size()) fail("a tensor whose size and stride differ in length");
    std::int64_t numel = 1, last = offset;
    for (std::size_t i = 0; i < size.size(); ++i) {
      if (size[i] < 0 || stride[i] < 0) fail("a tensor with a negative size or stride");
      std::int64_t reach = 0;  // checked: a hostile size or stride must not wrap past 2^63
      if (__builtin_mul_overflow(numel, size[i], &numel) ||
          (size[i] > 0 &&
           (__builtin_mul_overflow(size[i] - 1, stride[i], &reach) || __builtin_add_overflow(last, reach, &last)))) {
        fail("a tensor whose size or stride overflows 64 bits");
      }
    }
    if (offset < 0 || (numel > 0 && last >= storage.numel())) fail("a tensor reaches past its storage");
    // A view with more elements than its storage repeats elements (a stride of 0): materialising
    // it would turn a few stored bytes into gigabytes before any shape is checked.
    if (numel > storage.numel()) {
      fail(fmt::format("a tensor of {} elements over a storage of {} (it repeats elements)", numel, storage.numel()));
    }
    std::vector<std::int64_t> contiguous(size.size(), 1);  // row-major strides of `size`
    for (std::size_t i = size.size(); i-- > 1;) contiguous[i - 1] = contiguous[i] * std::max<std::int64_t>(size[i], 1);
    PyRef value = make(PyValue::Kind::tensor);
    if (numel == storage.numel() && offset == 0 && stride == contiguous) {
      value->tensor = storage.view(size);  // the common case: the whole storage, no copy
    } else {
      value->tensor = storage.as_strided(size, stride, offset).clone(at::MemoryFormat::Contiguous);
    }
    return value;
  }

  PyRef persistent_load(const PyRef& pid) {
    const std::vector<PyRef>& a = pid->items;
    if (pid->kind != PyValue::Kind::tuple || a.size() < 5 || a[0]->kind != PyValue::Kind::string ||
        a[0]->text != "storage" || a[2]->kind != PyValue::Kind::string) {
      fail("a persistent id that is not a storage");
    }
    const std::string& key = a[2]->text;
    auto cached = storages_.find(key);
    if (cached != storages_.end()) return cached->second;
    const StorageType* type = nullptr;
    for (const StorageType& t : kStorageTypes) {
      if (a[1]->text == t.name) type = &t;
    }
    if (type == nullptr) fail(fmt::format("storage {} has an unsupported type {}", key, a[1]->text));
    const std::int64_t numel = integer_of(a[4]);
    const std::string record = "data/" + key;
    if (!archive_.hasRecord(record)) fail(fmt::format("the record {} of a storage is missing", record));
    // torch.save stores storages uncompressed: none may inflate past 4 times the file (+1 MiB).
    if (archive_bytes_ == 0) archive_bytes_ = std::filesystem::file_size(path_) + 1;
    record_size_check(archive_, record, 4 * archive_bytes_ + (1ull << 20), path_);
    auto [data_ptr, bytes] = archive_.getRecord(record);
    const std::size_t element = c10::elementSize(type->dtype);
    // numel * element is not formed: for a hostile numel it wraps past 2^64 (2^62 + 32 floats
    // "needed" 128 bytes), and the tensor read past the record.
    if (numel < 0 || static_cast<std::uint64_t>(numel) > bytes / element) {
      fail(fmt::format("storage {} holds {} bytes, fewer than {} elements of {} need", key, bytes, numel, a[1]->text));
    }
    auto owner = std::make_shared<at::DataPtr>(std::move(data_ptr));
    void* raw = owner->get();
    PyRef value = make(PyValue::Kind::storage);
    value->tensor = torch::from_blob(
        raw, {numel}, [owner](void*) {}, torch::TensorOptions().dtype(type->dtype));
    storages_[key] = value;
    return value;
  }

  std::string path_;
  caffe2::serialize::PyTorchStreamReader& archive_;
  const char* data_;
  std::size_t size_, position_ = 0;
  std::uint64_t archive_bytes_ = 0;  // the file's size (+1), once a storage is read
  std::vector<PyRef> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<std::uint64_t, PyRef> memo_;
  std::map<std::string, PyRef> storages_;
};

}  // namespace

// A record's inflated size, declared in the zip's directory, checked before it is inflated:
// a 3 MB file whose data.pkl inflates to 3 GiB reached 3.4 GB of memory. miniz
// inflates into a buffer of the declared size and fails when the stream gives more, so the
// declared size bounds what is allocated.
void record_size_check(caffe2::serialize::PyTorchStreamReader& archive, const std::string& record, std::uint64_t limit,
                       const std::string& path) {
  const std::uint64_t declared = archive.getRecordSize(record);
  if (declared > limit) {
    throw UsageError(with_hint(fmt::format("{}: its record {} declares {} bytes inflated, more than the {} this file "
                                           "may hold",
                                           path, record, declared, limit),
                               "torch.save stores records uncompressed; this one was inflated on purpose or damaged"));
  }
}

PyRef pickle_run(const std::string& path, caffe2::serialize::PyTorchStreamReader& archive, const char* data,
                 std::size_t size) {
  Interpreter interpreter(path, archive, data, size);
  return interpreter.run();
}

}  // namespace tfw::torch_pickle_detail
