// Internal to the run bundle sources, not part of the API (that is bundle.h): what writing a
// bundle (bundle_export.cpp) and checking and reading one into a store (bundle_import.cpp)
// share. The format's name, the text a run is written and hashed as, the run's bundle object
// and the checkpoint file names a bundle may carry; bundle.cpp defines the larger pieces.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/core/sha256.h"
#include "storage/store.h"

namespace tfw::runner::bundle_parts {

namespace fs = std::filesystem;
using nlohmann::json;

// The "format" of a bundle's header line (its version is kBundleFormatVersion, bundle.h).
inline constexpr const char* kBundleFormat = "tfw-bundle";

// The text a JSON value is written and hashed as (invalid UTF-8 replaced, never thrown).
inline std::string canonical(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

// The content hash of a run's bundle object: the hash of its text as written.
inline std::string object_hash(const json& object) { return sha256_hex(canonical(object)); }

inline std::string run_label(const std::string& experiment, const std::string& name) { return experiment + "/" + name; }

// Whether a bundle may carry a checkpoint file of this name (bundle.cpp says which).
bool checkpoint_file_name_ok(const std::string& name);

// The run as a bundle carries it (its "run" object), read from the store.
json run_object(Store& store, const RunRecord& r);

}  // namespace tfw::runner::bundle_parts
