// The local executor: each task's steps are child processes of this one (process.h), each in
// its own process group with its output in the task's log, `slots` tasks at a time with the
// cores split between them. It dies with its parent: a step's process group gets SIGTERM
// (PR_SET_PDEATHSIG), so its training checkpoints and can resume.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runner/executor.h"
#include "engine/core/process.h"

namespace tfw::runner {

struct LocalOptions {
  std::string program;                   // the tfw executable (default: this one)
  std::size_t slots = 1;                 // tasks at once
  int threads = 0;                       // torch threads per step (0: threads_default() / slots)
  int nproc = 1;                         // ranks per training (tfw train --nproc), sharing the slot's threads
  std::string cwd;                       // working folder of the steps ("" : ours)
  std::vector<std::string> environment;  // NAME=VALUE for the steps (e.g. TFW_CONFINE)
};

class LocalExecutor final : public Executor {
 public:
  explicit LocalExecutor(LocalOptions options);
  ~LocalExecutor() override;  // stops and reaps whatever still runs

  std::string describe() const override;
  std::size_t capacity() const override { return options_.slots; }
  std::size_t active() const override;
  void submit(const Task& task) override;
  TaskStatus status(const std::string& name) const override;
  void cancel(const std::string& name) override;
  std::vector<std::string> poll(double seconds) override;

 private:
  struct Entry {
    Task task;
    TaskStatus status;
    Process process;
    bool cancelled = false;
  };
  void start_step(Entry& entry);
  bool advance(Entry& entry);  // true when it became final
  LocalOptions options_;
  std::map<std::string, Entry> tasks_;
  std::vector<std::string> order_;  // submission order: pending tasks start first come, first served
};

}  // namespace tfw::runner
