// A status enum's names as one table, and the three lookups over it: the name of a value,
// the value a name gives, and the choices for messages ("a, b or c"). storage/status.cpp
// builds RunStatus on it; other layers build their own statuses on it the same way (the
// engine service's JobStatus, workbench/service/job_queue.cpp), so every status reads and
// prints alike.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace tfw::detail {

template <typename Status, std::size_t N>
using StatusNames = std::array<std::pair<Status, const char*>, N>;

template <typename Status, std::size_t N>
const char* status_name_of(const StatusNames<Status, N>& names, Status status) {
  for (const auto& [value, name] : names) {
    if (value == status) return name;
  }
  return "?";
}

template <typename Status, std::size_t N>
std::optional<Status> status_parse(const StatusNames<Status, N>& names, std::string_view text) {
  for (const auto& [value, name] : names) {
    if (text == name) return value;
  }
  return std::nullopt;
}

template <typename Status, std::size_t N>
std::string status_choices(const StatusNames<Status, N>& names) {
  std::string out;
  for (std::size_t i = 0; i < N; ++i) {
    if (i > 0) out += i + 1 == N ? " or " : ", ";
    out += names[i].second;
  }
  return out;
}

}  // namespace tfw::detail
