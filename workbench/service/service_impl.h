// The service's internals, shared by its files: connections and dispatch (connection.cpp),
// submit validation and the path sandbox (submit.cpp), jobs on the runner's batch executor
// (jobs.cpp), live feeds of watched runs (feeds.cpp), and the service's life (server.cpp).
// Not part of the service's interface (server.h).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runner/run_source.h"
#include "storage/store.h"
#include "workbench/service/job_queue.h"
#include "workbench/service/protocol.h"
#include "workbench/service/server.h"

namespace tfw::service {

namespace asio = boost::asio;
using asio::ip::tcp;
using nlohmann::json;

using Line = std::shared_ptr<const std::string>;

inline Line make_line(const json& message) { return std::make_shared<const std::string>(message.dump() + "\n"); }

struct Connection;

// A malformed request (a field missing or of the wrong type): a fatal error reply.
struct BadRequest : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

struct Service::Impl {
  ServiceOptions options;
  std::string home;
  std::string token;  // "" when the service has none (loopback only)
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::unique_ptr<Store> store;                // io thread: requests
  std::unique_ptr<LocalRunSource> run_reader;  // io thread: runs, history, checkpoints (reads.cpp)
  int lock_fd = -1;                            // TFW_HOME/service.lock, held while serving
  std::atomic<bool> stopping{false};

  // Live feeds, io thread only.
  struct Feed {
    std::vector<Line> history;
    bool loaded = false;
    std::string status;
    std::set<std::shared_ptr<Connection>> subscribers;
  };
  std::map<std::int64_t, Feed> feeds;
  std::set<std::shared_ptr<Connection>> connections;
  std::size_t pending_total = 0;  // bytes queued to all clients (bounded by options.max_pending_total)

  // Watched runs: io thread -> poller.
  std::mutex watched_mutex;
  std::set<std::int64_t> watched;
  std::thread poller;

  // Jobs: io thread -> workers (jobs.cpp). A running job's batch stops when its flag is set.
  std::mutex jobs_mutex;
  std::condition_variable jobs_wake;
  std::deque<std::int64_t> queue;
  std::map<std::int64_t, std::shared_ptr<std::atomic<bool>>> running;  // job -> its batch's stop flag
  std::set<std::int64_t> cancel_requested;
  std::vector<std::thread> workers;

  void accept();
  void handle(const std::shared_ptr<Connection>& connection, const json& message);
  json submit(const json& message, const std::string& client);
  json cancel(std::int64_t job, const std::string& capability);
  LocalRunSource& reader();
  json read_runs(const json& message);
  json read_history(const json& message);
  json read_checkpoints(const json& message);
  json read_jobs(const json& message);
  void subscribe(const std::shared_ptr<Connection>& connection, std::int64_t run);
  // Runs recording to this service from elsewhere (`tfw train --record-to`, record.cpp): the
  // last sequence number applied per recording book, and the run each book created.
  json record(const json& message);
  json record_create(const json& message, const std::string& book);
  std::map<std::string, std::uint64_t> record_seq;
  std::map<std::string, std::pair<std::int64_t, std::string>> record_created;  // run and capability
  void publish(std::int64_t run, std::vector<Line> lines, std::string status, bool initial);
  void drop(const std::shared_ptr<Connection>& connection);
  void poll_loop();
  void worker_loop(int slot);
  int run_job(const JobRow& job, int threads, const std::atomic<bool>& stop);
};

// A client connection: reads one line at a time, replies in order; every write goes through
// a bounded queue (connection.cpp).
struct Connection : std::enable_shared_from_this<Connection> {
  Connection(Service::Impl& service, tcp::socket socket)
      : service(service), socket(std::move(socket)), input(kMaxLine + 1), timer(service.io), write_timer(service.io) {
    boost::system::error_code error;
    auto endpoint = this->socket.remote_endpoint(error);
    peer = error ? "?" : fmt::format("{}:{}", endpoint.address().to_string(), endpoint.port());
  }

  Service::Impl& service;
  tcp::socket socket;
  asio::streambuf input;
  asio::steady_timer timer, write_timer;
  std::deque<Line> output;
  std::size_t pending = 0;
  bool writing = false, greeted = false, closing = false, closed = false;
  std::set<std::int64_t> subscriptions;
  std::string peer;

  void start();
  void arm(double seconds, const char* why);
  void read();
  void send(Line line);
  void write();
  // An error reply, then the connection closes once it is written.
  void fail(const std::string& error);
};

}  // namespace tfw::service
