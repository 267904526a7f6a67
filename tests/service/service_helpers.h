// Helpers of the service tests: fresh homes, a `tfw serve` child, polling, and a raw socket
// for the bytes a well-behaved client would never send.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "workbench/service/serve_process.h"
#include "workbench/service/client.h"
#include "workbench/service/protocol.h"

namespace tfw::test::service_helpers {

namespace fs = std::filesystem;
using nlohmann::json;
using tfw::service::ServeProcess;

inline std::string fresh_home(const std::string& name) {
  const std::string home = "/tmp/tfw-test-service-" + name;
  fs::remove_all(home);
  fs::create_directories(home);
  return home;
}

inline ServeProcess serve(const std::string& home, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--listen", "127.0.0.1:0", "--home", home};
  args.insert(args.end(), extra.begin(), extra.end());
  return ServeProcess(TFW_BINARY, args);
}

template <typename Predicate>
bool wait_for(Predicate done, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return done();
}

inline std::string job_status(const std::string& address, std::int64_t job) {
  service::Client client(address);
  const json reply = client.request({{"type", "jobs"}});  // bound: a range-for over a temporary's member dangles
  for (const auto& j : reply["jobs"]) {
    if (j["id"] == job) return j["status"];
  }
  return "";
}

// A raw socket, for the bytes a well-behaved client would never send.
struct RawSocket {
  int fd = -1;
  explicit RawSocket(const std::string& address) {
    const auto [host, port] = service::address_parse(address);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    inet_pton(AF_INET, host.c_str(), &to.sin_addr);
    if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) fd = -1;
    timeval timeout{10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  }
  ~RawSocket() {
    if (fd >= 0) close(fd);
  }
  void send_text(const std::string& text) {
    std::size_t sent = 0;
    while (sent < text.size()) {
      const ssize_t n = ::send(fd, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<std::size_t>(n);
    }
  }
  // Everything the service sends until it closes the connection (or 10 s pass).
  std::string read_all() {
    std::string out;
    char buffer[4096];
    while (true) {
      const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
      if (n <= 0) break;
      out.append(buffer, static_cast<std::size_t>(n));
    }
    return out;
  }
};

}  // namespace tfw::test::service_helpers
