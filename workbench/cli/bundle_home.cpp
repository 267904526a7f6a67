// See bundle_home.h.
#include "workbench/cli/bundle_home.h"

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/core/home.h"
#include "runner/bundle.h"

namespace tfw::cli {

BundleHome::BundleHome(const std::vector<std::string>& bundles) : bundles_(bundles) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/tfw-bundle-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    throw UsageError(
        with_hint(fmt::format("cannot make a temporary folder {}", pattern), "set TMPDIR to a writable folder"));
  }
  home_ = pattern;
  try {
    for (const std::string& bundle : bundles) runner::bundle_import(bundle, home_);
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove_all(home_, ec);
    throw;
  }
}

BundleHome::~BundleHome() {
  std::error_code ec;
  std::filesystem::remove_all(home_, ec);
}

std::string BundleHome::describe() const {
  std::string out = bundles_.size() == 1 ? "the bundle " : "the bundles ";
  for (std::size_t i = 0; i < bundles_.size(); ++i) out += (i ? ", " : "") + bundles_[i];
  return out;
}

std::string bundle_or_home(const std::vector<std::string>& bundles, const std::string& home,
                           std::unique_ptr<BundleHome>& shipped) {
  if (bundles.empty()) return home_resolve(home);
  if (!home.empty()) throw UsageError(with_hint("--bundle and --home both name runs", "give one of them"));
  shipped = std::make_unique<BundleHome>(bundles);
  return shipped->home();
}

}  // namespace tfw::cli
