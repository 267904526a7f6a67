// See executor_local.h.
#include "runner/executor_local.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/machine/cores.h"

namespace tfw::runner {

LocalExecutor::LocalExecutor(LocalOptions options) : options_(std::move(options)) {
  if (options_.slots < 1) options_.slots = 1;
  if (options_.program.empty()) options_.program = self_executable();
  if (options_.threads < 1) {
    options_.threads = std::max(1, threads_default() / static_cast<int>(options_.slots));
  }
}

LocalExecutor::~LocalExecutor() {
  for (auto& [name, entry] : tasks_) {
    if (entry.process.running()) {
      entry.process.signal(SIGTERM);
      entry.process.wait();
    }
  }
}

std::string LocalExecutor::describe() const {
  return fmt::format("local, {} slot{} of {} thread{}", options_.slots, options_.slots == 1 ? "" : "s",
                     options_.threads, options_.threads == 1 ? "" : "s");
}

std::size_t LocalExecutor::active() const {
  return static_cast<std::size_t>(std::count_if(
      tasks_.begin(), tasks_.end(), [](const auto& item) { return !task_final(item.second.status.state); }));
}

void LocalExecutor::submit(const Task& task) {
  if (task.steps.empty()) throw Error(fmt::format("task '{}' has no steps", task.name));
  auto found = tasks_.find(task.name);
  if (found != tasks_.end() && !task_final(found->second.status.state)) {
    throw Error(fmt::format("task '{}' is already submitted and not finished", task.name));
  }
  if (found != tasks_.end()) order_.erase(std::find(order_.begin(), order_.end(), task.name));
  Entry entry;
  entry.task = task;
  tasks_[task.name] = std::move(entry);
  order_.push_back(task.name);
}

TaskStatus LocalExecutor::status(const std::string& name) const {
  auto found = tasks_.find(name);
  if (found == tasks_.end()) throw UsageError(fmt::format("no task '{}' was submitted", name));
  return found->second.status;
}

void LocalExecutor::cancel(const std::string& name) {
  auto found = tasks_.find(name);
  if (found == tasks_.end() || task_final(found->second.status.state)) return;
  Entry& entry = found->second;
  entry.cancelled = true;
  if (entry.status.state == TaskState::pending) {
    entry.status.state = TaskState::cancelled;
    return;
  }
  entry.process.signal(SIGTERM);  // a training checkpoints and exits with 130
}

void LocalExecutor::start_step(Entry& entry) {
  ProcessSpec spec;
  spec.argv = {options_.program, "--threads", std::to_string(options_.threads)};
  const std::vector<std::string>& step = entry.task.steps[entry.status.step];
  spec.argv.insert(spec.argv.end(), step.begin(), step.end());
  if (options_.nproc > 1 && !step.empty() && step.front() == "train") {
    spec.argv.insert(spec.argv.end(), {"--nproc", std::to_string(options_.nproc)});  // the slot's threads are split
  }
  spec.log_path = entry.task.log_path;
  spec.cwd = options_.cwd;
  spec.environment = options_.environment;
  entry.process = Process::spawn(spec);
  entry.status.state = TaskState::running;
}

bool LocalExecutor::advance(Entry& entry) {
  if (entry.status.state != TaskState::running) return false;
  const std::optional<int> code = entry.process.poll();
  if (!code) return false;
  entry.status.exit_code = *code;
  if (*code != 0) {
    entry.status.state = entry.cancelled ? TaskState::cancelled : TaskState::failed;
    return true;
  }
  if (entry.cancelled || entry.status.step + 1 == entry.task.steps.size()) {
    entry.status.state = entry.cancelled ? TaskState::cancelled : TaskState::succeeded;
    return true;
  }
  ++entry.status.step;
  start_step(entry);
  return false;
}

std::vector<std::string> LocalExecutor::poll(double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::vector<std::string> ended;
  while (true) {
    std::size_t running = 0;
    for (const std::string& name : order_) {
      Entry& entry = tasks_[name];
      if (advance(entry)) ended.push_back(name);
      running += entry.status.state == TaskState::running;
    }
    for (const std::string& name : order_) {
      Entry& entry = tasks_[name];
      if (running >= options_.slots) break;
      if (entry.status.state != TaskState::pending) continue;
      start_step(entry);
      ++running;
    }
    if (!ended.empty() || std::chrono::steady_clock::now() >= deadline) return ended;
    // Short sleeps: a signal to this process cuts them short (EINTR), and a child's end is
    // seen within 50 ms.
    usleep(50 * 1000);
  }
}

}  // namespace tfw::runner
