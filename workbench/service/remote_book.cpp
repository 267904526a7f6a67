// See remote_book.h. The wire messages are in docs/service.md ("Recording runs").
#include "workbench/service/remote_book.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <mutex>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/checkpoint/checkpoint_meta.h"
#include "engine/core/env_choice.h"
#include "engine/core/error.h"
#include "storage/status.h"
#include "workbench/service/client.h"

namespace tfw::service {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

constexpr std::size_t kBatch = 2000;  // points and events per message (well inside kMaxLine)

// The capability the service gave for a run (record_create) is kept in the run's folder, so a
// later `tfw train --resume DIR --record-to` holds it too; readable by its owner only.
constexpr const char* kCapabilityFile = "record-capability";

std::string capability_read(const std::string& run_dir) {
  std::ifstream in(run_dir + "/" + kCapabilityFile);
  std::string capability;
  if (in) std::getline(in, capability);
  return capability.size() <= 64 ? capability : std::string();
}

void capability_write(const std::string& run_dir, const std::string& capability) {
  const std::string path = run_dir + "/" + kCapabilityFile;
  const int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) throw Error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  const std::string line = capability + "\n";
  const bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  if (!ok) throw Error(fmt::format("cannot write {}", path));
}

// One queued item: a message to send as is, or a point/event that is batched.
struct Item {
  enum Kind { point, event, message } kind = message;
  json body;                 // point: [key, step, tokens, flops, wall, value]; event: [step, kind, payload]; message
  std::uint64_t ticket = 0;  // message: who waits for its reply (0: nobody)
  std::int64_t run = 0;
};

class RemoteRunBook final : public runner::RunBook {
 public:
  RemoteRunBook(std::string address, std::string token_file, double timeout)
      : address_(std::move(address)), token_file_(std::move(token_file)), timeout_(timeout) {
    client_ = std::make_unique<Client>(address_, token_file_);  // an unreachable service or a bad token: now
    std::random_device random;
    open_id_ = fmt::format("{:016x}{:016x}", static_cast<std::uint64_t>(random()) << 32 | random(),
                           static_cast<std::uint64_t>(random()) << 32 | random());
    thread_ = std::thread([this] { loop(); });
  }

  ~RemoteRunBook() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

  std::string describe() const override { return "service " + address_; }

  std::pair<std::string, std::int64_t> resolve(const std::string& run, const std::string& home) override {
    // A folder here is matched by its path; otherwise the service names the run's folder,
    // which must be here (checkpoints stay on this machine's file system).
    for (const std::string& dir : {run, home + "/runs/" + run}) {
      if (!fs::is_directory(dir)) continue;
      const json reply = call({{"type", "record_resolve"}, {"run_dir", fs::absolute(dir).string()}});
      hold(reply.value("id", std::int64_t{0}), capability_read(dir));
      return {dir, reply.value("id", std::int64_t{0})};
    }
    const json reply = call({{"type", "record_resolve"}, {"run", run}});
    const std::string dir = reply.value("run_dir", "");
    if (reply.value("id", std::int64_t{0}) == 0 || !fs::is_directory(dir)) {
      throw UsageError(
          with_hint(fmt::format("run '{}' not found: not a run folder here, and the service at {} {}", run, address_,
                                reply.value("id", std::int64_t{0}) == 0
                                    ? "knows no run of that id or name"
                                    : "has its folder at " + dir + ", which is not on this machine"),
                    "resume with the run's folder (`tfw train --resume DIR --record-to ...`)"));
    }
    hold(reply["id"].get<std::int64_t>(), capability_read(dir));
    return {dir, reply["id"].get<std::int64_t>()};
  }

  void clear_name(const std::string& experiment, const std::string& name, const std::string& run_dir,
                  const std::function<void(const std::string&)>& say) override {
    const json reply = call({{"type", "record_clear"},
                             {"experiment", experiment},
                             {"name", name},
                             {"capability", capability_read(run_dir)}});
    if (say && !reply.value("message", "").empty()) say(reply["message"].get<std::string>());
  }

  std::int64_t create(RunRecord record, const runner::LineageSource* source) override {
    json message = {{"type", "record_create"},
                    {"open_id", open_id_},
                    {"record",
                     {{"experiment", record.experiment},
                      {"name", record.name},
                      {"family", record.family},
                      {"config", record.config},
                      {"seed", record.seed},
                      {"git_commit", record.git_commit},
                      {"host", record.host},
                      {"parameters", record.parameters},
                      {"run_dir", record.run_dir}}}};
    if (source != nullptr) {
      message["lineage"] = {
          {"checkpoint", source->checkpoint},           {"parent_run", source->parent_run},
          {"inherited_flops", source->inherited_flops}, {"growth_method", source->growth_method},
          {"growth_options", source->growth_options},   {"parent_capability", parent_capability(*source)}};
    }
    const json reply = call(message);
    const std::int64_t run = reply.at("run").get<std::int64_t>();
    const std::string capability = reply.value("capability", "");
    if (!record.run_dir.empty() && !capability.empty()) capability_write(record.run_dir, capability);
    hold(run, capability);
    return run;
  }

  void resume(std::int64_t run, const std::string& config, std::int64_t step) override {
    call({{"type", "record_resume"}, {"run", run}, {"config", config}, {"step", step}});
  }

  void beat(std::int64_t run, bool on) override {
    std::lock_guard<std::mutex> lock(mutex_);
    beating_ = on ? run : 0;
  }

  void metric(const MetricPoint& p) override {
    enqueue({Item::point,
             json::array(
                 {p.key, p.step, p.tokens, p.flops, p.wall, std::isfinite(p.value) ? json(p.value) : json(nullptr)}),
             0, p.run});
  }

  void event(const EventRow& row) override {
    enqueue({Item::event, json::array({row.step, row.kind, row.payload}), 0, row.run});
  }

  void flush() override { wait_for(enqueue({Item::message, json{{"type", "record_flush"}}, next_ticket(), 0})); }

  void checkpoint_added(const CheckpointRow& row, std::int64_t tokens, double flops) override {
    enqueue({Item::message,
             json{{"type", "record_checkpoint"},
                  {"run", row.run},
                  {"step", row.step},
                  {"bytes", row.bytes},
                  {"path", row.path},
                  {"checksum", row.checksum},
                  {"tokens", tokens},
                  {"flops", flops}},
             0, row.run});
  }

  void checkpoint_removed(std::int64_t run, const std::string& path) override {
    enqueue({Item::message, json{{"type", "record_checkpoint"}, {"run", run}, {"removed", path}}, 0, run});
  }

  void finish(std::int64_t run, RunStatus status, std::int64_t tokens, double flops, const std::string& final_metrics,
              const std::string& error) override {
    beat(run, false);
    wait_for(enqueue({Item::message,
                      json{{"type", "record_finish"},
                           {"run", run},
                           {"status", status_name(status)},
                           {"tokens", tokens},
                           {"flops", flops},
                           {"final_metrics", final_metrics},
                           {"error", error}},
                      next_ticket(), run}));
  }

 private:
  // The service attaches a run under its parent only for the parent's holder: the
  // capability of the run it grows from, held in this process or kept in that run's folder
  // (a grown checkpoint names its parent's checkpoint; a plain one lies in its run's folder).
  std::string parent_capability(const runner::LineageSource& source) {
    if (source.parent_run != 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (auto it = capabilities_.find(source.parent_run); it != capabilities_.end()) return it->second;
    }
    fs::path from = source.checkpoint;
    try {
      const CheckpointMeta meta = checkpoint_read_meta(source.checkpoint);
      if (meta.parent_run != 0 && !meta.parent_checkpoint.empty()) from = meta.parent_checkpoint;
    } catch (const std::exception&) {}
    // RUN_DIR/checkpoints/step-N.safetensors: the run's folder is two up.
    std::error_code ec;
    const fs::path run_dir = from.parent_path().parent_path();
    return fs::is_regular_file(run_dir / kCapabilityFile, ec) ? capability_read(run_dir.string()) : std::string();
  }

  void hold(std::int64_t run, const std::string& capability) {
    if (run == 0 || capability.empty()) return;
    std::lock_guard<std::mutex> lock(mutex_);
    capabilities_[run] = capability;
  }

  std::uint64_t next_ticket() {
    std::lock_guard<std::mutex> lock(mutex_);
    return ++tickets_;
  }

  std::uint64_t enqueue(Item item) {
    const std::uint64_t ticket = item.ticket;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!failure_.empty()) {
        unsent_ += 1;
        if (ticket != 0) throw Error(failure_);
        return ticket;
      }
      queue_.push_back(std::move(item));
    }
    wake_.notify_all();
    return ticket;
  }

  // Waits for the reply to `ticket`'s message.
  json wait_for(std::uint64_t ticket) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return replies_.count(ticket) > 0 || !failure_.empty(); });
    if (auto it = replies_.find(ticket); it != replies_.end()) {
      json reply = std::move(it->second);
      replies_.erase(it);
      if (reply.value("type", "") == "error") throw UsageError(reply.value("error", "the service refused the record"));
      return reply;
    }
    throw Error(failure_);
  }

  // A synchronous request (before training, or its end).
  json call(json message) {
    const std::uint64_t ticket = next_ticket();
    enqueue({Item::message, std::move(message), ticket, 0});
    return wait_for(ticket);
  }

  // Sends one message, reconnecting until it is answered or the time runs out.
  json exchange(const json& message, std::string& failure) {
    Clock::time_point lost{};
    bool said = false;
    double pause = 0.5;
    while (true) {
      try {
        if (!client_) client_ = std::make_unique<Client>(address_, token_file_, 10);
        client_->send(message);
        json reply = client_->receive(60);
        if (said) std::fprintf(stderr, "tfw: the service at %s is back; recording goes on\n", address_.c_str());
        return reply;
      } catch (const UsageError& e) {  // refused (a token that changed): not a network problem
        failure = fmt::format("the service at {} refused the record: {}", address_, e.what());
        return json();
      } catch (const std::exception& error) {
        const std::string what = first_line(error.what());
        client_.reset();
        if (lost == Clock::time_point{}) lost = Clock::now();
        const double out = std::chrono::duration<double>(Clock::now() - lost).count();
        if (!said) {
          std::fprintf(stderr, "tfw: lost the service at %s (%s); keeping the records and retrying for up to %g s\n",
                       address_.c_str(), what.c_str(), timeout_);
          said = true;
        }
        if (out >= timeout_) {
          failure = fmt::format("gave up on the service at {} after {:.0f} s without it ({})", address_, out, what);
          return json();
        }
        {
          std::unique_lock<std::mutex> lock(mutex_);
          wake_.wait_for(lock, std::chrono::duration<double>(pause), [&] { return stopping_ && queue_.empty(); });
        }
        pause = std::min(5.0, pause * 2);
      }
    }
  }

  void loop() {
    Clock::time_point last_sent = Clock::now();
    while (true) {
      std::vector<Item> batch;
      json message;
      std::uint64_t ticket = 0;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait_for(lock, std::chrono::milliseconds(500), [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) {
          if (stopping_) return;
          // The heartbeat: an empty batch every 2 s while the run trains.
          if (beating_ == 0 || Clock::now() - last_sent < std::chrono::seconds(2)) continue;
          message = {{"type", "record"}, {"run", beating_}, {"points", json::array()}, {"events", json::array()}};
        } else if (queue_.front().kind == Item::message) {
          message = queue_.front().body;
          ticket = queue_.front().ticket;
          if (queue_.front().run != 0) message["run"] = queue_.front().run;
          queue_.pop_front();
        } else {
          const std::int64_t run = queue_.front().run;
          json points = json::array(), events = json::array();
          while (!queue_.empty() && queue_.front().kind != Item::message && queue_.front().run == run &&
                 points.size() + events.size() < kBatch) {
            (queue_.front().kind == Item::point ? points : events).push_back(std::move(queue_.front().body));
            queue_.pop_front();
          }
          message = {{"type", "record"}, {"run", run}, {"points", points}, {"events", events}};
        }
        message["open_id"] = open_id_;
        message["seq"] = ++seq_;
        if (message.contains("run") && message["run"].is_number_integer()) {
          if (auto it = capabilities_.find(message["run"].get<std::int64_t>()); it != capabilities_.end()) {
            message["capability"] = it->second;
          }
        }
      }
      std::string failure;
      json reply = exchange(message, failure);
      last_sent = Clock::now();
      std::unique_lock<std::mutex> lock(mutex_);
      if (!failure.empty()) {
        const std::size_t lost =
            (message.contains("points") ? message["points"].size() + message["events"].size() : 1) + queue_.size();
        queue_.clear();
        failure_ = fmt::format(
            "{}; {} records (metric points, events, checkpoints) were not recorded there. Every "
            "metric is also in the run folder's metrics.jsonl; `tfw train --resume` continues from "
            "the last checkpoint whose points the service holds",
            failure, lost + unsent_);
        std::fprintf(stderr, "tfw: %s; the run stops at its next checkpoint\n", failure.c_str());
        done_.notify_all();
        // Nothing more can be sent: later records are counted, not kept.
        wake_.wait(lock, [&] { return stopping_; });
        return;
      }
      if (ticket != 0) {
        replies_[ticket] = std::move(reply);
        done_.notify_all();
      } else if (reply.value("type", "") == "error") {
        // A batch the service could not apply (a run it does not know): say it once.
        std::fprintf(stderr, "tfw: the service at %s did not record a batch: %s\n", address_.c_str(),
                     reply.value("error", "").c_str());
      }
    }
  }

  std::string address_, token_file_;
  double timeout_;
  std::unique_ptr<Client> client_;  // the sender thread's (and the constructor's, before it starts)
  std::string open_id_;             // this book: the service dedups resent messages by (open_id, seq)
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::deque<Item> queue_;
  std::map<std::uint64_t, json> replies_;
  std::map<std::int64_t, std::string> capabilities_;  // run -> the capability the service gave for it
  std::uint64_t tickets_ = 0, seq_ = 0;
  std::int64_t beating_ = 0;
  std::size_t unsent_ = 0;
  std::string failure_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace

RecordTarget record_target(const std::string& address_flag, const std::string& token_flag) {
  auto pick = [](const std::string& flag, const char* variable) {
    const char* value = std::getenv(variable);
    return !flag.empty() || value == nullptr ? flag : std::string(value);
  };
  return {pick(address_flag, "TFW_RECORD_TO"), pick(token_flag, "TFW_TOKEN_FILE")};
}

double record_timeout_from_environment() { return env_seconds("TFW_RECORD_TIMEOUT", 600); }

std::shared_ptr<runner::RunBook> remote_run_book(const std::string& address, const std::string& token_file,
                                                 double timeout_seconds) {
  return std::make_shared<RemoteRunBook>(address, token_file, timeout_seconds);
}

}  // namespace tfw::service
