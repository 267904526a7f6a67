// A blocking client of the engine service, for the CLI (`tfw submit|jobs|cancel|watch`), the
// GUI and tests: connects, says hello (with the token when given), then exchanges JSON lines.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace tfw::service {

class Client {
 public:
  // Connects to "HOST:PORT" and says hello. Throws Error (cannot connect: with the fix) or
  // UsageError (the service refused: no token, wrong token, version).
  Client(const std::string& address, const std::string& token_file = "", double timeout_seconds = 30);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const nlohmann::json& hello() const { return hello_; }
  // Sends a request and returns its reply; an error reply throws UsageError with its text.
  nlohmann::json request(const nlohmann::json& message);
  void send(const nlohmann::json& message);
  // The next message (blocking up to the timeout; 0: forever). Throws Error when the
  // connection closes.
  nlohmann::json receive(double timeout_seconds = 0);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  nlohmann::json hello_;
};

// Every job of the service, following its pages ({"type":"jobs","after":ID} while "more").
nlohmann::json jobs_all(Client& client);

}  // namespace tfw::service
