// `--bundle FILE` of `tfw report` and `tfw export`: the runs of run bundles (runner/bundle.h),
// imported into a private temporary home that is removed when the command ends, so that a
// report is rebuilt from shipped data alone and the user's home is never touched.
#pragma once

#include <string>
#include <vector>

namespace tfw::cli {

class BundleHome {
 public:
  // Imports every bundle, in order, into a new folder under $TMPDIR (or /tmp).
  explicit BundleHome(const std::vector<std::string>& bundles);
  ~BundleHome();
  BundleHome(const BundleHome&) = delete;
  BundleHome& operator=(const BundleHome&) = delete;
  const std::string& home() const { return home_; }
  std::string describe() const;  // "the bundle docs/results/data/e1-mini.tfwb"

 private:
  std::string home_;
  std::vector<std::string> bundles_;
};

}  // namespace tfw::cli
