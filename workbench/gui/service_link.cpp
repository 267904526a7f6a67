// See service_link.h.
#include "workbench/gui/service_link.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include "engine/config/experiment.h"
#include "workbench/service/client.h"
#include "workbench/service/job_capabilities.h"
#include "workbench/service/server.h"

namespace tfw::gui {

ServiceLink::ServiceLink(const std::string& home, const std::string& connect, const std::string& token_file)
    : token_file_(token_file) {
  if (!connect.empty()) {
    address_ = connect;
    description_ = "service " + connect;
    return;
  }
  if (std::string running = service::service_address_of(home); !running.empty()) {
    address_ = running;
    description_ = "service " + running + " (tfw serve)";
    return;
  }
  try {
    service::ServiceOptions options;
    options.home = home;
    options.listen = "127.0.0.1:0";
    embedded_ = std::make_unique<service::Service>(options);
    address_ = embedded_->address();
    description_ = "embedded service " + address_;
    thread_ = std::thread([this] { embedded_->run(); });
  } catch (const std::exception& e) {
    error_ = e.what();
    description_ = "no service";
  }
}

ServiceLink::~ServiceLink() {
  if (embedded_) {
    embedded_->stop();
    if (thread_.joinable()) thread_.join();
  }
}

nlohmann::json ServiceLink::request(const nlohmann::json& message) {
  if (!error_.empty()) throw std::runtime_error(error_);
  service::Client client(address_, token_file_, 10);
  return client.request(message);
}

// Jobs are held by the client that submitted them: the GUI keeps each job's
// capability where `tfw submit` does (job_capabilities.h), so either may cancel it, and a
// launch of the same experiment again resumes its runs.
nlohmann::json ServiceLink::submit_file(const std::string& experiment_file) {
  const std::string text = experiment_self_contained(experiment_file);
  std::string name;
  try {
    name = toml::parse(text)["experiment"]["name"].value_or(std::string());
  } catch (const toml::parse_error&) {  // the service says what is wrong with it
  }
  return service::job_submit(address_, name, {{"type", "submit"}, {"experiment", text}},
                             [this](const nlohmann::json& m) { return request(m); });
}

nlohmann::json ServiceLink::cancel(std::int64_t job) {
  return service::job_cancel(address_, job, [this](const nlohmann::json& m) { return request(m); });
}

nlohmann::json ServiceLink::jobs() {
  if (!error_.empty()) throw std::runtime_error(error_);
  service::Client client(address_, token_file_, 10);
  return {{"type", "jobs"}, {"jobs", service::jobs_all(client)}};
}

std::int64_t ServiceLink::running_job_of(const std::string& experiment) {
  const nlohmann::json reply = jobs();
  for (const auto& job : reply["jobs"]) {
    if (job["name"] == experiment && job["status"] == "running") return job["id"].get<std::int64_t>();
  }
  return 0;
}

}  // namespace tfw::gui
