// See profile.h.
#include "engine/train/profile.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>
#include <kineto/ActivityType.h>

#include "engine/core/error.h"

namespace tfw {

namespace fs = std::filesystem;
namespace kineto = torch::autograd::profiler;
using Clock = std::chrono::steady_clock;

namespace {

const char* const kMatmul = "matrix products";
const char* const kAttention = "attention";
const char* const kPattention = "Pattention normalisation";
const char* const kOther = "other element-wise work";
const char* const kOptimiser = "the optimiser";
const char* const kData = "data";
const char* const kGaps = "host gaps";
const char* const kOrder[] = {kMatmul, kAttention, kPattention, kOther, kOptimiser, kData, kGaps};

// The trainer's scopes (RECORD_USER_SCOPE in engine/train/trainer.cpp and engine/nn/pattention_fused.cpp):
// every operator inside one counts for it.
const std::map<std::string, const char*>& scopes() {
  static const std::map<std::string, const char*> map = {{"tfw::optimizer", kOptimiser},
                                                         {"tfw::data", kData},
                                                         {"tfw::pattention_norm", kPattention},
                                                         {"tfw::attention", kAttention}};
  return map;
}

bool contains(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

struct Span {
  std::uint64_t start, end;
  std::string name;
  int parent = -1;
  std::uint64_t children = 0;  // time inside its direct children
};

// CPU: each operator's own time on the training thread, inside the tfw::step scopes.
void cpu_categories(const std::vector<kineto::KinetoEvent>& events, ProfileReport& report) {
  std::uint64_t thread = 0;
  for (const auto& e : events) {
    if (e.name() == "tfw::step") thread = e.startThreadId();
  }
  std::vector<Span> spans;
  for (const auto& e : events) {
    if (e.deviceType() != c10::DeviceType::CPU || e.startThreadId() != thread || e.endNs() <= e.startNs()) continue;
    spans.push_back({e.startNs(), e.endNs(), e.name()});
  }
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.start != b.start ? a.start < b.start : a.end > b.end; });
  std::vector<int> stack;
  for (int i = 0; i < static_cast<int>(spans.size()); ++i) {
    while (!stack.empty() && spans[stack.back()].end <= spans[i].start) stack.pop_back();
    if (!stack.empty()) {
      spans[i].parent = stack.back();
      spans[stack.back()].children += std::min(spans[i].end, spans[stack.back()].end) - spans[i].start;
    }
    stack.push_back(i);
  }
  std::map<std::string, double> seconds;
  for (const Span& s : spans) {
    // The nearest scope around it decides; a span outside every tfw::step is not a step's.
    const char* category = nullptr;
    bool in_step = false;
    for (int at = static_cast<int>(&s - spans.data()); at >= 0; at = spans[at].parent) {
      if (spans[at].name == "tfw::step") in_step = true;
      if (category == nullptr) {
        if (auto it = scopes().find(spans[at].name); it != scopes().end()) category = it->second;
      }
    }
    if (!in_step) continue;
    if (s.name == "tfw::step") report.traced_seconds += static_cast<double>(s.end - s.start) * 1e-9;
    const std::string name = category != nullptr     ? category
                             : s.name == "tfw::step" ? kGaps  // the step's own time: between operators
                                                     : profile_category_of(s.name, false);
    seconds[name] += static_cast<double>(s.end - s.start - std::min(s.children, s.end - s.start)) * 1e-9;
  }
  for (const char* name : kOrder) report.categories.push_back({name, seconds[name]});
}

// CUDA: the trace's device spans (kernels, copies, memsets and the scopes' ranges there), the
// steps' host range and the data scopes' host time, for device_categories.
void cuda_categories(const std::vector<kineto::KinetoEvent>& events, ProfileReport& report) {
  std::uint64_t begin = UINT64_MAX, end = 0;
  double data = 0;
  std::vector<DeviceSpan> spans;
  for (const auto& e : events) {
    if (e.name() == "tfw::step" && e.deviceType() == c10::DeviceType::CPU) {
      begin = std::min(begin, e.startNs()), end = std::max(end, e.endNs());
    }
    if (e.name() == "tfw::data" && e.deviceType() == c10::DeviceType::CPU)
      data += static_cast<double>(e.durationNs()) * 1e-9;
    if (e.deviceType() != c10::DeviceType::CUDA || e.endNs() <= e.startNs()) continue;
    switch (static_cast<libkineto::ActivityType>(e.activityType())) {
      case libkineto::ActivityType::CONCURRENT_KERNEL:
      case libkineto::ActivityType::GPU_MEMCPY:
      case libkineto::ActivityType::GPU_MEMSET: spans.push_back({e.name(), e.startNs(), e.endNs(), false}); break;
      case libkineto::ActivityType::GPU_USER_ANNOTATION:
        spans.push_back({e.name(), e.startNs(), e.endNs(), true});
        break;
      default: break;
    }
  }
  device_categories(spans, begin, end, data, report);
}

}  // namespace

void device_categories(const std::vector<DeviceSpan>& spans, std::uint64_t begin, std::uint64_t end,
                       double data_seconds, ProfileReport& report) {
  // The scopes' ranges on the device, by start (they do not overlap one another: a step's
  // optimiser and each Pattention normalisation follow one another on one stream).
  std::vector<const DeviceSpan*> ranges;
  for (const DeviceSpan& s : spans) {
    if (s.annotation && scopes().count(s.name)) ranges.push_back(&s);
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const DeviceSpan* a, const DeviceSpan* b) { return a->start_ns < b->start_ns; });
  std::map<std::string, double> seconds;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> busy;
  for (const DeviceSpan& s : spans) {
    if (s.annotation) continue;
    const char* category = nullptr;
    auto after = std::upper_bound(ranges.begin(), ranges.end(), s.start_ns,
                                  [](std::uint64_t at, const DeviceSpan* r) { return at < r->start_ns; });
    if (after != ranges.begin() && s.end_ns <= (*std::prev(after))->end_ns)
      category = scopes().at((*std::prev(after))->name);
    seconds[category != nullptr ? category : profile_category_of(s.name, true)] +=
        static_cast<double>(s.end_ns - s.start_ns) * 1e-9;
    busy.emplace_back(s.start_ns, s.end_ns);
    end = std::max(end, s.end_ns);
  }
  std::sort(busy.begin(), busy.end());
  double covered = 0;
  std::uint64_t reach = 0;
  for (const auto& [from_ns, to_ns] : busy) {
    const std::uint64_t from = std::max(from_ns, reach);
    if (to_ns > from) covered += static_cast<double>(to_ns - from) * 1e-9;
    reach = std::max(reach, to_ns);
  }
  seconds[kData] = data_seconds;
  report.traced_seconds = begin < end ? static_cast<double>(end - begin) * 1e-9 : 0;
  seconds[kGaps] = std::max(0.0, report.traced_seconds - covered - data_seconds);
  for (const char* name : kOrder) report.categories.push_back({name, seconds[name]});
}

std::string profile_category_of(const std::string& name, bool device_kernel) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (device_kernel) {
    if (contains(lower, "pattention")) return kPattention;
    if (contains(lower, "flash") || contains(lower, "fmha") || contains(lower, "attention")) return kAttention;
    if (contains(lower, "gemm") || contains(lower, "cutlass") || contains(lower, "nvjet") || contains(lower, "xmma") ||
        contains(lower, "cublas")) {
      return kMatmul;
    }
    if (contains(lower, "adam")) return kOptimiser;
    return kOther;
  }
  static const std::set<std::string> matmul = {
      "aten::mm",    "aten::addmm", "aten::bmm",  "aten::baddbmm", "aten::addbmm", "aten::mv",
      "aten::addmv", "aten::dot",   "aten::vdot", "aten::matmul",  "aten::linear", "aten::_addmm_activation"};
  if (matmul.count(name)) return kMatmul;
  if (contains(lower, "scaled_dot_product") || contains(lower, "flash_attention") ||
      contains(lower, "efficient_attention")) {
    return kAttention;
  }
  if (contains(lower, "adam")) return kOptimiser;
  return kOther;
}

struct StepProfiler::State {
  State(std::int64_t first, std::int64_t count, bool cuda, std::string dir)
      : first(first), count(count), cuda(cuda), dir(std::move(dir)) {}
  std::int64_t first, count;
  bool cuda;
  std::string dir;
  bool active = false;
  Clock::time_point began;
  ProfileReport report;
};

StepProfiler::StepProfiler(std::int64_t first, std::int64_t count, bool cuda, std::string dir)
    : state_(std::make_unique<State>(first, count, cuda, std::move(dir))) {
  state_->report.device = cuda ? "cuda" : "cpu";
  state_->report.first_step = first;
  state_->report.last_step = first + count - 1;
}

StepProfiler::~StepProfiler() {
  if (state_->active) kineto::disableProfiler();  // an error inside the recorded steps
}

void StepProfiler::before_step(std::int64_t step) {
  State& s = *state_;
  if (step == s.first) {
    std::set<torch::profiler::impl::ActivityType> activities = {torch::profiler::impl::ActivityType::CPU};
    if (s.cuda) activities.insert(torch::profiler::impl::ActivityType::CUDA);
    const torch::profiler::impl::ProfilerConfig config(torch::profiler::impl::ProfilerState::KINETO);
    kineto::prepareProfiler(config, activities);
    if (s.cuda) torch::cuda::synchronize();
    kineto::enableProfiler(config, activities);
    s.active = true;
  }
  if (s.active) s.began = Clock::now();
}

bool StepProfiler::after_step(std::int64_t step) {
  State& s = *state_;
  if (!s.active) return false;
  if (s.cuda) torch::cuda::synchronize();  // the step's kernels are part of its time
  s.report.wall_seconds += std::chrono::duration<double>(Clock::now() - s.began).count();
  if (step < s.report.last_step) return false;
  s.active = false;
  std::unique_ptr<kineto::ProfilerResult> result = kineto::disableProfiler();
  fs::create_directories(s.dir);
  const std::string stem = fmt::format("{}/steps-{}-{}", s.dir, s.report.first_step, s.report.last_step);
  s.report.trace_path = stem + ".trace.json";
  result->save(s.report.trace_path);
  (s.cuda ? cuda_categories : cpu_categories)(result->events(), s.report);
  std::ofstream(stem + ".json") << profile_json(s.report) << "\n";
  return true;
}

const ProfileReport& StepProfiler::report() const { return state_->report; }

std::string profile_table(const ProfileReport& r) {
  const double steps = static_cast<double>(r.last_step - r.first_step + 1);
  std::string out =
      fmt::format("profile of steps {}-{} on the {} ({:.1f} ms a step as the trainer measured it):\n", r.first_step,
                  r.last_step, r.device == "cuda" ? "GPU" : "CPU", 1e3 * r.wall_seconds / steps);
  out += fmt::format("  {:<28} {:>7} {:>12}\n", "where the time went", "share", "ms a step");
  for (const ProfileCategory& c : r.categories) {
    out += fmt::format("  {:<28} {:>6.1f}% {:>12.3f}\n", c.name,
                       r.wall_seconds > 0 ? 100 * c.seconds / r.wall_seconds : 0, 1e3 * c.seconds / steps);
  }
  const double missed = r.wall_seconds - r.traced_seconds;
  out += fmt::format("  {:<28} {:>6.1f}% {:>12.3f}\n", "outside the trace",
                     r.wall_seconds > 0 ? 100 * missed / r.wall_seconds : 0, 1e3 * missed / steps);
  out += fmt::format("  trace: {} (open it in https://ui.perfetto.dev or chrome://tracing)", r.trace_path);
  return out;
}

std::string profile_json(const ProfileReport& r) {
  nlohmann::json categories = nlohmann::json::array();
  for (const ProfileCategory& c : r.categories) categories.push_back({{"name", c.name}, {"seconds", c.seconds}});
  return nlohmann::json{{"device", r.device},
                        {"first_step", r.first_step},
                        {"last_step", r.last_step},
                        {"wall_seconds", r.wall_seconds},
                        {"traced_seconds", r.traced_seconds},
                        {"categories", categories},
                        {"trace", r.trace_path}}
      .dump(2);
}

}  // namespace tfw
