// The device the engine computes on (train.device), as a value: "cpu", "cuda" (LibTorch's
// current CUDA device) or "cuda:N". Torch-free, so that the typed config (run_config.h) holds
// it; whether this LibTorch and machine have the device is engine/machine/device.h's
// device_problem(), which the engine installs as the config's device check when it loads.
#pragma once

#include <optional>
#include <string>

namespace tfw {

struct DeviceName {
  enum Kind { cpu, cuda };
  Kind kind = cpu;
  int index = -1;  // N of "cuda:N"; -1 for "cpu" and "cuda"

  bool is_cuda() const { return kind == cuda; }
  // As the config writes it: "cpu", "cuda" or "cuda:N".
  std::string text() const {
    if (kind == cpu) return "cpu";
    return index < 0 ? "cuda" : "cuda:" + std::to_string(index);
  }
  bool operator==(const DeviceName& other) const { return kind == other.kind && index == other.index; }
  bool operator!=(const DeviceName& other) const { return !(*this == other); }
};

// "cpu", "cuda" or "cuda:N", N written as text() writes it (decimal digits, no leading zero),
// so that text() gives back exactly `text`; nullopt for anything else.
inline std::optional<DeviceName> device_name_parse(const std::string& text) {
  if (text == "cpu") return DeviceName{};
  if (text == "cuda") return DeviceName{DeviceName::cuda, -1};
  if (text.rfind("cuda:", 0) != 0) return std::nullopt;
  const std::string digits = text.substr(5);
  if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos ||
      (digits.size() > 1 && digits[0] == '0')) {
    return std::nullopt;
  }
  return DeviceName{DeviceName::cuda, std::stoi(digits)};
}

// What is wrong with train.device = `name`, in the config's words (message and fix).
struct DeviceProblem {
  std::string message, hint;
};

// The one rule for a device's text: nothing when device_name_parse reads it, else what is wrong.
inline std::optional<DeviceProblem> device_name_problem(const std::string& text) {
  if (device_name_parse(text)) return std::nullopt;
  return DeviceProblem{"\"" + text + "\" is not a device", "use \"cpu\", \"cuda\" or \"cuda:N\""};
}

// The check a config's device passes when it is read: the text (device_name_problem), then,
// where LibTorch is in the process, the machine. libtfw_engine installs device_problem()
// (engine/machine/device.h) as it loads, which asks this LibTorch and machine whether they have
// the device; every process that reads a model's config has it, since the model families'
// plugins link it. A device that passes is one device_name_parse reads.
using DeviceCheck = std::optional<DeviceProblem> (*)(const std::string& name);
// Sets the check and returns the one it replaces (nullptr: names are checked for their form
// alone, as `tfw run --dry-run` reads a GPU experiment on a machine without one).
DeviceCheck device_check_install(DeviceCheck check);

// While it lives, device names are checked for their form alone: a GPU experiment read on a
// machine without a GPU, to plan it (`tfw run --dry-run`, whose preflight then names the
// missing device), or to report or export the runs it brought back.
class DeviceFormOnly {
 public:
  DeviceFormOnly() : saved_(device_check_install(nullptr)) {}
  ~DeviceFormOnly() { device_check_install(saved_); }
  DeviceFormOnly(const DeviceFormOnly&) = delete;
  DeviceFormOnly& operator=(const DeviceFormOnly&) = delete;

 private:
  DeviceCheck saved_;
};
std::optional<DeviceProblem> device_check(const std::string& name);

}  // namespace tfw
