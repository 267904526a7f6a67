// Plugin discovery and loading with dlopen. See registry.h.
#include "engine/plugin/registry.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/plugin/task.h"

namespace tfw {

namespace fs = std::filesystem;

bool Registry::name_taken(const std::string& name, const std::string& kind) const {
  for (const PluginEntry& entry : entries()) {
    if (entry.name == name && entry.kind == kind) return true;
  }
  return false;
}

std::optional<PluginEntry> Registry::entry_new(const std::string& name, const std::string& kind,
                                               const std::string& version, const std::string& what) {
  if (name_taken(name, kind)) {
    rejected_.push_back(
        {loading_path_, fmt::format("{} '{}' is already registered; this second copy is ignored", what, name)});
    return std::nullopt;
  }
  return PluginEntry{name, kind, version, loading_path_, loading_origin_.empty() ? "in-process" : loading_origin_};
}

void Registry::add_model_family(std::shared_ptr<const ModelFamily> family) {
  std::optional<PluginEntry> entry = entry_new(family->name(), "model-family", family->version(), "model family");
  if (!entry) return;
  if (!task_known(family->task())) {
    rejected_.push_back({loading_path_, fmt::format("model family '{}' declares the task '{}', which this tfw does not "
                                                    "know (language_model, image_classification); it is ignored",
                                                    entry->name, family->task())});
    return;
  }
  families_.push_back({std::move(family), std::move(*entry)});
}

void Registry::add_growth_method(std::shared_ptr<const GrowthMethod> method) {
  std::optional<PluginEntry> entry = entry_new(method->name(), "growth-method", method->version(), "growth method");
  if (!entry) return;
  growth_methods_.push_back({std::move(method), std::move(*entry)});
}

void Registry::load_folder(const std::string& folder, const std::string& origin) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return;
  std::string canonical = fs::canonical(folder, ec).string();
  if (std::find(loaded_folders_.begin(), loaded_folders_.end(), canonical) != loaded_folders_.end()) {
    return;
  }
  loaded_folders_.push_back(canonical);
  std::vector<std::string> files;
  for (const fs::directory_entry& item : fs::directory_iterator(folder, ec)) {
    if (item.is_regular_file() && item.path().extension() == ".so") files.push_back(item.path());
  }
  std::sort(files.begin(), files.end());  // deterministic order
  for (const std::string& file : files) load_file(file, origin);
}

void Registry::load_file(const std::string& path, const std::string& origin) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    rejected_.push_back({path, fmt::format("cannot load: {}", dlerror())});
    return;
  }
  using VersionFn = int (*)();
  using RegisterFn = void (*)(PluginRegistrar&);
  auto version_fn = reinterpret_cast<VersionFn>(dlsym(handle, "tfw_plugin_api_version"));
  auto register_fn = reinterpret_cast<RegisterFn>(dlsym(handle, "tfw_plugin_register"));
  if (version_fn == nullptr || register_fn == nullptr) {
    rejected_.push_back({path,
                         "not a tfw plugin: it does not export tfw_plugin_api_version "
                         "and tfw_plugin_register (define them with TFW_PLUGIN)"});
    dlclose(handle);
    return;
  }
  int version = version_fn();
  if (version != kPluginApiVersion) {
    rejected_.push_back({path, fmt::format("built for plugin API version {}, this tfw has version {}; "
                                           "rebuild the plugin against this tfw's engine headers",
                                           version, kPluginApiVersion)});
    dlclose(handle);
    return;
  }
  loading_path_ = path;
  loading_origin_ = origin;
  try {
    register_fn(*this);
  } catch (const std::exception& e) {
    rejected_.push_back({path, fmt::format("registration failed: {}", e.what())});
  }
  loading_path_.clear();
  loading_origin_.clear();
  // Never dlclose a registered plugin: its objects live in the registry.
}

namespace {

// The registered item named `name`; else a UsageError that lists the known names, or says
// that no plugin of the kind is loaded.
template <typename Item>
const Item& registered(const std::vector<Item>& items, const std::string& name, const char* kind,
                       const char* none_loaded, const char* known_label) {
  for (const Item& item : items) {
    if (item.entry.name == name) return item;
  }
  std::vector<std::string> known;
  for (const Item& item : items) known.push_back(item.entry.name);
  throw UsageError(
      with_hint(fmt::format("unknown {} '{}'", kind, name),
                known.empty() ? std::string(none_loaded) : fmt::format("{}: {}", known_label, fmt::join(known, ", "))));
}

}  // namespace

const ModelFamily& Registry::family(const std::string& name) const {
  return *registered(families_, name, "model family",
                     "no model family plugin is loaded; run `tfw plugins` to see what was found and refused",
                     "known families")
              .family;
}

const GrowthMethod& Registry::growth_method(const std::string& name) const {
  return *registered(growth_methods_, name, "growth method", "no growth method plugin is loaded; run `tfw plugins`",
                     "known methods")
              .method;
}

std::vector<PluginEntry> Registry::entries() const {
  std::vector<PluginEntry> all;
  for (const Family& item : families_) all.push_back(item.entry);
  for (const Growth& item : growth_methods_) all.push_back(item.entry);
  return all;
}

Registry& registry() {
  static Registry instance;
  static std::once_flag loaded;
  std::call_once(loaded, [] {
    instance.load_folder((fs::path(executable_dir()) / "plugins").string(), "built-in");
    if (const char* extra = std::getenv("TFW_PLUGIN_PATH")) {
      std::string paths = extra;
      std::size_t start = 0;
      while (start <= paths.size()) {
        std::size_t colon = paths.find(':', start);
        std::string folder = paths.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
        if (!folder.empty()) instance.load_folder(folder, "TFW_PLUGIN_PATH");
        if (colon == std::string::npos) break;
        start = colon + 1;
      }
    }
  });
  return instance;
}

}  // namespace tfw
