// Image datasets in IDX files. See images.h.
#include "engine/data/images.h"
#include "engine/core/home.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "engine/data/idx.h"
#include "engine/core/error.h"

namespace tfw {

namespace fs = std::filesystem;

namespace {

// dir/stem or dir/stem.gz, whichever exists.
std::string idx_file(const std::string& dir, const std::string& stem) {
  for (const std::string& name : {stem + ".gz", stem}) {
    std::error_code ec;
    if (fs::is_regular_file(fs::path(dir) / name, ec)) return (fs::path(dir) / name).string();
  }
  throw UsageError(with_hint(fmt::format("the image dataset in {} has no {} (nor {}.gz)", dir, stem, stem),
                             "a dataset folder holds train-images-idx3-ubyte, train-labels-idx1-ubyte, "
                             "t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte, each plain or gzipped"));
}

ImageSet read_split(const std::string& dir, const std::string& prefix) {
  const std::string images_path = idx_file(dir, prefix + "-images-idx3-ubyte");
  const std::string labels_path = idx_file(dir, prefix + "-labels-idx1-ubyte");
  IdxArray images = idx_read(images_path);
  IdxArray labels = idx_read(labels_path);
  if (images.dims.size() != 3 && images.dims.size() != 4) {
    throw UsageError(fmt::format("{}: expected images of shape (N, H, W) or (N, C, H, W), got {} dimensions",
                                 images_path, images.dims.size()));
  }
  if (labels.dims.size() != 1) {
    throw UsageError(
        fmt::format("{}: expected labels of shape (N), got {} dimensions", labels_path, labels.dims.size()));
  }
  if (labels.dims[0] != images.dims[0]) {
    throw UsageError(fmt::format("{} holds {} images but {} holds {} labels", images_path, images.dims[0], labels_path,
                                 labels.dims[0]));
  }
  ImageSet set;
  set.count = images.dims[0];
  set.channels = images.dims.size() == 4 ? images.dims[1] : 1;
  set.height = images.dims[images.dims.size() - 2];
  set.width = images.dims.back();
  set.pixels = std::move(images.data);
  set.labels = std::move(labels.data);
  return set;
}

// Images [first, first + count) of `set`.
ImageSet slice(const ImageSet& set, std::int64_t first, std::int64_t count) {
  ImageSet out = set;
  const std::int64_t size = set.channels * set.height * set.width;
  out.count = count;
  out.pixels.assign(set.pixels.begin() + first * size, set.pixels.begin() + (first + count) * size);
  out.labels.assign(set.labels.begin() + first, set.labels.begin() + first + count);
  return out;
}

}  // namespace

std::string image_dataset_dir(const std::string& dataset) {
  if (dataset != "fashion-mnist") {
    confine_check(dataset, "data.dataset");
    return dataset;
  }
  std::error_code ec;
  if (!fs::is_directory(kFashionMnistDir, ec)) {
    throw UsageError(
        with_hint(fmt::format("the fashion-mnist dataset is not installed ({} is missing)", kFashionMnistDir),
                  "install Debian's package: apt-get install dataset-fashion-mnist (scripts/setup does)"));
  }
  return kFashionMnistDir;
}

ImageSplits image_splits_load(const ImageDataConfig& config) {
  ImageSplits splits;
  splits.dir = image_dataset_dir(config.dataset);
  ImageSet train = read_split(splits.dir, "train");
  if (config.validation == "tuning") {
    if (config.tuning_size >= train.count) {
      throw UsageError(
          with_hint(fmt::format("data.tuning_size = {} leaves no training images (the training split has {})",
                                config.tuning_size, train.count),
                    "hold out fewer images, e.g. tuning_size = 10000"));
    }
    const std::int64_t kept = train.count - config.tuning_size;
    splits.validation = slice(train, kept, config.tuning_size);
    splits.train = slice(train, 0, kept);
    splits.validation_name = fmt::format("tuning (the last {} training images)", config.tuning_size);
  } else {
    splits.validation = read_split(splits.dir, "t10k");
    splits.train = std::move(train);
    splits.validation_name = fmt::format("test ({} images)", splits.validation.count);
  }
  const ImageSet& t = splits.train;
  const ImageSet& v = splits.validation;
  if (t.channels != v.channels || t.height != v.height || t.width != v.width) {
    throw UsageError(fmt::format("{}: the training images are {}×{}×{} but the validation images {}×{}×{}", splits.dir,
                                 t.channels, t.height, t.width, v.channels, v.height, v.width));
  }
  if (t.count == 0 || v.count == 0) throw UsageError(fmt::format("{}: a split holds no images", splits.dir));
  const std::uint8_t top = std::max(*std::max_element(t.labels.begin(), t.labels.end()),
                                    *std::max_element(v.labels.begin(), v.labels.end()));
  splits.classes = static_cast<std::int64_t>(top) + 1;
  double sum = 0, squares = 0;
  for (std::uint8_t p : t.pixels) {
    const double x = p / 255.0;
    sum += x;
    squares += x * x;
  }
  const double n = static_cast<double>(t.pixels.size());
  splits.mean = sum / n;
  splits.std = std::sqrt(std::max(squares / n - splits.mean * splits.mean, 1e-12));
  return splits;
}

}  // namespace tfw
