// The GUI's link to the engine service: by default an embedded service on loopback (a
// `tfw serve` inside the GUI process, on a free port), or the service that already serves
// this TFW_HOME, or a remote one (`tfw gui --connect HOST:PORT --token-file FILE`). The
// designer launches through it and the runs browser cancels through it. ImGui-free.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

namespace tfw::service {
class Service;
}

namespace tfw::gui {

class ServiceLink {
 public:
  // connect "": the service of `home` if one runs, else an embedded one.
  ServiceLink(const std::string& home, const std::string& connect, const std::string& token_file);
  ~ServiceLink();  // stops an embedded service: its running jobs checkpoint and stay queued

  const std::string& address() const { return address_; }
  const std::string& description() const { return description_; }  // for the status bar
  const std::string& error() const { return error_; }              // "" when usable

  // Each returns the reply, or throws with the service's message.
  nlohmann::json submit_file(const std::string& experiment_file);
  nlohmann::json cancel(std::int64_t job);
  nlohmann::json jobs();
  // The running job that runs `experiment` (0: none).
  std::int64_t running_job_of(const std::string& experiment);

 private:
  nlohmann::json request(const nlohmann::json& message);
  std::string address_, token_file_, description_, error_;
  std::unique_ptr<service::Service> embedded_;
  std::thread thread_;
};

}  // namespace tfw::gui
