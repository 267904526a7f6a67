// The safetensors codec and the checkpoint format built on it (issue 33, finding 1): a
// hand-built file, round trips with the real `safetensors` Python package, and every hostile
// header the parser must refuse before it allocates or reads out of bounds.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engine/checkpoint/checkpoint.h"
#include "engine/core/error.h"
#include "engine/core/files.h"
#include "engine/checkpoint/safetensors.h"
#include "tests/support.h"

namespace tfw {
namespace test_safetensors {

namespace fs = std::filesystem;

std::string with_length(const std::string& header) {
  std::string out;
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out + header;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// The message of the UsageError `body` throws ("" if none).
template <typename Body>
std::string refusal(Body body) {
  try {
    body();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

// A file built by hand: two tensors, little-endian data, metadata.
TEST(Safetensors, AHandBuiltFileReadsAsWritten) {
  const std::string header =
      R"({"b":{"dtype":"I16","shape":[3],"data_offsets":[8,14]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("__metadata__":{"who":"hand"}})";
  std::string data;
  for (float f : {1.5f, -2.0f}) data.append(reinterpret_cast<const char*>(&f), 4);
  for (std::int16_t v : {std::int16_t{7}, std::int16_t{-1}, std::int16_t{300}})
    data.append(reinterpret_cast<const char*>(&v), 2);
  const std::string file = with_length(header) + data;
  const SafetensorsFile parsed = safetensors_parse(file.data(), file.size(), "hand");
  ASSERT_EQ(parsed.tensors.size(), 2u);
  EXPECT_EQ(parsed.tensors[0].name, "a");  // sorted by name
  EXPECT_EQ(parsed.tensors[0].dtype, "F32");
  EXPECT_EQ(parsed.tensors[0].shape, std::vector<std::int64_t>{2});
  float second = 0;
  std::memcpy(&second, parsed.tensors[0].data + 4, 4);
  EXPECT_EQ(second, -2.0f);
  std::int16_t third = 0;
  std::memcpy(&third, parsed.tensors[1].data + 4, 2);
  EXPECT_EQ(third, 300);
  EXPECT_EQ(parsed.metadata.at("who"), "hand");
  // Encoded again: the same tensors and metadata give the same bytes, header padded to 8.
  std::vector<SafetensorsEntry> entries(parsed.tensors.begin(), parsed.tensors.end());
  const std::string encoded = safetensors_encode(entries, parsed.metadata);
  EXPECT_EQ(encoded, safetensors_encode(entries, parsed.metadata));
  EXPECT_EQ((encoded.size() - data.size()) % 8, 0u);
  const SafetensorsFile again = safetensors_parse(encoded.data(), encoded.size(), "again");
  EXPECT_EQ(std::string(again.tensors[1].data, 6), std::string(parsed.tensors[1].data, 6));
}

// Each hostile header is refused with a message naming the problem (before, the LibTorch
// loader read a checkpoint whose record was shorter than its storage, issue 33 finding 5).
TEST(Safetensors, HostileHeadersAreRefusedWithTheReason) {
  const std::string eight(8, '\0');
  struct Case {
    std::string name, bytes, expected;
  };
  auto one = [](const std::string& tensor, std::size_t data_bytes) {
    return with_length(R"({"t":)" + tensor + "}") + std::string(data_bytes, '\x01');
  };
  std::string huge_length(8, '\xff');
  std::string deep = "{\"t\":{\"dtype\":\"F32\",\"shape\":[[[[1]]]],\"data_offsets\":[0,4]}}";
  const std::vector<Case> cases = {
      {"too short", "abc", "fewer than the 8 of the header length"},
      {"header length 2^64-1", huge_length + "{}", "more than the limit"},
      {"header longer than the file", with_length("{}").substr(0, 8) + "{", "only 1 bytes follow"},
      {"not JSON", with_length("{\"t\":"), "not valid JSON"},
      {"not an object", with_length("[1,2]"), "not a JSON object"},
      {"nested too deeply", with_length(deep) + std::string(4, '\0'), "nests deeper"},
      {"unknown dtype", one(R"({"dtype":"F128","shape":[1],"data_offsets":[0,16]})", 16), "unknown dtype"},
      {"negative size", one(R"({"dtype":"F32","shape":[-1],"data_offsets":[0,4]})", 4), "not a non-negative integer"},
      {"size overflows", one(R"({"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,4]})", 4),
       "overflows 64 bits"},
      {"record shorter than the storage", one(R"({"dtype":"F32","shape":[16],"data_offsets":[0,64]})", 16),
       "outside the 16 bytes of data"},
      {"range disagrees with the shape", one(R"({"dtype":"F32","shape":[2],"data_offsets":[0,4]})", 4),
       "needs 8 bytes, its range holds 4"},
      {"trailing bytes", one(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})", 12), "the file 12"},
      {"overlap",
       with_length(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})") +
           std::string(8, '\0'),
       "overlap or leave a gap"},
      {"missing field", one(R"({"dtype":"F32","shape":[1]})", 4), "exactly dtype, shape and data_offsets"},
      {"metadata not strings", with_length(R"({"__metadata__":{"a":1}})"), "is not a string"},
      {"too many dimensions", one(R"({"dtype":"U8","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,1]})", 1),
       "at most 8 sizes"},
  };
  for (const Case& c : cases) {
    const std::string message =
        refusal([&] { safetensors_parse(c.bytes.data(), c.bytes.size(), "hostile.safetensors"); });
    EXPECT_NE(message.find(c.expected), std::string::npos) << c.name << ": " << message;
    if (!message.empty()) {
      EXPECT_NE(message.find("hostile.safetensors"), std::string::npos) << c.name;
    }
  }
}

// Issue 50: a header of 200,000 tensors took over a minute (nlohmann's callback parser rescans
// the header object at the end of each tensor's entry). Parsed in one pass, it reads in seconds.
TEST(Safetensors, AHeaderOfTwoHundredThousandTensorsReadsInLinearTime) {
  const int n = 200000;
  std::string header = "{";
  for (int i = 0; i < n; ++i) {
    header += fmt::format(R"("t{}":{{"dtype":"U8","shape":[1],"data_offsets":[{},{}]}},)", i, i, i + 1);
  }
  header.back() = '}';
  const std::string bytes = with_length(header) + std::string(n, '\x07');
  const auto start = std::chrono::steady_clock::now();
  const SafetensorsFile file = safetensors_parse(bytes.data(), bytes.size(), "many.safetensors");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(file.tensors.size(), static_cast<std::size_t>(n));
  EXPECT_LT(seconds, 20.0) << n << " tensors took " << seconds << " s";
}

// The real safetensors package (PyPI) reads our checkpoints, and we read its files.
TEST(Safetensors, RoundTripsWithThePythonPackage) {
  const fs::path dir = fs::temp_directory_path() / "tfw-test-safetensors-python";
  fs::remove_all(dir);
  fs::create_directories(dir);
  // Ours, read by Python: values, dtypes and metadata.
  std::vector<float> values = {0.25f, -1.0f, 3.0f, 1e-30f, 7.5f, -0.0f};
  std::vector<std::int64_t> longs = {-5, 1LL << 40};
  std::vector<SafetensorsEntry> entries(2);
  entries[0] = {"w", "F32", {2, 3}, 0, 0, reinterpret_cast<const char*>(values.data())};
  entries[1] = {"n", "I64", {2}, 0, 0, reinterpret_cast<const char*>(longs.data())};
  write_file((dir / "ours.safetensors").string(), safetensors_encode(entries, {{"note", "tfw"}}));
  const std::string check = fmt::format(
      "from safetensors import safe_open\n"
      "import torch\n"
      "f = safe_open('{0}/ours.safetensors', 'pt')\n"
      "assert f.metadata() == {{'note': 'tfw'}}, f.metadata()\n"
      "assert torch.equal(f.get_tensor('w'), torch.tensor([[0.25, -1.0, 3.0], [1e-30, 7.5, -0.0]]))\n"
      "assert torch.equal(f.get_tensor('n'), torch.tensor([-5, 2**40]))\n"
      "from safetensors.torch import save_file\n"
      "save_file({{'x': torch.arange(6, dtype=torch.float64).reshape(3, 2), 'b': torch.tensor([1.5], "
      "dtype=torch.bfloat16)}},"
      " '{0}/theirs.safetensors', metadata={{'from': 'python'}})\n",
      dir.string());
  write_file((dir / "check.py").string(), check);
  ASSERT_EQ(std::system((std::string(TFW_PYTHON) + " " + (dir / "check.py").string()).c_str()), 0);
  // Theirs, read by us.
  const std::string theirs = read_file((dir / "theirs.safetensors").string());
  const SafetensorsFile parsed = safetensors_parse(theirs.data(), theirs.size(), "theirs");
  ASSERT_EQ(parsed.tensors.size(), 2u);
  EXPECT_EQ(parsed.tensors[1].name, "x");
  EXPECT_EQ(parsed.tensors[1].dtype, "F64");
  EXPECT_EQ(parsed.tensors[1].shape, (std::vector<std::int64_t>{3, 2}));
  double last = 0;
  std::memcpy(&last, parsed.tensors[1].data + 40, 8);
  EXPECT_EQ(last, 5.0);
  EXPECT_EQ(parsed.tensors[0].dtype, "BF16");
  EXPECT_EQ(parsed.metadata.at("from"), "python");
  fs::remove_all(dir);
}

}  // namespace test_safetensors
}  // namespace tfw
