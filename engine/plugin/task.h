// Tasks: what a model family's models do (ModelFamily::task, engine/plugin/plugin_api.h). The task
// decides the [data] table (run_config.h), how batches are drawn, the loss, the validation
// metrics and what an example is (engine/train/task_data.h); the trainer, checkpoints, growth,
// the store and exports are the same code for every task. Torch-free.
#pragma once

#include <optional>
#include <string>

namespace tfw {

// A LanguageModel: next-token prediction on token windows of a corpus. An example is a
// window of train.seq_len tokens; metrics: loss, perplexity, bits per token (and byte).
inline constexpr const char* kLanguageModelTask = "language_model";
// An ImageClassifier: class labels of images. An example is an image, its tokens the
// patches (and class token) the model reads; metrics: loss and accuracy.
inline constexpr const char* kImageClassificationTask = "image_classification";

// One validation metric of a task (the trainer records it as val/KEY).
struct Metric {
  std::string key;  // "loss", "accuracy", "loss@kjv", ...
  double value = 0;
  bool headline = false;  // shown beside the loss on progress lines and in summaries (accuracy)
};

// A task as a value: the typed config holds it (DataConfig::task, run_config.h); plugins name
// theirs as text (ModelFamily::task), parsed where the config is read.
enum class Task { language_model, image_classification };

// kLanguageModelTask or kImageClassificationTask.
inline std::string task_name(Task task) {
  return task == Task::image_classification ? kImageClassificationTask : kLanguageModelTask;
}

// "language_model" | "image_classification"; nullopt for anything else.
inline std::optional<Task> task_parse(const std::string& name) {
  if (name == kLanguageModelTask) return Task::language_model;
  if (name == kImageClassificationTask) return Task::image_classification;
  return std::nullopt;
}

inline bool task_known(const std::string& task) { return task_parse(task).has_value(); }

}  // namespace tfw
