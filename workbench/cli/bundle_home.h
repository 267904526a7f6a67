// `--bundle FILE` of `tfw report` and `tfw export`: the runs of run bundles (runner/bundle.h),
// imported into a private temporary home that is removed when the command ends, so that a
// report is rebuilt from shipped data alone and the user's home is never touched.
#pragma once

#include <memory>
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

// The home a command's --bundle and --home options name: with bundles, the home of a new
// BundleHome put in `shipped` (which keeps it alive; --home too is then refused), else
// home_resolve(home).
std::string bundle_or_home(const std::vector<std::string>& bundles, const std::string& home,
                           std::unique_ptr<BundleHome>& shipped);

}  // namespace tfw::cli
