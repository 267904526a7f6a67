// See fit.h.
#include "workbench/results/fit.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>

#include "engine/core/error.h"

namespace tfw::results {

FamilyFit family_fit(Store& store, const std::string& family, const std::string& corpus,
                     const std::vector<std::string>& experiments) {
  RunFilter filter;
  filter.family = family;
  filter.status = RunStatus::finished;
  struct Candidate {
    std::string name, corpus, tokenizer;
    analysis::ScalingPoint point;
  };
  std::vector<Candidate> candidates;
  std::map<std::string, int> corpora;
  for (const RunRecord& r : store.runs(filter)) {
    if (r.parent != 0) continue;  // grown: its tokens are not a from-scratch D
    if (!experiments.empty() && std::find(experiments.begin(), experiments.end(), r.experiment) == experiments.end()) {
      continue;
    }
    const std::optional<double> val_loss = r.final_metrics.number("val_loss");
    if (!val_loss) continue;
    Candidate c;
    try {
      const toml::table config = toml::parse(r.config);
      if (const toml::array* growth = config["train"]["growth"].as_array(); growth && !growth->empty()) continue;
      if (config["train"]["growth_repeat"]["every_steps"].value_or(std::int64_t{0}) > 0) continue;
      // A language model's corpus, or an image classifier's dataset.
      c.corpus = config["data"]["corpus"].value_or(config["data"]["dataset"].value_or(std::string("?")));
      c.tokenizer = config["data"]["tokenizer"].value_or(std::string("byte"));
    } catch (const std::exception&) {
      continue;
    }
    c.name = r.name;
    c.point = {static_cast<double>(r.parameters), static_cast<double>(r.tokens), *val_loss};
    corpora[c.corpus + " (" + c.tokenizer + ")"] += 1;
    candidates.push_back(c);
  }
  if (candidates.empty()) {
    throw UsageError(with_hint(
        fmt::format("no finished runs of family '{}' trained from scratch in {}{}", family, store.path(),
                    experiments.empty() ? "" : fmt::format(" (experiments {})", fmt::join(experiments, ", "))),
        "train some first (an experiment with a grid over model sizes and budgets), or check "
        "the family's name with tfw plugins"));
  }
  std::string chosen = corpus;
  if (chosen.empty()) {
    std::set<std::string> names;
    for (const Candidate& c : candidates) names.insert(c.corpus);
    if (names.size() > 1) {
      std::vector<std::string> listed;
      for (const auto& [name, count] : corpora) listed.push_back(fmt::format("{}: {} runs", name, count));
      throw UsageError(with_hint(fmt::format("the runs of '{}' were trained on several corpora ({}): a scaling law "
                                             "holds for one data distribution",
                                             family, fmt::join(listed, "; ")),
                                 "choose one with --corpus NAME"));
    }
    chosen = *names.begin();
  }
  FamilyFit out;
  out.family = family;
  out.corpus = chosen;
  std::vector<analysis::ScalingPoint> points;
  for (const Candidate& c : candidates) {
    if (c.corpus != chosen) continue;
    if (!out.tokenizer.empty() && c.tokenizer != out.tokenizer) {
      throw UsageError(with_hint(fmt::format("runs of '{}' on {} use two tokenizers ({} and {}): their losses are in "
                                             "different units",
                                             family, chosen, out.tokenizer, c.tokenizer),
                                 "fit one tokenizer's runs: keep the others in another TFW_HOME"));
    }
    out.tokenizer = c.tokenizer;
    points.push_back(c.point);
    out.runs.push_back(c.name);
  }
  if (points.empty()) {
    // There are finished runs of the family, on other data: say which, so the user can train
    // on this corpus or fit one of those.
    std::vector<std::string> listed;
    for (const auto& [name, count] : corpora)
      listed.push_back(fmt::format("{} ({} run{})", name, count, count == 1 ? "" : "s"));
    throw UsageError(
        with_hint(fmt::format("no finished runs of '{}' from scratch on corpus '{}'; the finished ones are "
                              "on {}",
                              family, chosen, fmt::join(listed, ", ")),
                  fmt::format("train some on '{}' first (a grid over model sizes and budgets), or fit "
                              "one of those corpora",
                              chosen)));
  }
  out.fit = analysis::scaling_law_fit(points);
  return out;
}

}  // namespace tfw::results
