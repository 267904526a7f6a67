// Paths that a stored config names are data, not orders (docs/security.md, "Paths from files").
// A checkpoint's or an imported bundle's config names its corpus, tokenizer.json and image
// dataset; a command that reads such a config (eval, sample, inspect, train --resume) reads
// only what lies in TFW_HOME: a built-in corpus, files inside the home, a corpus whose shards
// are already prepared there (which reads the shards, not the path), or a folder of prepared
// shards anywhere (token ids, read in place, never copied). Other paths outside the home (text
// that would be read and written into the home as shards) are read only when the user names
// them on the command line. Torch-free.
#pragma once

#include <string>
#include <vector>

namespace tfw {

struct StoredDataPaths {
  std::vector<std::string> corpora;  // data.corpus and data.eval_corpora (empty: the user named them)
  std::string tokenizer;             // data.tokenizer
  std::string dataset;               // data.image.dataset for an image classifier, else ""
  std::string beside;                // the folder of the file the config came from: a tokenizer.json
                                     // there belongs to it (`tfw import --out` writes both)
};

// Throws UsageError, naming `origin` (e.g. "checkpoint PATH's config") and the key, when
// `paths` would make tfw read a path outside `home`. A corpus or tokenizer that does not exist
// is left to the usual "unknown corpus" errors.
void stored_paths_check(const StoredDataPaths& paths, const std::string& home, const std::string& origin);

struct RunConfig;

// Everything a run's [data] names, resolved before any compute or record: each corpus (and
// eval corpus) is a built-in one whose package is installed, a file or folder of text, or
// shards prepared in `home`; a tokenizer.json is readable; an image dataset is installed or a
// folder. Throws the UsageError the run would have stopped with, prefixed by `where`
// ("runs.x (run 'x')", or "" for `tfw train`). A run that cannot start records nothing.
void data_preflight(const RunConfig& config, const std::string& home, const std::string& where = "");
// The same for a stored run config's [data]: its corpus and eval corpora (none when
// `corpora_given`: the user named the corpora), tokenizer and image dataset.
void stored_config_check(const RunConfig& config, const std::string& home, const std::string& origin,
                         bool corpora_given = false, const std::string& beside = "");

}  // namespace tfw
