// See client.h.
#include "workbench/service/client.h"

#include <algorithm>
#include <boost/asio.hpp>
#include <fmt/format.h>

#include "engine/core/error.h"
#include "workbench/service/protocol.h"

namespace asio = boost::asio;
using asio::ip::tcp;

namespace tfw::service {

struct Client::Impl {
  asio::io_context io;
  tcp::socket socket{io};
  asio::streambuf input{kMaxLine + 1};
  std::string address;

  // Runs the io_context until `done` or the timeout (then the socket is closed).
  void run_for(double seconds, const bool& done) {
    io.restart();
    if (seconds > 0) {
      io.run_for(
          std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds)));
    } else {
      io.run();
    }
    if (!done) {
      boost::system::error_code ignored;
      socket.close(ignored);
      throw Error(fmt::format("the service at {} did not answer within {:g} s", address, seconds));
    }
  }
};

Client::Client(const std::string& address, const std::string& token_file, double timeout_seconds)
    : impl_(std::make_unique<Impl>()) {
  impl_->address = address;
  const auto [host, port] = address_parse(address);
  tcp::resolver resolver(impl_->io);
  boost::system::error_code error;
  auto endpoints = resolver.resolve(host, std::to_string(port), error);
  if (!error) asio::connect(impl_->socket, endpoints, error);
  if (error) {
    throw Error(with_hint(fmt::format("cannot reach the service at {}: {}", address, error.message()),
                          "start one with `tfw serve` (or pass --connect HOST:PORT)"));
  }
  nlohmann::json hello = {{"type", "hello"}, {"version", kProtocolVersion}};
  if (!token_file.empty()) hello["token"] = token_read(token_file);
  send(hello);
  hello_ = receive(timeout_seconds);
  if (hello_.value("type", "") == "error")
    throw UsageError(fmt::format("the service refused: {}", hello_.value("error", "")));
}

Client::~Client() = default;

void Client::send(const nlohmann::json& message) {
  const std::string line = message.dump() + "\n";
  boost::system::error_code error;
  asio::write(impl_->socket, asio::buffer(line), error);
  if (error) throw Error(fmt::format("lost the service at {}: {}", impl_->address, error.message()));
}

nlohmann::json Client::receive(double timeout_seconds) {
  bool done = false;
  boost::system::error_code failure;
  std::size_t length = 0;
  asio::async_read_until(impl_->socket, impl_->input, '\n', [&](const boost::system::error_code& error, std::size_t n) {
    failure = error;
    length = n;
    done = true;
  });
  impl_->run_for(timeout_seconds, done);
  if (failure) {
    throw Error(fmt::format("the service at {} closed the connection ({})", impl_->address, failure.message()));
  }
  std::string line(asio::buffers_begin(impl_->input.data()), asio::buffers_begin(impl_->input.data()) + length);
  impl_->input.consume(length);
  if (json_depth(line) > kMaxDepth) {
    throw Error(fmt::format("the service at {} sent a line nested deeper than {} levels", impl_->address, kMaxDepth));
  }
  nlohmann::json message = nlohmann::json::parse(line, nullptr, false);
  if (message.is_discarded()) throw Error(fmt::format("the service at {} sent a malformed line", impl_->address));
  return message;
}

nlohmann::json Client::request(const nlohmann::json& message) {
  send(message);
  nlohmann::json reply = receive(60);
  if (reply.value("type", "") == "error") throw UsageError(reply.value("error", "the service answered an error"));
  return reply;
}

nlohmann::json jobs_all(Client& client) {
  nlohmann::json all = nlohmann::json::array();
  std::int64_t after = 0;
  while (true) {
    nlohmann::json reply = client.request({{"type", "jobs"}, {"after", after}});
    for (nlohmann::json& job : reply["jobs"]) {
      after = std::max(after, job.value("id", std::int64_t{0}));
      all.push_back(std::move(job));
    }
    if (!reply.value("more", false) || reply["jobs"].empty()) return all;
  }
}

}  // namespace tfw::service
