// A RunSource that reads an engine service's runs over its socket (`runs`, `history` and
// `checkpoints` requests, docs/service.md "Reading runs"): what `tfw gui --connect` shows.
// The service's home need not be readable here. One connection, opened when first needed
// and again after a failure; each call is one or more request/reply exchanges, so a caller
// polls (the GUI's store watcher every 0.5 s). Not thread-safe: one reader thread.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "runner/run_source.h"

namespace tfw::service {

class Client;

class RemoteRunSource : public RunSource {
 public:
  RemoteRunSource(std::string address, std::string token_file, double timeout_seconds = 10);
  ~RemoteRunSource() override;

  std::string describe() const override { return "service " + address_; }
  std::string home() const override { return home_; }  // "" until connected
  bool remote() const override { return true; }
  bool exists() override;  // connects; throws with the fix when the service cannot be reached
  std::vector<RunRecord> runs() override;
  std::optional<RunRecord> run(std::int64_t id) override;
  RunNews news(std::int64_t run, RunCursor& cursor) override;
  std::vector<CheckpointRow> checkpoints(std::int64_t run) override;
  void reset() override;

 private:
  Client& client();  // connects when not connected
  nlohmann::json request(const nlohmann::json& message);
  std::string address_, token_file_, home_;
  double timeout_;
  std::unique_ptr<Client> client_;
};

}  // namespace tfw::service
