// [data] as one list of keys (data_keys.h): each key read, checked and written back in one
// place, for the task whose [data] it belongs to.
#include "engine/config/data_keys.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "engine/config/tokenizer_name.h"
#include "engine/core/home.h"

namespace tfw {

namespace {

void confined_or_fail(ConfigTable& table, const char* key, const std::string& path) {
  const std::string root = confine_root();
  if (root.empty() || path_inside(path, root)) return;
  table.fail(key, fmt::format("'{}' is outside {}, the folder this job may read", path, root),
             "a job of the engine service reads files only inside TFW_HOME: copy the file there");
}

// A relative path is read from the config file's folder.
std::filesystem::path beside_config(const std::string& name, const std::string& config_path) {
  std::filesystem::path path(name);
  if (path.is_relative() && !config_path.empty()) path = std::filesystem::path(config_path).parent_path() / path;
  return path;
}

// data.tokenizer: byte, gpt2, or a tokenizer.json (relative to the config file's folder;
// kept absolute in the resolved config, so that checkpoints find it from anywhere).
void tokenizer_read(ConfigTable& t, const char* key, const std::string& config_path, DataConfig& c) {
  const std::string name = t.get_string(key, c.tokenizer);
  if (name == "byte" || name == "gpt2") {
    c.tokenizer = name;
    return;
  }
  if (!tokenizer_is_file(name)) {
    t.fail(key, fmt::format("unknown tokenizer '{}'", name),
           "use byte, gpt2, or the path of a Hugging Face tokenizer.json (a name ending in .json)");
  }
  const std::filesystem::path path = beside_config(name, config_path);
  // Confined (a job of the service, or a submission it plans): the resolved path, the one the
  // job opens, must be inside; checked before existence, so that the error says nothing of
  // files outside.
  confined_or_fail(t, key, path.string());
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    t.fail(key, fmt::format("no such tokenizer.json: {}", path.string()),
           "a relative path is read from the config file's folder");
  }
  c.tokenizer = std::filesystem::absolute(path).lexically_normal().string();
}

// data.eval_corpora: read after data.corpus, which it may not repeat.
void eval_corpora_read(ConfigTable& t, const char* key, const std::string&, DataConfig& c) {
  c.eval_corpora = t.get_string_array(key);
  for (const std::string& corpus : c.eval_corpora) {
    if (corpus.empty()) t.fail(key, "holds an empty name", "name a corpus: eval_corpora = [\"gcide\"]");
    if (corpus == c.corpus) {
      t.fail(key, fmt::format("'{}' is the run's own corpus, which is evaluated anyway", corpus),
             "list only other corpora");
    }
  }
}

void eval_corpora_write(const DataConfig& c, const char* key, toml::table& t) {
  if (c.eval_corpora.empty()) return;  // absent when empty: older stored configs stay byte-identical
  toml::array corpora;
  for (const std::string& corpus : c.eval_corpora) corpora.push_back(corpus);
  t.insert(key, std::move(corpora));
}

void dataset_read(ConfigTable& t, const char* key, const std::string& config_path, DataConfig& c) {
  std::string& dataset = c.image.dataset;
  dataset = t.get_string(key, dataset);
  if (dataset == "fashion-mnist") return;
  const std::filesystem::path path = beside_config(dataset, config_path);
  confined_or_fail(t, key, path.string());
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) {
    t.fail(key, fmt::format("'{}' is neither a built-in dataset nor a folder", dataset),
           "use \"fashion-mnist\" or a folder holding the IDX files {train,t10k}-{images-idx3,labels-idx1}-ubyte"
           "[.gz]; a relative path is read from the config file's folder");
  }
  dataset = std::filesystem::absolute(path).lexically_normal().string();
}

void tuning_size_read(ConfigTable& t, const char* key, const std::string&, DataConfig& c) {
  c.image.tuning_size = t.get_int(key, c.image.tuning_size);
  if (c.image.tuning_size < 1) {
    t.fail(key, fmt::format("must be at least 1, got {}", c.image.tuning_size),
           "the number of training images held out for validation when validation = \"tuning\"");
  }
}

void crop_pad_read(ConfigTable& t, const char* key, const std::string&, DataConfig& c) {
  c.image.crop_pad = t.get_int(key, c.image.crop_pad);
  if (c.image.crop_pad < 0 || c.image.crop_pad > 64) {
    t.fail(key, fmt::format("must be in 0..64, got {}", c.image.crop_pad),
           "the pixels of zero padding before a random crop; 0 turns cropping off");
  }
}

// A key written back as it is held: `Member` is a field of DataConfig, or of its image block.
template <auto Member>
void write_text(const DataConfig& c, const char* key, toml::table& t) {
  t.insert(key, c.*Member);
}
template <auto Member>
void write_image(const DataConfig& c, const char* key, toml::table& t) {
  t.insert(key, c.image.*Member);
}

const Task kText = Task::language_model;
const Task kImage = Task::image_classification;

}  // namespace

const std::vector<DataKey>& data_keys() {
  static const std::vector<DataKey> keys = {
      // A language model's: the corpus, its tokenizer, and further corpora evaluated.
      {"corpus", kText,
       [](ConfigTable& t, const char* key, const std::string&, DataConfig& c) {
         c.corpus = t.get_string(key, c.corpus);
       },
       write_text<&DataConfig::corpus>},
      {"tokenizer", kText, tokenizer_read, write_text<&DataConfig::tokenizer>},
      {"eval_corpora", kText, eval_corpora_read, eval_corpora_write},
      // An image classifier's: the dataset, the validation split, and the augmentation.
      {"dataset", kImage, dataset_read, write_image<&ImageDataConfig::dataset>},
      {"validation", kImage,
       [](ConfigTable& t, const char* key, const std::string&, DataConfig& c) {
         c.image.validation = t.get_choice(key, c.image.validation, {"test", "tuning"});
       },
       write_image<&ImageDataConfig::validation>},
      {"tuning_size", kImage, tuning_size_read, write_image<&ImageDataConfig::tuning_size>},
      {"crop_pad", kImage, crop_pad_read, write_image<&ImageDataConfig::crop_pad>},
      {"flip", kImage,
       [](ConfigTable& t, const char* key, const std::string&, DataConfig& c) {
         c.image.flip = t.get_bool(key, c.image.flip);
       },
       write_image<&ImageDataConfig::flip>},
  };
  return keys;
}

DataConfig data_parse(ConfigTable& t, const std::string& config_path, Task task) {
  DataConfig c;
  c.task = task;
  for (const DataKey& key : data_keys()) {
    if (key.task == task) key.read(t, key.name, config_path, c);
  }
  return c;
}

toml::table data_to_toml(const DataConfig& c) {
  toml::table t;
  for (const DataKey& key : data_keys()) {
    if (key.task == c.task) key.write(c, key.name, t);
  }
  return t;
}

}  // namespace tfw
