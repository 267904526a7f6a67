// The engine service (`tfw serve`): a job queue whose workers execute experiment files, and
// live metric streams, over newline-delimited JSON on TCP (protocol.h, docs/service.md).
// One io_context thread does all networking asynchronously; worker threads supervise the
// jobs, each a `tfw run` child process (training never runs on the io thread, and a crash
// in a run cannot take the service down); a poller thread reads new metric points of the
// watched runs from the store and hands them to the io thread, which fans them out.
// Jobs live in the store: queued ones stay queued across a restart and interrupted ones
// are resumed (`tfw run` resumes killed runs from their checkpoints).
#pragma once

#include <memory>
#include <string>

namespace tfw::service {

struct ServiceOptions {
  std::string home;                       // TFW_HOME
  std::string listen = "127.0.0.1:7433";  // any address but loopback needs token_file
  std::string token_file;
  int jobs = 1;                                // worker slots (the cores are split between them)
  std::string tfw;                             // the executable jobs run (default: this one)
  double handshake_timeout = 10;               // seconds for a new connection's hello
  double idle_timeout = 300;                   // seconds without a request (subscribers exempt)
  double write_timeout = 30;                   // a client that takes longer to accept a write is dropped
  std::size_t max_pending = 16u << 20;         // bytes queued to one client before it counts as too slow
  std::size_t max_pending_total = 256u << 20;  // bytes queued to all clients: the largest queue is dropped
  double poll_interval = 0.02;                 // seconds between store reads for watched runs
  std::size_t max_connections = 256;           // more are answered with an error and closed
};

class Service {
 public:
  // Binds the address. Throws UsageError for a non-loopback address without a token file,
  // a bad address, or a port in use.
  explicit Service(ServiceOptions options);
  ~Service();
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  unsigned short port() const;
  std::string address() const;  // what it listens on, "127.0.0.1:7433"
  // Serves until stop(); then interrupts the running jobs (they checkpoint and are queued
  // again for the next start) and returns.
  void run();
  void stop();  // thread-safe

  struct Impl;  // server.cpp

 private:
  std::unique_ptr<Impl> impl_;
};

// The address of the service that serves `home` now (it holds TFW_HOME/service.lock), or "".
std::string service_address_of(const std::string& home);

}  // namespace tfw::service
