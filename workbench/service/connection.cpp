// Connections and dispatch: the handshake, one JSON object per line, replies in order
// through a bounded write queue, and the dispatch of each request to submit.cpp, jobs.cpp
// and feeds.cpp.
#include <boost/asio.hpp>
#include <fmt/format.h>

#include "engine/core/error.h"
#include "workbench/common/records_json.h"
#include "workbench/service/protocol.h"
#include "workbench/service/service_impl.h"

namespace tfw::service {

void Connection::start() {
  arm(service.options.handshake_timeout, "no hello within {:g} s");
  read();
}

void Connection::arm(double seconds, const char* why) {
  timer.expires_after(
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds)));
  std::string reason = fmt::format(fmt::runtime(why), seconds);
  timer.async_wait([self = shared_from_this(), reason, seconds](const boost::system::error_code& error) {
    if (error || self->closed) return;
    if (!self->subscriptions.empty()) {  // a subscriber may stay quiet: it is listening
      self->arm(seconds, "idle for {:g} s");
      return;
    }
    self->fail(reason);
  });
}

void Connection::read() {
  asio::async_read_until(
      socket, input, '\n', [self = shared_from_this()](const boost::system::error_code& error, std::size_t n) {
        if (self->closed) return;
        if (error == asio::error::not_found) {
          self->fail(fmt::format("message longer than {} bytes", kMaxLine));
          return;
        }
        if (error) {  // disconnect (possibly mid-message): forget it
          self->service.drop(self);
          return;
        }
        std::string line(asio::buffers_begin(self->input.data()), asio::buffers_begin(self->input.data()) + n);
        self->input.consume(n);
        if (json_depth(line) > kMaxDepth) {
          self->fail(fmt::format("malformed message: arrays and objects nested deeper than {} levels", kMaxDepth));
          return;
        }
        json message = json::parse(line, nullptr, false);
        if (message.is_discarded() || !message.is_object() || !message.contains("type") ||
            !message["type"].is_string()) {
          self->fail("malformed message: expected one JSON object with a string \"type\" per line");
          return;
        }
        self->arm(self->service.options.idle_timeout, "idle for {:g} s");
        self->service.handle(self, message);
        if (!self->closing) self->read();
      });
}

void Connection::send(Line line) {
  if (closed) return;
  pending += line->size();
  service.pending_total += line->size();
  if (pending > service.options.max_pending) {
    closing = true;  // too slow: drop it rather than buffer without bound
    service.drop(shared_from_this());
    return;
  }
  // All clients together are bounded too: clients that stop reading each stayed under the
  // per-client bound while the service grew to gigabytes. The one holding the most
  // is dropped until the total fits.
  while (service.pending_total > service.options.max_pending_total) {
    std::shared_ptr<Connection> largest;
    for (const std::shared_ptr<Connection>& other : service.connections) {
      if (!other->closed && (!largest || other->pending > largest->pending)) largest = other;
    }
    if (!largest) break;
    largest->closing = true;
    service.drop(largest);
    if (largest.get() == this) return;
  }
  output.push_back(std::move(line));
  if (!writing) write();
}

void Connection::write() {
  writing = true;
  write_timer.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(service.options.write_timeout)));
  write_timer.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
    if (!error && self->writing) self->service.drop(self);  // the client stopped reading
  });
  asio::async_write(socket, asio::buffer(*output.front()),
                    [self = shared_from_this()](const boost::system::error_code& error, std::size_t) {
                      self->write_timer.cancel();
                      if (error || self->closed) {
                        self->service.drop(self);
                        return;
                      }
                      self->pending -= self->output.front()->size();
                      self->service.pending_total -= self->output.front()->size();
                      self->output.pop_front();
                      self->writing = false;
                      if (!self->output.empty())
                        self->write();
                      else if (self->closing)
                        self->service.drop(self);
                    });
}

void Connection::fail(const std::string& error) {
  if (closing || closed) return;
  send(make_line({{"type", "error"}, {"error", error}, {"fatal", true}}));
  closing = true;
  if (!writing) service.drop(shared_from_this());
}

void Service::Impl::drop(const std::shared_ptr<Connection>& connection) {
  if (connection->closed) return;
  connection->closed = true;
  pending_total -= connection->pending;  // its queue is freed with it
  connection->pending = 0;
  boost::system::error_code ignored;
  connection->timer.cancel();
  connection->write_timer.cancel();
  connection->socket.shutdown(tcp::socket::shutdown_both, ignored);
  connection->socket.close(ignored);
  for (std::int64_t run : connection->subscriptions) {
    auto feed = feeds.find(run);
    if (feed == feeds.end()) continue;
    feed->second.subscribers.erase(connection);
    if (feed->second.subscribers.empty()) {  // nobody listens: stop polling it
      feeds.erase(feed);
      std::lock_guard<std::mutex> lock(watched_mutex);
      watched.erase(run);
    }
  }
  connections.erase(connection);
}

void Service::Impl::accept() {
  acceptor.async_accept([this](const boost::system::error_code& error, tcp::socket socket) {
    if (error) {
      if (!stopping) accept();
      return;
    }
    auto connection = std::make_shared<Connection>(*this, std::move(socket));
    connections.insert(connection);
    if (connections.size() > options.max_connections) {
      // Over the cap: one error line, then closed (each connection holds a descriptor).
      connection->fail(fmt::format("too many connections ({} open); try again later", options.max_connections));
    } else {
      connection->start();
    }
    accept();
  });
}

void Service::Impl::handle(const std::shared_ptr<Connection>& c, const json& message) {
  const std::string type = message["type"];
  auto reply = [&](json body) {
    if (message.contains("id")) body["reply_to"] = message["id"];
    c->send(make_line(body));
  };
  auto error = [&](const std::string& text) { reply({{"type", "error"}, {"error", text}, {"fatal", false}}); };
  if (!c->greeted) {
    if (type != "hello") return c->fail("the first message must be {\"type\":\"hello\",\"version\":1}");
    if (!message.contains("version") || !message["version"].is_number_integer() ||
        message["version"].get<int>() != kProtocolVersion) {
      return c->fail(fmt::format("protocol version mismatch: this service speaks version {}", kProtocolVersion));
    }
    if (!token.empty()) {
      const std::string given =
          message.contains("token") && message["token"].is_string() ? message["token"].get<std::string>() : "";
      if (!token_equal(given, token)) {
        return c->fail(given.empty() ? "this service needs a token: pass --token-file FILE"
                                     : "wrong token: check --token-file");
      }
    }
    c->greeted = true;
    return reply({{"type", "hello"},
                  {"version", kProtocolVersion},
                  {"server", std::string("tfw ") + TFW_VERSION},
                  {"home", home},
                  {"jobs", options.jobs}});
  }
  try {
    if (type == "submit") return reply(submit(message, c->peer));
    if (type == "cancel") {
      if (!message.contains("job") || !message["job"].is_number_integer()) return c->fail("cancel needs \"job\": ID");
      if (message.contains("capability") && !message["capability"].is_string()) {
        return c->fail("cancel: \"capability\" must be a string");
      }
      return reply(cancel(message["job"].get<std::int64_t>(), message.value("capability", "")));
    }
    if (type == "watch" || type == "summary") {
      if (!message.contains("run") || !(message["run"].is_string() || message["run"].is_number_integer())) {
        return c->fail(fmt::format("{} needs \"run\": an id or a name", type));
      }
      const std::string wanted = message["run"].is_string() ? message["run"].get<std::string>()
                                                            : std::to_string(message["run"].get<std::int64_t>());
      std::optional<RunRecord> run = store->run_find(wanted);
      if (!run) return error(fmt::format("no run '{}' (yet) in the store", wanted));
      if (type == "summary") return reply({{"type", "summary"}, {"run", run_json(*run)}});
      reply({{"type", "watching"}, {"run", run_json(*run)}});
      return subscribe(c, run->id);
    }
    if (type == "runs" || type == "history" || type == "checkpoints" || type == "jobs") {
      json body;
      try {
        body = type == "runs"      ? read_runs(message)
               : type == "history" ? read_history(message)
               : type == "jobs"    ? read_jobs(message)
                                   : read_checkpoints(message);
      } catch (const BadRequest& e) {
        return c->fail(e.what());
      } catch (const std::exception& e) {
        run_reader.reset();  // reopen at the next request (the store may have been replaced)
        return error(e.what());
      }
      return reply(body);
    }
    if (type.rfind("record", 0) == 0) {
      json body;
      try {
        body = record(message);
      } catch (const BadRequest& e) {
        return c->fail(e.what());
      }
      return reply(body);
    }
    return c->fail(
        fmt::format("unknown message type '{}': use hello, submit, jobs, cancel, watch, summary, runs, "
                    "history, checkpoints or record*",
                    type));
  } catch (const std::exception& e) {
    error(e.what());
  }
}

// Validates a submission and queues it. The TOML is written under TFW_HOME/jobs/ID/; every

}  // namespace tfw::service
