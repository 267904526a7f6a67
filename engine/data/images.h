// Image-classification datasets in IDX files (engine/data/idx.h): Fashion-MNIST from
// Debian's dataset-fashion-mnist, or any folder with the same four files. Splits
// (docs/configs.md, "Images"):
// - validation = "test": train on the 60,000 training images, validate on the official
//   10,000 test images;
// - validation = "tuning": validate on the LAST tuning_size training images and train on the
//   ones before them, so that settings are chosen without touching the test split.
// Pixels are normalised with the mean and standard deviation of the training part (over
// every pixel, after scaling to [0, 1]). Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/config/run_config.h"

namespace tfw {

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

struct ImageSet {
  std::int64_t count = 0, channels = 1, height = 0, width = 0;
  std::vector<std::uint8_t> pixels;  // count × channels × height × width, row-major
  std::vector<std::uint8_t> labels;  // count
};

struct ImageSplits {
  std::string dir;              // the folder the IDX files were read from
  std::string validation_name;  // "test (10000 images)" or "tuning (the last 10000 training images)"
  ImageSet train, validation;
  std::int64_t classes = 0;  // 1 + the largest label
  double mean = 0, std = 1;  // of the training part's pixels in [0, 1]
};

// The folder of `dataset` ("fashion-mnist" or a folder). Throws UsageError naming the
// package to install when the built-in one is missing.
std::string image_dataset_dir(const std::string& dataset);

// Reads and splits the dataset. Throws UsageError for a missing, corrupt or truncated file,
// images and labels of different counts, or a tuning split as large as the training set.
ImageSplits image_splits_load(const ImageDataConfig& config);

}  // namespace tfw
