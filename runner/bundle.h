// Run bundles: runs carried between homes in one portable file. `tfw runs export`
// writes one; `tfw runs import` reads it into a home; `tfw report --bundle` and `tfw export
// --bundle` read runs from one. The format is in docs/store.md ("Run bundles").
//
// A bundle is a gzip stream (no name, no time in its header) of lines:
//   {"format":"tfw-bundle","format_version":1,"runs":N,"files":F}
//   {"run":{...},"sha256":"...","files":[{"name":"step-00000500.safetensors","bytes":B,"sha256":"..."}, ...]}
//   <the raw bytes of each of that run's files, in order>
//   ... one line per run, parents before the runs grown from them ...
//   {"end":{"runs":N,"files":F}}
// A run's "run" object holds its record (experiment, name, lineage as the parent's experiment
// and name, compute, status, times, final metrics), its resolved config, every metric point,
// every event and its checkpoint rows; "sha256" is the hash of that object's text as written,
// which import checks. The same runs always give the same bytes: objects' keys are sorted,
// numbers are written in the shortest form that reads back to the same double, and nothing
// depends on the home, the time of export or the machine.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "storage/store.h"

namespace tfw::runner {

inline constexpr int kBundleFormatVersion = 1;

// Limits a bundle must keep before anything is allocated for it (docs/security.md).
struct BundleLimits {
  std::size_t header_bytes = 64 << 10;             // the first line
  std::size_t run_bytes = std::size_t{256} << 20;  // one run's line
  // A run line's JSON, counted while it is parsed: a metric point is one array of 5 numbers
  // (about 50 bytes of text), so a full line holds some 5 million; an empty array is 3 bytes.
  std::size_t run_containers = std::size_t{8} << 20;
  std::size_t run_values = std::size_t{32} << 20;
  int depth = 8;  // JSON nesting of a line
  std::int64_t runs = 100000;
  std::int64_t files_per_run = 20000;
  std::uint64_t file_bytes = std::uint64_t{1} << 40;  // one checkpoint file
  // The gzip stream's expansion: past the floor, the bytes it inflates to may be at most
  // ratio times the compressed bytes read so far. Metrics JSON deflates 5-10 times and
  // checkpoints hardly at all; deflate's most is about 1,000.
  std::uint64_t expansion_ratio = 100;
  std::uint64_t expansion_floor = std::uint64_t{64} << 20;
};

struct BundleExport {
  std::vector<std::string> runs;  // ids or names; their ancestors are added
  std::string experiment;         // or every run of this experiment that is not running
  bool checkpoints = false;       // also the checkpoint files and their manifests
};

struct BundleSummary {
  std::vector<std::string> runs;       // "experiment/name", in the bundle's order
  std::vector<std::string> ancestors;  // of those, the ones added as ancestors of a named run (export)
  std::vector<std::string> skipped;    // running runs left out (export), with why
  std::vector<std::string> unchanged;  // already in the home, identical (import)
  std::int64_t files = 0;
  std::uint64_t bytes = 0;  // the bundle file's size
};

// Writes the bundle to `out` (atomically: a temporary file renamed when complete).
BundleSummary bundle_export(Store& store, const BundleExport& what, const std::string& out);

// Reads `bundle` into the home `home` (its runs.db, created if needed): everything is checked
// first (format, version, sizes, hashes, names, lineage, clashes), then written in one
// transaction; a bundle that fails any check imports nothing. A run already in the home with
// the same content is left as it is; one of the same experiment and name with other content
// is refused, naming both. UsageError with a hint on every refusal.
BundleSummary bundle_import(const std::string& bundle, const std::string& home, const BundleLimits& limits = {});

// The content hash of a run as it is stored (what its bundle line's "sha256" would be).
std::string bundle_run_hash(Store& store, const RunRecord& run);

}  // namespace tfw::runner
