// `tfw data prepare CORPUS` turns a corpus into token shards under TFW_HOME/data;
// `tfw data list` shows what is prepared.
#include <chrono>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "engine/data/corpus.h"
#include "engine/data/shards.h"
#include "engine/core/home.h"
#include "workbench/cli/commands.h"
#include "workbench/cli/output.h"

namespace tfw {
// Prepared shards in `tfw data --json` (docs/cli.md): what they hold, not how they were split.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ShardMeta, corpus, source, tokenizer, vocab_size, dtype, train_tokens, val_tokens)
}  // namespace tfw

namespace tfw::cli {

namespace {

struct DataArgs {
  std::string home;
  std::string corpus;
  std::string name;
  std::string tokenizer = "byte";
  bool force = false;
  bool json = false;
};

nlohmann::json meta_json(const std::string& dir, const ShardMeta& meta) {
  nlohmann::json json = meta;
  json["path"] = dir;
  return json;
}

void run_prepare(const DataArgs& args) {
  const std::string home = home_resolve(args.home);
  const std::string dir = args.name.empty() ? data_prepared_dir(args.corpus, args.tokenizer, home_data_dir(home))
                                            : home_data_dir(home) + "/" + args.name;
  if (!args.force && std::filesystem::exists(dir + "/meta.toml")) {
    ShardMeta meta = shard_meta_read(dir);
    if (args.json)
      print_json(meta_json(dir, meta));
    else
      std::cout << fmt::format("{}: already prepared ({} train + {} val tokens); --force to prepare again\n", dir,
                               grouped(meta.train_tokens), grouped(meta.val_tokens));
    return;
  }
  PrepareOptions options;
  options.tokenizer = args.tokenizer;
  auto start = std::chrono::steady_clock::now();
  auto last = start;
  bool shown = false;
  options.on_progress = [&](double progress, std::uint64_t tokens) {
    auto now = std::chrono::steady_clock::now();
    if (now - last < std::chrono::milliseconds(500)) return;
    last = now;
    shown = true;
    double seconds = std::chrono::duration<double>(now - start).count();
    std::cerr << fmt::format("\rpreparing {}: {:5.1f}%  {} tokens  {:.1f} M tokens/s", args.corpus, 100 * progress,
                             grouped(tokens), tokens / seconds / 1e6)
              << std::flush;
  };
  ShardMeta meta = data_prepare(args.corpus, dir, options);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (shown) std::cerr << "\r" << std::string(70, ' ') << "\r";
  if (args.json) {
    nlohmann::json json = meta_json(dir, meta);
    json["seconds"] = seconds;
    print_json(json);
    return;
  }
  std::cout << fmt::format("{}: {} train + {} val tokens ({}, vocabulary {}, {}) in {:.1f} s\n", dir,
                           grouped(meta.train_tokens), grouped(meta.val_tokens), meta.tokenizer, meta.vocab_size,
                           meta.dtype, seconds);
}

void run_list(const DataArgs& args) {
  const std::string home = home_resolve(args.home);
  auto prepared = data_list(home_data_dir(home));
  if (args.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& [dir, meta] : prepared) list.push_back(meta_json(dir, meta));
    print_json({{"prepared", list}});
    return;
  }
  if (prepared.empty()) std::cout << "no prepared corpora under " << home_data_dir(home) << "\n";
  for (const auto& [dir, meta] : prepared) {
    std::cout << fmt::format("{:<40} {:<8} V={:<6} {:>14} train {:>12} val  {}\n", dir, meta.tokenizer, meta.vocab_size,
                             grouped(meta.train_tokens), grouped(meta.val_tokens), meta.source);
  }
  std::cout << "built-in corpora:\n";
  for (const CorpusInfo& info : corpora_builtin()) {
    bool installed = std::filesystem::exists(info.path);
    std::cout << fmt::format("  {:<8} {} [{}]\n", info.name, info.description,
                             installed ? "installed" : "apt-get install " + info.package);
  }
}

}  // namespace

void add_data_command(CLI::App& app) {
  auto args = std::make_shared<DataArgs>();
  CLI::App* data = app.add_subcommand("data", "Prepare corpora as token shards; list them");
  data->require_subcommand(1);
  CLI::App* prepare = data->add_subcommand("prepare", "Tokenize a corpus into TFW_HOME/data/<name>/{train,val}.bin");
  prepare->add_option("corpus", args->corpus, "gcide, kjv, pydoc, or a text file or folder")->required();
  prepare->add_option("--tokenizer", args->tokenizer, "tokenizer (byte)");
  prepare->add_option("--name", args->name, "folder name under TFW_HOME/data (default CORPUS-TOKENIZER)");
  prepare->add_flag("--force", args->force, "prepare again even if it exists");
  CLI::App* list = data->add_subcommand("list", "Prepared corpora and the built-in ones");
  for (CLI::App* command : {prepare, list}) {
    add_home_option(command, args->home);
    command->add_flag("--json", args->json, "print JSON (keys in docs/cli.md)");
  }
  prepare->callback([args] { run_prepare(*args); });
  list->callback([args] { run_list(*args); });
}

}  // namespace tfw::cli
