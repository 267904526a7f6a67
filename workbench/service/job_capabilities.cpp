// See job_capabilities.h.
#include "workbench/service/job_capabilities.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/core/json_bounded.h"

namespace tfw::service {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr std::uintmax_t kMaxBytes = 4u << 20;
constexpr std::size_t kMaxJobs = 10000;

std::string state_dir() {
  if (const char* dir = std::getenv("TFW_STATE_DIR"); dir != nullptr && *dir != '\0') return dir;
  if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg != nullptr && *xdg != '\0') return std::string(xdg) + "/tfw";
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr && *home != '\0' ? home : "/tmp") + "/.local/state/tfw";
}

// The kept jobs, oldest first: [{"address", "job", "name", "capability"}]. A missing, oversized
// or damaged file reads as none (it only ever held this client's own keys).
json read_jobs(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec) || fs::file_size(path, ec) > kMaxBytes) return json::array();
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  json parsed;
  if (!json_parse_bounded(text.str(), JsonBounds{4, kMaxJobs + 1, 5 * (kMaxJobs + 1)}, parsed).empty() ||
      !parsed.is_object() || !parsed.contains("jobs") || !parsed["jobs"].is_array()) {
    return json::array();
  }
  json jobs = json::array();
  for (const json& j : parsed["jobs"]) {
    if (j.is_object() && j.value("address", json()).is_string() && j.value("job", json()).is_number_integer() &&
        j.value("name", json()).is_string() && j.value("capability", json()).is_string()) {
      jobs.push_back(j);
    }
  }
  return jobs;
}

// Runs `f` holding an exclusive lock beside the file, so two clients do not lose each other's jobs.
template <class F>
auto with_lock(const std::string& dir, F f) {
  const int fd = ::open((dir + "/jobs.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd >= 0) ::flock(fd, LOCK_EX);
  struct Unlock {
    int fd;
    ~Unlock() {
      if (fd >= 0) ::close(fd);
    }
  } unlock{fd};
  return f();
}

}  // namespace

std::string job_capabilities_path() { return state_dir() + "/jobs.json"; }

void job_capability_keep(const std::string& address, std::int64_t job, const std::string& name,
                         const std::string& capability) {
  if (capability.empty()) return;
  const std::string dir = state_dir(), path = job_capabilities_path();
  std::error_code ec;
  fs::create_directories(dir, ec);
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  const bool kept = with_lock(dir, [&] {
    json jobs = read_jobs(path);
    jobs.push_back({{"address", address}, {"job", job}, {"name", name}, {"capability", capability}});
    if (jobs.size() > kMaxJobs) jobs.erase(jobs.begin(), jobs.begin() + static_cast<long>(jobs.size() - kMaxJobs));
    const std::string temp = fmt::format("{}.tmp-{}", path, ::getpid());
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return false;
    const std::string text = json{{"jobs", jobs}}.dump() + "\n";
    const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
    ::close(fd);
    std::error_code rename_error;
    if (written) fs::rename(temp, path, rename_error);
    if (!written || rename_error) fs::remove(temp, rename_error);
    return written && !rename_error;
  });
  if (!kept) {
    std::cerr << fmt::format(
        "tfw: warning: could not keep job {}'s capability in {}: this client cannot cancel the "
        "job, nor resubmit its name; its capability is {}\n",
        job, path, capability);
  }
}

namespace {

// The newest kept capability of the service at `address` whose entry has `value` under `key`.
std::string kept(const std::string& address, const char* key, const json& value) {
  const json jobs = read_jobs(job_capabilities_path());
  for (auto it = jobs.rbegin(); it != jobs.rend(); ++it) {
    if ((*it)["address"] == address && (*it)[key] == value) return (*it)["capability"];
  }
  return "";
}

}  // namespace

std::string job_capability_of_job(const std::string& address, std::int64_t job) { return kept(address, "job", job); }

std::string job_capability_of_name(const std::string& address, const std::string& name) {
  return kept(address, "name", name);
}

json job_submit(const std::string& address, const std::string& name, json message, const JobRequest& send) {
  if (std::string held = job_capability_of_name(address, name); !held.empty()) message["capability"] = held;
  json reply = send(message);
  job_capability_keep(address, reply.value("job", std::int64_t{0}), reply.value("name", name),
                      reply.value("capability", ""));
  return reply;
}

json job_cancel(const std::string& address, std::int64_t job, const JobRequest& send) {
  return send({{"type", "cancel"}, {"job", job}, {"capability", job_capability_of_job(address, job)}});
}

}  // namespace tfw::service
