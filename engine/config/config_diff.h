// Config keys that differ between two runs: `tfw runs diff`, `tfw runs compare` and
// the changed-config refusal of `tfw run` name them. Torch-free.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace tfw {

// A TOML document as dotted keys and their values as TOML writes them ("train.lr" -> "0.002",
// "model.layers" -> "4"). Tables are walked into; an array stays one value.
// Throws Error naming `what` when the text is not TOML.
std::map<std::string, std::string> config_flatten(const std::string& toml_text, const std::string& what = "config");

struct ConfigDifference {
  std::string key;
  std::string a, b;  // "" where the key is absent on that side
};

// The keys whose values differ, or that only one side has, in key order.
std::vector<ConfigDifference> config_differences(const std::string& a, const std::string& b);

}  // namespace tfw
