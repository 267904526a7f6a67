// See remote_source.h.
#include "workbench/service/remote_source.h"

#include <fmt/format.h>

#include "engine/core/error.h"
#include "workbench/common/records_json.h"
#include "workbench/service/client.h"

namespace tfw::service {

RemoteRunSource::RemoteRunSource(std::string address, std::string token_file, double timeout_seconds)
    : address_(std::move(address)), token_file_(std::move(token_file)), timeout_(timeout_seconds) {}

RemoteRunSource::~RemoteRunSource() = default;

void RemoteRunSource::reset() { client_.reset(); }

Client& RemoteRunSource::client() {
  if (!client_) {
    client_ = std::make_unique<Client>(address_, token_file_, timeout_);
    home_ = client_->hello().value("home", "");
  }
  return *client_;
}

nlohmann::json RemoteRunSource::request(const nlohmann::json& message) {
  Client& connection = client();
  try {
    nlohmann::json reply = connection.request(message);
    if (reply.value("type", "") != message["type"]) {
      throw Error(fmt::format("the service at {} answered a {} request with '{}'", address_,
                              message["type"].get<std::string>(), reply.value("type", "")));
    }
    return reply;
  } catch (const UsageError&) {
    throw;  // the service's answer (an unknown run, ...): the connection is still good
  } catch (...) {
    client_.reset();  // a lost or confused connection: open a new one next time
    throw;
  }
}

bool RemoteRunSource::exists() {
  client();
  return true;
}

namespace {

// Decoding errors name the service: they mean a service of another version, or a bug.
template <typename F>
auto decoded(const std::string& address, F&& decode) {
  try {
    return decode();
  } catch (const std::exception& e) {
    throw Error(
        fmt::format("the service at {} sent a record this tfw cannot read ({}); are both the same "
                    "version?",
                    address, e.what()));
  }
}

}  // namespace

std::vector<RunRecord> RemoteRunSource::runs() {
  std::vector<RunRecord> all;
  for (bool more = true; more;) {
    nlohmann::json message = {{"type", "runs"}};
    if (!all.empty()) message["after"] = all.back().id;
    const nlohmann::json reply = request(message);
    decoded(address_, [&] {
      for (const auto& item : reply.at("runs")) all.push_back(run_from_stored_json(item));
      return 0;
    });
    more = reply.value("more", false) && !reply.at("runs").empty();
  }
  return all;
}

std::optional<RunRecord> RemoteRunSource::run(std::int64_t id) {
  const nlohmann::json reply = request({{"type", "runs"}, {"run", id}});
  return decoded(address_, [&]() -> std::optional<RunRecord> {
    if (reply.at("runs").empty()) return std::nullopt;
    return run_from_stored_json(reply.at("runs").at(0));
  });
}

RunNews RemoteRunSource::news(std::int64_t run, RunCursor& cursor) {
  RunNews news;
  RunCursor next = cursor;
  for (bool more = true; more;) {
    const nlohmann::json reply = request({{"type", "history"}, {"run", run}, {"cursor", cursor_json(next)}});
    decoded(address_, [&] {
      for (const auto& item : reply.at("points")) news.points.push_back(point_from_json(item, run));
      for (const auto& item : reply.at("events")) news.events.push_back(event_from_stored_json(item, run));
      next = cursor_from_json(reply.at("cursor"));
      return 0;
    });
    more = reply.value("more", false);
  }
  // Pages arrive by key then step each, so a key may appear in two pages: put the points
  // back in the store's order (by key, then step), as one read would give them.
  std::stable_sort(news.points.begin(), news.points.end(),
                   [](const MetricPoint& a, const MetricPoint& b) { return a.key < b.key; });
  cursor = next;
  return news;
}

std::vector<CheckpointRow> RemoteRunSource::checkpoints(std::int64_t run) {
  const nlohmann::json reply = request({{"type", "checkpoints"}, {"run", run}});
  return decoded(address_, [&] {
    std::vector<CheckpointRow> rows;
    for (const auto& item : reply.at("checkpoints")) rows.push_back(checkpoint_from_json(item, run));
    return rows;
  });
}

}  // namespace tfw::service
