// The IDX reader (engine/data/idx.h): hand-written tiny files, plain and gzipped, their errors,
// and the headers and labels of the real Fashion-MNIST package.
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/data/idx.h"
#include "engine/core/error.h"

namespace tfw {
namespace test_idx {

namespace fs = std::filesystem;

std::string bytes_of(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out.push_back(static_cast<char>(v));
  return out;
}

std::string write(const std::string& name, const std::string& bytes, bool gzip) {
  const std::string path = (fs::temp_directory_path() / ("tfw-test-idx-" + name)).string();
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream(path, std::ios::binary) << bytes;
  }
  return path;
}

std::string error_of(const std::string& path) {
  try {
    idx_read(path);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "no error";
}

// 2 x 3 x 2 images of bytes 0..11, and 3 labels: written by hand, read plain and gzipped.
TEST(Idx, HandWrittenFilesReadPlainAndGzipped) {
  std::string images = bytes_of({0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 2});
  for (int i = 0; i < 12; ++i) images.push_back(static_cast<char>(i * 20));
  const std::string labels = bytes_of({0, 0, 8, 1, 0, 0, 0, 3, 7, 0, 9});
  for (bool gzip : {false, true}) {
    SCOPED_TRACE(gzip ? "gzipped" : "plain");
    const IdxArray a = idx_read(write(gzip ? "images.gz" : "images", images, gzip));
    EXPECT_EQ(a.dims, (std::vector<std::int64_t>{2, 3, 2}));
    ASSERT_EQ(a.data.size(), 12u);
    for (int i = 0; i < 12; ++i) EXPECT_EQ(a.data[i], i * 20);
    const IdxArray l = idx_read(write(gzip ? "labels.gz" : "labels", labels, gzip));
    EXPECT_EQ(l.dims, (std::vector<std::int64_t>{3}));
    EXPECT_EQ(l.data, (std::vector<std::uint8_t>{7, 0, 9}));
    EXPECT_EQ(idx_dims(write(gzip ? "images.gz" : "images", images, gzip)), a.dims);
  }
}

// A truncated file, bytes past the elements, another magic, another element type and a
// damaged gzip stream are errors that name the file and the problem.
TEST(Idx, BadFilesAreClearErrors) {
  const std::string header = bytes_of({0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 2});
  const std::string truncated = write("truncated", header + std::string(10, 'x'), false);
  EXPECT_NE(error_of(truncated).find("truncated: the file ends after 10 of the 12 bytes of the elements"),
            std::string::npos)
      << error_of(truncated);
  const std::string short_header = write("short-header.gz", header.substr(0, 9), true);
  EXPECT_NE(error_of(short_header).find("truncated"), std::string::npos) << error_of(short_header);
  const std::string extra = write("extra", header + std::string(13, 'x'), false);
  EXPECT_NE(error_of(extra).find("bytes after the 12 elements"), std::string::npos) << error_of(extra);
  const std::string magic = write("magic", bytes_of({0x12, 0x34, 0x56, 0x78}) + std::string(8, 'x'), false);
  EXPECT_NE(error_of(magic).find("not an IDX file (magic number 0x12345678)"), std::string::npos) << error_of(magic);
  const std::string floats = write("floats", bytes_of({0, 0, 0x0D, 1, 0, 0, 0, 1}) + std::string(4, 'x'), false);
  EXPECT_NE(error_of(floats).find("element type 0x0d"), std::string::npos) << error_of(floats);
  // A gzip stream whose compressed bytes are damaged.
  std::string big = header;
  for (int i = 0; i < 12; ++i) big.push_back(static_cast<char>(i));
  std::string image_bytes;
  for (int i = 0; i < 4000; ++i) image_bytes.push_back(static_cast<char>((i * 7919) % 251));
  const std::string bigger = bytes_of({0, 0, 8, 1, 0, 0, 0x0F, 0xA0}) + image_bytes;
  const std::string path = write("damaged.gz", bigger, true);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.write("\xff\xff\xff\xff\xff\xff\xff\xff", 8);
  }
  const std::string damaged = error_of(path);
  EXPECT_TRUE(damaged.find("corrupt gzip") != std::string::npos || damaged.find("truncated") != std::string::npos)
      << damaged;
  EXPECT_NE(error_of("/nonexistent/idx.gz").find("cannot open"), std::string::npos);
}

// The real package (dataset-fashion-mnist, installed by scripts/setup): 60,000 training and
// 10,000 test images of 28 x 28, and the test labels, 1,000 of each of the 10 classes.
TEST(Idx, FashionMnistPackageHeadersAndLabels) {
  const std::string dir = "/usr/share/datasets/fashion-mnist/";
  EXPECT_EQ(idx_dims(dir + "train-images-idx3-ubyte.gz"), (std::vector<std::int64_t>{60000, 28, 28}));
  EXPECT_EQ(idx_dims(dir + "train-labels-idx1-ubyte.gz"), (std::vector<std::int64_t>{60000}));
  EXPECT_EQ(idx_dims(dir + "t10k-images-idx3-ubyte.gz"), (std::vector<std::int64_t>{10000, 28, 28}));
  const IdxArray labels = idx_read(dir + "t10k-labels-idx1-ubyte.gz");
  std::vector<int> per_class(10, 0);
  for (std::uint8_t label : labels.data) {
    ASSERT_LT(label, 10);
    per_class[label] += 1;
  }
  EXPECT_EQ(per_class, std::vector<int>(10, 1000));
}

}  // namespace test_idx
}  // namespace tfw
