// The service's life: binding, the one-service-per-home lock, restart recovery of jobs, the
// threads, and stopping. See server.h and service_impl.h.
#include "workbench/service/server.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/core/home.h"
#include "engine/plugin/registry.h"
#include "workbench/service/protocol.h"
#include "workbench/service/service_impl.h"

namespace tfw::service {

namespace fs = std::filesystem;

Service::Service(ServiceOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.options = std::move(options);
  s.home = fs::absolute(s.options.home).lexically_normal().string();
  if (s.options.tfw.empty()) s.options.tfw = executable_dir() + "/tfw";
  if (s.options.jobs < 1) throw UsageError(with_hint("--jobs must be at least 1", "e.g. --jobs 2"));
  const auto [host, port] = address_parse(s.options.listen);
  boost::system::error_code error;
  const asio::ip::address address = asio::ip::make_address(host, error);
  if (error) throw UsageError(with_hint(fmt::format("'{}' is not an IP address", host), "e.g. 127.0.0.1 or 0.0.0.0"));
  if (!s.options.token_file.empty()) s.token = token_read(s.options.token_file);
  if (!address.is_loopback() && s.token.empty()) {
    throw UsageError(with_hint(
        fmt::format("refusing to listen on {} without a token: anyone who reaches it could run jobs", s.options.listen),
        "pass --token-file FILE (clients then need the same file), or listen on 127.0.0.1"));
  }
  fs::create_directories(fs::path(s.home) / "jobs");
  // One service per TFW_HOME: two would run the same queued jobs. The lock file names the
  // holder's address, so a GUI can connect to it instead of starting its own.
  const std::string lock_path = s.home + "/service.lock";
  s.lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (s.lock_fd < 0 || flock(s.lock_fd, LOCK_EX | LOCK_NB) != 0) {
    const std::string holder = service_address_of(s.home);
    if (s.lock_fd >= 0) ::close(s.lock_fd);
    throw UsageError(with_hint(fmt::format("another tfw serve already serves {}{}", s.home,
                                           holder.empty() ? "" : " (listening on " + holder + ")"),
                               "connect to it (--connect ADDRESS), or use another --home"));
  }
  s.store = Store::open(s.home + "/runs.db");
  tcp::endpoint endpoint(address, port);
  s.acceptor.open(endpoint.protocol());
  s.acceptor.set_option(tcp::acceptor::reuse_address(true));
  s.acceptor.bind(endpoint, error);
  if (error) {
    throw UsageError(with_hint(fmt::format("cannot listen on {}: {}", s.options.listen, error.message()),
                               "is another `tfw serve` running there? choose another port with --listen"));
  }
  s.acceptor.listen(asio::socket_base::max_listen_connections);
  const std::string bound = this->address();
  if (ftruncate(s.lock_fd, 0) == 0) {
    [[maybe_unused]] ssize_t n = pwrite(s.lock_fd, bound.data(), bound.size(), 0);
  }
  // Jobs that were running when the service last stopped resume; queued ones stay queued.
  JobQueue jobs(*s.store);
  for (const JobRow& job : jobs.list(JobStatus::running)) {
    jobs.set_status(job.id, JobStatus::queued, -1, "resumed after a service restart");
  }
  for (const JobRow& job : jobs.list(JobStatus::queued)) s.queue.push_back(job.id);
}

Service::~Service() {
  stop();
  Impl& s = *impl_;
  if (s.poller.joinable()) s.poller.join();
  for (std::thread& worker : s.workers) {
    if (worker.joinable()) worker.join();
  }
  if (s.lock_fd >= 0) ::close(s.lock_fd);  // releases the lock
}

std::string service_address_of(const std::string& home) {
  const std::string path = home + "/service.lock";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  const bool held = flock(fd, LOCK_SH | LOCK_NB) != 0;  // a live service holds it exclusively
  std::string address;
  if (held) {
    char buffer[256] = {0};
    const ssize_t n = pread(fd, buffer, sizeof(buffer) - 1, 0);
    if (n > 0) address.assign(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return address;
}

unsigned short Service::port() const { return impl_->acceptor.local_endpoint().port(); }

std::string Service::address() const {
  const tcp::endpoint endpoint = impl_->acceptor.local_endpoint();
  return fmt::format("{}:{}", endpoint.address().to_string(), endpoint.port());
}

void Service::run() {
  Impl& s = *impl_;
  for (int slot = 0; slot < s.options.jobs; ++slot) s.workers.emplace_back([&s, slot] { s.worker_loop(slot); });
  s.poller = std::thread([&s] { s.poll_loop(); });
  s.accept();
  s.io.run();
  // Stopping: interrupt the running jobs (they checkpoint; the workers queue them again).
  {
    std::lock_guard<std::mutex> lock(s.jobs_mutex);
    for (const auto& [job, stop] : s.running) stop->store(true);
  }
  s.jobs_wake.notify_all();
  for (std::thread& worker : s.workers) {
    if (worker.joinable()) worker.join();
  }
  if (s.poller.joinable()) s.poller.join();
}

void Service::stop() {
  Impl& s = *impl_;
  if (s.stopping.exchange(true)) return;
  s.jobs_wake.notify_all();
  asio::post(s.io, [&s] {
    boost::system::error_code ignored;
    s.acceptor.close(ignored);
    for (const auto& c : std::vector<std::shared_ptr<Connection>>(s.connections.begin(), s.connections.end()))
      s.drop(c);
    s.io.stop();
  });
}

}  // namespace tfw::service
