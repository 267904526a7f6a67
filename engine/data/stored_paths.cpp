// See stored_paths.h.
#include "engine/data/stored_paths.h"

#include <filesystem>

#include <fmt/format.h>

#include "engine/data/corpus.h"
#include "engine/data/images.h"
#include "engine/data/shards.h"
#include "engine/data/tokenizer.h"
#include "engine/core/error.h"
#include "engine/core/home.h"
#include "engine/config/run_config.h"

namespace tfw {

namespace {

namespace fs = std::filesystem;

bool builtin_corpus(const std::string& name) {
  for (const CorpusInfo& info : corpora_builtin()) {
    if (info.name == name) return true;
  }
  return false;
}

[[noreturn]] void refuse(const std::string& origin, const std::string& key, const std::string& path,
                         const std::string& home, const std::string& hint) {
  throw UsageError(with_hint(fmt::format("{} names {} = '{}', outside TFW_HOME ({}): tfw reads a path that a stored "
                                         "config names only inside its home",
                                         origin, key, path, home),
                             hint));
}

}  // namespace

void stored_paths_check(const StoredDataPaths& paths, const std::string& home, const std::string& origin) {
  std::error_code ec;
  const bool tokenizer_file = tokenizer_is_file(paths.tokenizer);
  if (tokenizer_file && fs::exists(paths.tokenizer, ec) && !path_inside(paths.tokenizer, home) &&
      (paths.beside.empty() || !path_inside(paths.tokenizer, paths.beside))) {
    refuse(origin, "data.tokenizer", paths.tokenizer, home,
           "keep the tokenizer.json inside TFW_HOME (e.g. HOME/tokenizers/NAME.json) or beside the checkpoint, "
           "as `tfw import --out` does; a path elsewhere that a file names is not read");
  }
  if (!paths.dataset.empty() && paths.dataset != "fashion-mnist" && fs::exists(paths.dataset, ec) &&
      !path_inside(paths.dataset, home)) {
    refuse(origin, "data.dataset", paths.dataset, home,
           "copy the dataset's folder into TFW_HOME and train on it there, or name it yourself on the command line");
  }
  for (const std::string& corpus : paths.corpora) {
    if (builtin_corpus(corpus) || !fs::exists(corpus, ec) || path_inside(corpus, home)) continue;
    // Prepared shards (train.bin and val.bin: token ids, read and never copied) may lie anywhere,
    // such as a large pre-tokenized corpus on a shared disk; text outside the home may not.
    if (fs::exists(fs::path(corpus) / "train.bin", ec) && fs::exists(fs::path(corpus) / "val.bin", ec)) continue;
    // Its shards, prepared in this home before (a run of one's own on a text file outside the
    // home): those are read, not the path.
    const std::string prepared = data_prepared_dir(corpus, paths.tokenizer, home_data_dir(home));
    if (fs::exists(prepared + "/meta.toml", ec)) continue;
    refuse(origin, "data.corpus", corpus, home,
           fmt::format("name it yourself if you mean it: `tfw eval CHECKPOINT --corpus {0}`, or prepare it into this "
                       "home first with `tfw data prepare {0}{1} --home {2}`",
                       corpus, paths.tokenizer == "byte" ? "" : " --tokenizer " + paths.tokenizer, home));
  }
}

void stored_config_check(const RunConfig& config, const std::string& home, const std::string& origin,
                         bool corpora_given, const std::string& beside) {
  StoredDataPaths paths;
  paths.beside = beside;
  if (config.data.task == Task::image_classification) {
    paths.dataset = config.data.image.dataset;
  } else {
    paths.tokenizer = config.data.tokenizer;
    if (!corpora_given) {
      paths.corpora = config.data.eval_corpora;
      paths.corpora.insert(paths.corpora.begin(), config.data.corpus);
    }
  }
  stored_paths_check(paths, home, origin);
}

void data_preflight(const RunConfig& config, const std::string& home, const std::string& where) {
  try {
    std::error_code ec;
    if (config.data.task == Task::image_classification) {
      const std::string& dataset = config.data.image.dataset;
      if (dataset != "fashion-mnist" && !fs::is_directory(dataset, ec)) {
        throw UsageError(with_hint(fmt::format("data.dataset = '{}': no such folder", dataset),
                                   "name fashion-mnist, or a folder of the four IDX files"));
      }
      image_dataset_dir(dataset);  // fashion-mnist: its package is installed
      return;
    }
    if (tokenizer_is_file(config.data.tokenizer)) tokenizer_label(config.data.tokenizer);  // readable
    std::vector<std::string> corpora = config.data.eval_corpora;
    corpora.insert(corpora.begin(), config.data.corpus);
    for (const std::string& corpus : corpora) {
      if (fs::exists(fs::path(corpus) / "train.bin", ec) && fs::exists(fs::path(corpus) / "val.bin", ec)) continue;
      const std::string prepared = data_prepared_dir(corpus, config.data.tokenizer, home_data_dir(home));
      if (fs::exists(prepared + "/meta.toml", ec)) continue;
      corpus_check(corpus);
    }
  } catch (const UsageError& e) {
    if (where.empty()) throw;
    throw UsageError(where + ": " + e.what());
  }
}

}  // namespace tfw
