// See status.h.
#include "storage/status.h"

#include <array>
#include <utility>

namespace tfw {

namespace {

constexpr std::array<std::pair<RunStatus, const char*>, 6> kRunNames = {{{RunStatus::queued, "queued"},
                                                                         {RunStatus::running, "running"},
                                                                         {RunStatus::finished, "finished"},
                                                                         {RunStatus::failed, "failed"},
                                                                         {RunStatus::killed, "killed"},
                                                                         {RunStatus::crashed, "crashed"}}};
constexpr std::array<std::pair<JobStatus, const char*>, 5> kJobNames = {{{JobStatus::queued, "queued"},
                                                                         {JobStatus::running, "running"},
                                                                         {JobStatus::finished, "finished"},
                                                                         {JobStatus::failed, "failed"},
                                                                         {JobStatus::cancelled, "cancelled"}}};

template <typename Status, std::size_t N>
const char* name_of(const std::array<std::pair<Status, const char*>, N>& names, Status status) {
  for (const auto& [value, name] : names) {
    if (value == status) return name;
  }
  return "?";
}

template <typename Status, std::size_t N>
std::optional<Status> parse(const std::array<std::pair<Status, const char*>, N>& names, std::string_view text) {
  for (const auto& [value, name] : names) {
    if (text == name) return value;
  }
  return std::nullopt;
}

template <typename Status, std::size_t N>
std::string choices(const std::array<std::pair<Status, const char*>, N>& names) {
  std::string out;
  for (std::size_t i = 0; i < N; ++i) {
    if (i > 0) out += i + 1 == N ? " or " : ", ";
    out += names[i].second;
  }
  return out;
}

}  // namespace

const char* status_name(RunStatus status) { return name_of(kRunNames, status); }
const char* status_name(JobStatus status) { return name_of(kJobNames, status); }
std::optional<RunStatus> run_status_parse(std::string_view text) { return parse(kRunNames, text); }
std::optional<JobStatus> job_status_parse(std::string_view text) { return parse(kJobNames, text); }
std::string run_status_choices() { return choices(kRunNames); }
std::string job_status_choices() { return choices(kJobNames); }

bool status_final(RunStatus status) { return status != RunStatus::queued && status != RunStatus::running; }
bool status_final(JobStatus status) { return status != JobStatus::queued && status != JobStatus::running; }

}  // namespace tfw
