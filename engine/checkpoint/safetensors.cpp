// safetensors, read and written by our own bounded code. See safetensors.h.
#include "engine/checkpoint/safetensors.h"

#include <algorithm>
#include <cstring>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/core/json_bounded.h"

namespace tfw {

namespace {

struct DtypeSize {
  const char* name;
  std::size_t bytes;
};

constexpr DtypeSize kDtypes[] = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
                                 {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1}};

[[noreturn]] void refuse(const std::string& what, const std::string& why) {
  throw UsageError(with_hint(fmt::format("{}: not a valid safetensors file: {}", what, why),
                             "the file is damaged, truncated or not written by a safetensors writer"));
}

std::uint64_t read_u64_le(const char* bytes) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  return value;
}

// A non-negative JSON integer (shape or offset), or the reason it is not one.
std::uint64_t json_count(const nlohmann::json& value, const std::string& what, const std::string& field) {
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  if (value.is_number_integer() && value.get<std::int64_t>() >= 0)
    return static_cast<std::uint64_t>(value.get<std::int64_t>());
  refuse(what, fmt::format("{} holds {}, not a non-negative integer", field,
                           value.is_number() ? "a negative or fractional number" : value.type_name()));
}

// One tensor's header entry, checked against the format and the `data_size` bytes of data.
SafetensorsEntry entry_parse(const std::string& name, const nlohmann::json& value, std::uint64_t data_size,
                             const std::string& what) {
  if (name.empty() || name.size() > kSafetensorsMaxName) {
    refuse(what, fmt::format("a tensor name of {} bytes (1 to {} allowed)", name.size(), kSafetensorsMaxName));
  }
  if (!value.is_object()) refuse(what, fmt::format("tensor '{}' is not an object", name));
  const auto dtype = value.find("dtype"), shape = value.find("shape"), offsets = value.find("data_offsets");
  if (dtype == value.end() || shape == value.end() || offsets == value.end() || value.size() != 3) {
    refuse(what, fmt::format("tensor '{}' needs exactly dtype, shape and data_offsets", name));
  }
  SafetensorsEntry entry;
  entry.name = name;
  if (!dtype->is_string()) refuse(what, fmt::format("tensor '{}' has a dtype that is not a string", name));
  entry.dtype = dtype->get<std::string>();
  const std::size_t element = safetensors_element_size(entry.dtype);
  if (element == 0)
    refuse(what, fmt::format("tensor '{}' has the unknown dtype '{}'", name, entry.dtype.substr(0, 16)));
  if (!shape->is_array() || shape->size() > kSafetensorsMaxRank) {
    refuse(what,
           fmt::format("tensor '{}' has a shape that is not an array of at most {} sizes", name, kSafetensorsMaxRank));
  }
  std::uint64_t bytes_needed = element;
  for (const nlohmann::json& dim : *shape) {
    const std::uint64_t n = json_count(dim, what, fmt::format("the shape of '{}'", name));
    if (n > static_cast<std::uint64_t>(INT64_MAX) || __builtin_mul_overflow(bytes_needed, n, &bytes_needed)) {
      refuse(what, fmt::format("tensor '{}' has a shape whose size overflows 64 bits", name));
    }
    entry.shape.push_back(static_cast<std::int64_t>(n));
  }
  if (!offsets->is_array() || offsets->size() != 2) {
    refuse(what, fmt::format("tensor '{}' has data_offsets that are not [begin, end]", name));
  }
  entry.begin = json_count((*offsets)[0], what, fmt::format("the data_offsets of '{}'", name));
  entry.end = json_count((*offsets)[1], what, fmt::format("the data_offsets of '{}'", name));
  if (entry.begin > entry.end || entry.end > data_size) {
    refuse(what, fmt::format("tensor '{}' has the byte range [{}, {}), outside the {} bytes of data", name, entry.begin,
                             entry.end, data_size));
  }
  if (entry.end - entry.begin != bytes_needed) {
    refuse(what, fmt::format("tensor '{}' of shape {} and dtype {} needs {} bytes, its range holds {}", name,
                             shape->dump(), entry.dtype, bytes_needed, entry.end - entry.begin));
  }
  return entry;
}

}  // namespace

std::size_t safetensors_element_size(const std::string& dtype) {
  for (const DtypeSize& d : kDtypes) {
    if (dtype == d.name) return d.bytes;
  }
  return 0;
}

SafetensorsFile safetensors_parse(const char* bytes, std::size_t size, const std::string& what) {
  if (size < 8) refuse(what, fmt::format("{} bytes, fewer than the 8 of the header length", size));
  const std::uint64_t header_size = read_u64_le(bytes);
  if (header_size > kSafetensorsMaxHeader) {
    refuse(what,
           fmt::format("a header of {} bytes, more than the limit of {} bytes", header_size, kSafetensorsMaxHeader));
  }
  if (header_size > size - 8) {
    refuse(what, fmt::format("a header of {} bytes, but only {} bytes follow the length", header_size, size - 8));
  }
  const char* header = bytes + 8;
  const char* data = header + header_size;
  const std::uint64_t data_size = size - 8 - header_size;

  // Depth and counts are bounded while parsing, before the tree grows: a header is an object of
  // objects whose deepest values are the shape and offset arrays (3 levels); a tensor's entry is
  // 3 containers and about 12 values (with its shape's dimensions).
  const std::size_t entries = kSafetensorsMaxTensors + kSafetensorsMaxMetadata;
  nlohmann::json root;
  const std::string why =
      json_parse_bounded(std::string_view(header, header_size), {3, 3 * entries + 1, 16 * entries}, root);
  if (!why.empty()) {
    refuse(what, why.rfind("is not", 0) == 0 ? "its header " + why
                                             : fmt::format("its header {} (at most {} tensors and {} metadata entries)",
                                                           why, kSafetensorsMaxTensors, kSafetensorsMaxMetadata));
  }
  if (!root.is_object()) refuse(what, "its header is not a JSON object");

  SafetensorsFile file;
  for (const auto& [name, value] : root.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) refuse(what, "__metadata__ is not an object");
      if (value.size() > kSafetensorsMaxMetadata) {
        refuse(what, fmt::format("__metadata__ has {} entries, more than the limit of {}", value.size(),
                                 kSafetensorsMaxMetadata));
      }
      for (const auto& [key, text] : value.items()) {
        if (!text.is_string()) refuse(what, fmt::format("__metadata__ entry '{}' is not a string", key.substr(0, 64)));
        file.metadata[key] = text.get<std::string>();
      }
      continue;
    }
    if (file.tensors.size() >= kSafetensorsMaxTensors) {
      refuse(what, fmt::format("more than {} tensors", kSafetensorsMaxTensors));
    }
    SafetensorsEntry entry = entry_parse(name, value, data_size, what);
    entry.data = data + entry.begin;
    file.tensors.push_back(std::move(entry));
  }
  // The ranges tile the data exactly: no overlap (two tensors sharing bytes), no gap, nothing after.
  std::vector<const SafetensorsEntry*> by_offset;
  by_offset.reserve(file.tensors.size());
  for (const SafetensorsEntry& entry : file.tensors) by_offset.push_back(&entry);
  std::sort(by_offset.begin(), by_offset.end(), [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  std::uint64_t cursor = 0;
  for (const SafetensorsEntry* entry : by_offset) {
    if (entry->begin != cursor) {
      refuse(what, fmt::format("tensor '{}' starts at byte {} of the data, where {} was expected (the ranges "
                               "overlap or leave a gap)",
                               entry->name, entry->begin, cursor));
    }
    cursor = entry->end;
  }
  if (cursor != data_size) {
    refuse(what, fmt::format("the tensors hold {} bytes of data, the file {}", cursor, data_size));
  }
  std::sort(file.tensors.begin(), file.tensors.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return file;
}

std::string safetensors_encode(std::vector<SafetensorsEntry> tensors,
                               const std::map<std::string, std::string>& metadata) {
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    SafetensorsEntry& entry = tensors[i];
    if (i > 0 && tensors[i - 1].name == entry.name)
      throw Error(fmt::format("safetensors: the name '{}' twice", entry.name));
    if (entry.name == "__metadata__") throw Error("safetensors: a tensor may not be named __metadata__");
    const std::size_t element = safetensors_element_size(entry.dtype);
    if (element == 0) throw Error(fmt::format("safetensors: unknown dtype '{}'", entry.dtype));
    std::uint64_t bytes = element;
    for (std::int64_t n : entry.shape) bytes *= static_cast<std::uint64_t>(n);
    entry.begin = offset;
    entry.end = offset + bytes;
    offset = entry.end;
    header[entry.name] = {{"dtype", entry.dtype}, {"shape", entry.shape}, {"data_offsets", {entry.begin, entry.end}}};
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + text.size() + offset);
  const std::uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += text;
  for (const SafetensorsEntry& entry : tensors) out.append(entry.data, entry.end - entry.begin);
  return out;
}

}  // namespace tfw
