// `tfw eval RUN|CHECKPOINT [--corpus NAME|PATH]... [--windows N] [--seq-len T] [--stride S]`:
// a checkpoint's loss, perplexity, bits per token and bits per byte on the validation text of
// any corpus (engine/commands/evaluate.h), printed and kept in the store's evaluations table.
#include <cmath>
#include <filesystem>
#include <iostream>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/commands/evaluate.h"
#include "engine/core/home.h"
#include "engine/plugin/registry.h"
#include "engine/plugin/task.h"
#include "runner/lineage.h"
#include "storage/store.h"
#include "workbench/cli/commands.h"
#include "workbench/cli/output.h"

namespace tfw::cli {

namespace {

namespace fs = std::filesystem;

struct EvalArgs {
  std::string target, home;
  EvalRequest request;
  bool json = false, no_record = false, cloze = false;
  std::size_t cloze_passages = 200;
  std::string blocks;  // --blocks: "all", or NAME[,NAME...]
};

// --blocks all: every token; --blocks a,b: those parameter blocks of the run's train.mask.
std::optional<std::vector<std::string>> blocks_option(const std::string& text) {
  if (text.empty()) return std::nullopt;
  if (text == "all") return std::vector<std::string>{};
  std::vector<std::string> names;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    if (comma == start) throw UsageError("--blocks takes NAME[,NAME...] (the run's train.mask.blocks) or all");
    names.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return names;
}

nlohmann::json number(double value) { return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr); }

// The parameter mask the evaluation used: the blocks, then each Pattention's tokens in use.
void print_mask(const EvalReport& report, const std::string& blocks_option) {
  if (report.mask_layers.empty()) {
    if (blocks_option == "all") std::cout << "parameter mask: none (--blocks all: every token in use)\n";
    return;
  }
  std::cout << "parameter mask: " << report.mask_description << "\n";
  std::cout << fmt::format("  {:<18} {:>7} {:>7} {:>7}\n", "layer", "in use", "masked", "tokens");
  for (const MaskLayerUse& layer : report.mask_layers) {
    std::cout << fmt::format("  {:<18} {:>7} {:>7} {:>7}\n", layer.layer, layer.active, layer.tokens - layer.active,
                             layer.tokens);
  }
}

nlohmann::json mask_layers_json(const EvalReport& report) {
  nlohmann::json out = nlohmann::json::array();
  for (const MaskLayerUse& layer : report.mask_layers) {
    out.push_back({{"layer", layer.layer}, {"active", layer.active}, {"tokens", layer.tokens}});
  }
  return out;
}

void run_eval(EvalArgs& args) {
  EvalRequest& request = args.request;
  request.home = home_resolve(args.home);
  request.checkpoint = runner::checkpoint_of(args.target, request.home);
  request.blocks = blocks_option(args.blocks);
  if (args.cloze) {
    if (args.cloze_passages == 0) throw UsageError("--cloze-passages takes a number >= 1");
    request.cloze = args.cloze_passages;
  } else if (!request.cloze_list.empty()) {
    throw UsageError("--cloze-list goes with --cloze");
  }
  const EvalReport report = evaluate_checkpoint(registry(), request, [&](const std::string& line) {
    if (!args.json) std::cerr << line << "\n";
  });
  // Kept in the store, under the run that wrote the checkpoint when the store knows it.
  std::int64_t run = 0;
  if (!args.no_record) {
    std::unique_ptr<Store> store = Store::open(request.home + "/runs.db");
    run = store->checkpoint_run(report.checkpoint).value_or(0);
    std::vector<EvaluationRow> rows;
    for (const EvalResult& r : report.results) {
      const std::vector<std::pair<const char*, double>> metrics =
          r.accuracy >= 0 ? std::vector<std::pair<const char*, double>>{{"loss", r.loss}, {"accuracy", r.accuracy}}
                          : std::vector<std::pair<const char*, double>>{{"loss", r.loss},
                                                                        {"perplexity", r.perplexity},
                                                                        {"bits_per_token", r.bits_per_token},
                                                                        {"bits_per_byte", r.bits_per_byte}};
      for (const auto& [metric, value] : metrics) {
        rows.push_back({0, run, report.checkpoint, report.step, r.corpus, metric, value, r.windows, r.tokens, r.mode, 0,
                        report.blocks});
      }
      if (r.cloze_items > 0) {
        rows.push_back({0, run, report.checkpoint, report.step, r.corpus, "cloze_accuracy", r.cloze_accuracy,
                        r.cloze_items, r.cloze_tokens, "cloze", 0, report.blocks});
        rows.push_back({0, run, report.checkpoint, report.step, r.corpus, "cloze_logprob", r.cloze_logprob,
                        r.cloze_items, r.cloze_tokens, "cloze", 0, report.blocks});
      }
    }
    store->evaluations_add(rows);
  }
  if (args.json) {
    nlohmann::json results = nlohmann::json::array();
    for (const EvalResult& r : report.results) {
      results.push_back({{"corpus", r.corpus},
                         {"shards", r.shard_dir},
                         {"mode", r.mode},
                         {"windows", r.windows},
                         {"tokens", r.tokens},
                         {"loss", number(r.loss)},
                         {"perplexity", number(r.perplexity)},
                         {"bits_per_token", number(r.bits_per_token)},
                         {"bytes", r.bytes},
                         {"bits_per_byte", number(r.bits_per_byte)}});
      if (r.accuracy >= 0) results.back()["accuracy"] = r.accuracy;
      if (r.cloze_items > 0) {
        results.back()["cloze"] = {{"passages", r.cloze_items},
                                   {"correct", r.cloze_correct},
                                   {"accuracy", r.cloze_accuracy},
                                   {"mean_logprob", r.cloze_logprob},
                                   {"target_tokens", r.cloze_tokens}};
      }
    }
    print_json({{"checkpoint", report.checkpoint},
                {"step", report.step},
                {"family", report.family},
                {"task", report.task},
                {"model", report.model},
                {"tokenizer", report.tokenizer},
                {"seq_len", report.seq_len},
                {"blocks", report.blocks},
                {"mask_layers", mask_layers_json(report)},
                {"run_id", run == 0 ? nlohmann::json(nullptr) : nlohmann::json(run)},
                {"results", results}});
    return;
  }
  if (report.task == kImageClassificationTask) {
    std::cout << fmt::format("{} (step {}): {} {}, {} tokens an image\n", report.checkpoint, report.step, report.family,
                             report.model, report.seq_len);
    std::cout << fmt::format("{:<20} {:<8} {:>8} {:>10} {:>8} {:>9}\n", "dataset", "split", "images", "tokens", "loss",
                             "accuracy");
    for (const EvalResult& r : report.results) {
      std::cout << fmt::format("{:<20} {:<8} {:>8} {:>10} {:>8.4f} {:>8.2f}%\n", r.corpus, r.mode, r.windows, r.tokens,
                               r.loss, 100 * r.accuracy);
    }
  } else {
    std::cout << fmt::format("{} (step {}): {} {}, {} tokens, windows of {}\n", report.checkpoint, report.step,
                             report.family, report.model, report.tokenizer, report.seq_len);
    print_mask(report, args.blocks);
    std::cout << fmt::format("{:<20} {:<10} {:>8} {:>9} {:>8} {:>10} {:>10} {:>10}\n", "corpus", "windows", "count",
                             "tokens", "loss", "perplexity", "bits/tok", "bits/byte");
    for (const EvalResult& r : report.results) {
      std::cout << fmt::format("{:<20} {:<10} {:>8} {:>9} {:>8.4f} {:>10.3f} {:>10.4f} {:>10.4f}\n", r.corpus, r.mode,
                               r.windows, r.tokens, r.loss, r.perplexity, r.bits_per_token, r.bits_per_byte);
    }
    for (const EvalResult& r : report.results) {
      if (r.cloze_items == 0) continue;
      std::cout << fmt::format(
          "cloze on {}: {} of {} passages completed exactly ({:.1f}%), mean log-likelihood of the "
          "target {:.3f} nats\n",
          r.corpus, r.cloze_correct, r.cloze_items, 100 * r.cloze_accuracy, r.cloze_logprob);
    }
  }
  if (!args.no_record) {
    std::cout << fmt::format(
        "recorded in {}/runs.db{}\n", request.home,
        run == 0 ? " (a checkpoint the store does not know: under no run)" : fmt::format(" under run {}", run));
  }
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* command = app.add_subcommand("eval", "Evaluate a checkpoint on the validation text of any corpus");
  add_checkpoint_target(command, args->target);
  command->add_option("--corpus", args->request.corpora,
                      "a built-in corpus, a text file or folder, or prepared shards (repeatable; default: the run's)");
  command->add_option("--windows", args->request.windows,
                      "evenly spaced windows (default: train.batch_size x train.eval_batches, the trainer's)");
  command->add_option("--seq-len", args->request.seq_len, "tokens per window (default: the run's)");
  command->add_option("--stride", args->request.stride,
                      "score the whole validation text in windows S tokens apart, each target once");
  command->add_flag("--cloze", args->cloze,
                    "also the cloze test: last-word prediction of passages from the validation text (docs/cli.md)");
  command->add_option("--cloze-passages", args->cloze_passages, "with --cloze: how many passages (default 200)");
  command->add_option("--cloze-list", args->request.cloze_list, "with --cloze: write the passages to this TSV file");
  command->add_option("--blocks", args->blocks,
                      "parameter blocks of the run's train.mask to evaluate with: NAME[,NAME...], or all (default: "
                      "the run's train.mask.use)");
  command->add_option("--device", args->request.device,
                      "cpu, cuda or cuda:N (default: the run's train.device; a GPU run evaluates on the CPU too)");
  command->add_flag("--no-record", args->no_record, "print only; do not keep the results in the store");
  add_home_option(command, args->home);
  command->add_flag("--json", args->json, "print JSON (keys in docs/cli.md)");
  command->callback([args] { run_eval(*args); });
}

}  // namespace tfw::cli
