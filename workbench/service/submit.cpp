// Submissions: a job's TOML is validated and planned before it is queued, and every file it
// names must stay inside TFW_HOME (the path sandbox); the job is written under
// TFW_HOME/jobs/ID/ and runs there, confined (TFW_CONFINE).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "engine/data/corpus.h"
#include "engine/core/error.h"
#include "engine/config/experiment.h"
#include "engine/core/home.h"
#include "engine/plugin/registry.h"
#include "engine/config/schedule.h"
#include "engine/machine/memory_check.h"
#include "workbench/service/service_impl.h"

namespace tfw::service {

namespace fs = std::filesystem;

namespace {

// The capability a new job under `name` is held by. A job resumes the runs of its
// experiment, so a name is held by the client that first submitted a job under it: submitting
// under it again needs that job's capability (`given`), and the new job keeps it. A name whose
// runs no job made (trained here with `tfw run`, recorded by a client), or whose first job came
// before jobs had capabilities, is held by no client.
std::string job_capability(Store& store, const std::string& name, const std::string& given) {
  const std::string another = "give the job another name (\"name\"; `tfw submit --name`)";
  if (std::optional<JobRow> first = JobQueue(store).first_named(name)) {
    if (first->capability.empty()) {
      throw UsageError(with_hint(fmt::format("experiment '{}' belongs to job {}, from before jobs were held by their "
                                             "clients: a job under its name would resume its runs, so none is accepted",
                                             name, first->id),
                                 another));
    }
    if (!capability_equal(first->capability, given)) {
      throw UsageError(with_hint(fmt::format("experiment '{}' is not held by this client: it belongs to job {} (its "
                                             "\"capability\" {}), and a job under its name would resume its runs",
                                             name, first->id, given.empty() ? "is missing" : "does not match"),
                                 another + ", or submit from the client that holds it"));
    }
    return first->capability;
  }
  RunFilter filter;
  filter.experiment = name;
  if (!store.runs(filter).empty()) {
    throw UsageError(with_hint(fmt::format("experiment '{}' already has runs in this home that no job of this service "
                                           "made; a job under its name would resume them",
                                           name),
                               another));
  }
  return capability_new();
}

}  // namespace

json Service::Impl::submit(const json& message, const std::string& client) {
  const bool experiment = message.contains("experiment");
  if (experiment == message.contains("run") || !(experiment ? message["experiment"] : message["run"]).is_string()) {
    throw UsageError(
        "submit needs exactly one of \"experiment\" (experiment TOML text) or \"run\" (run config TOML text)");
  }
  const std::string text = experiment ? message["experiment"] : message["run"];
  std::string name = message.contains("name") && message["name"].is_string() ? message["name"].get<std::string>() : "";
  toml::table table;
  try {
    table = toml::parse(text, std::string(experiment ? "experiment.toml" : "run.toml"));
  } catch (const toml::parse_error& e) {
    throw UsageError(
        fmt::format("submitted TOML does not parse: {} at line {}", e.description(), e.source().begin.line));
  }
  if (experiment && name.empty()) name = table["experiment"]["name"].value_or(std::string());
  if (!experiment && name.empty()) name = table["name"].value_or(std::string());
  if (name.empty()) throw UsageError("give the job a name: \"name\", or experiment.name in the TOML");
  if (!name_ok(name)) {
    throw UsageError(
        fmt::format("'{}' is not a usable name: letters, digits and '_', '-', '.', '+', '=', starting "
                    "with a letter or digit",
                    name));
  }
  if (message.contains("capability") && !message["capability"].is_string()) {
    throw UsageError("submit: \"capability\" must be a string (the one a submit of this name replied with)");
  }
  const std::string capability = job_capability(*store, name, message.value("capability", ""));
  std::mt19937_64 random(std::random_device{}());
  const fs::path staging = fs::path(home) / "jobs" / fmt::format("incoming-{:016x}", random());
  fs::create_directories(staging);
  // Files the TOML names resolve against the job folder and must stay in TFW_HOME: the ones
  // read while planning (extends, config) are checked here; the corpora of the planned runs
  // below; and the job itself runs confined to TFW_HOME (TFW_CONFINE), in its job folder.
  std::vector<std::pair<std::string, std::string>> paths;
  if (experiment) {
    if (auto extends = table["experiment"]["extends"].value<std::string>())
      paths.emplace_back("experiment.extends", *extends);
    if (toml::table* runs = table["runs"].as_table()) {
      for (auto&& [run, node] : *runs) {
        if (!node.is_table()) continue;
        const std::string where = "runs." + std::string(run.str());
        if (auto config = node.as_table()->get_as<std::string>("config"))
          paths.emplace_back(where + ".config", config->get());
      }
    }
  }
  auto escapes = [&](const std::string& key, const std::string& path) {
    if (path_inside(fs::path(path).is_absolute() ? path : (staging / path).string(), home)) return;
    fs::remove_all(staging);
    throw UsageError(
        fmt::format("{} = '{}' escapes TFW_HOME ({}): a submission may only name files inside it "
                    "(`tfw submit` inlines config files for you)",
                    key, path, home));
  };
  for (const auto& [key, path] : paths) escapes(key, path);
  // Planned from the parsed table (no file round trip); the job's file is written once it is
  // accepted. A single run is an experiment of one run whose base config is the run's TOML.
  const std::string file = (staging / "experiment.toml").string();
  std::string job_text = text;
  if (!experiment) {
    std::ofstream(staging / "run.toml") << text;
    job_text = fmt::format("[experiment]\nname = \"{}\"\n\n[runs.\"{}\"]\nconfig = \"run.toml\"\n", name, name);
    table = toml::parse(job_text, std::string("experiment.toml"));
  }
  Experiment plan;
  try {
    ConfineScope confine(home);  // data.tokenizer, data.dataset: the rules the job runs under
    plan = experiment_parse(registry(), table, "experiment.toml", staging.string());
  } catch (const std::exception& e) {
    fs::remove_all(staging);
    std::string what = e.what();
    for (std::size_t at; (at = what.find(staging.string() + "/")) != std::string::npos;)
      what.erase(at, staging.string().size() + 1);
    throw UsageError(what);
  }
  if (experiment && plan.name != name) {
    fs::remove_all(staging);
    throw UsageError("the experiment's name and \"name\" differ");
  }
  for (const ExperimentRun& run : plan.runs) {
    const std::string& corpus = run.config.data.corpus;
    const bool builtin = std::any_of(corpora_builtin().begin(), corpora_builtin().end(),
                                     [&](const CorpusInfo& info) { return info.name == corpus; });
    if (!builtin) {
      const std::string key = fmt::format("runs.{}: data.corpus", run.name);
      escapes(key, corpus);
      if (!fs::exists(fs::path(corpus).is_absolute() ? fs::path(corpus) : staging / corpus)) {
        fs::remove_all(staging);
        throw UsageError(
            with_hint(fmt::format("{} = '{}' is neither a built-in corpus nor a file in TFW_HOME", key, corpus),
                      "relative paths resolve against the job's folder, TFW_HOME/jobs/ID/ (so "
                      "'../../FILE' is TFW_HOME/FILE); copy the text into TFW_HOME first"));
      }
    }
    try {
      train_memory_check(run.config, run.plan);  // an absurd model is refused now, not in a worker
    } catch (const UsageError&) {
      fs::remove_all(staging);
      throw;
    }
  }
  std::ofstream(file) << job_text;
  JobRow job;
  job.kind = experiment ? "experiment" : "run";
  job.name = name;
  job.client = client;
  job.capability = capability;
  JobQueue jobs(*store);
  job.id = jobs.create(job);
  const fs::path folder = fs::path(home) / "jobs" / std::to_string(job.id);
  fs::remove_all(folder);
  fs::rename(staging, folder);
  jobs.set_file(job.id, (folder / "experiment.toml").string());
  {
    std::lock_guard<std::mutex> lock(jobs_mutex);
    queue.push_back(job.id);
  }
  jobs_wake.notify_one();
  json runs = json::array();
  for (const ExperimentRun& run : plan.runs) runs.push_back(run.name);
  return {{"type", "submitted"}, {"job", job.id}, {"name", name}, {"runs", runs}, {"capability", capability}};
}

}  // namespace tfw::service
