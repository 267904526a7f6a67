// The names data.tokenizer accepts, as text: "byte", "gpt2", or the path of a tokenizer.json.
// Here so that a config is checked without the tokenizers themselves (engine/data/tokenizer.h).
#pragma once

#include <string>

namespace tfw {

// True for a name that is a tokenizer.json path (it ends in ".json").
inline bool tokenizer_is_file(const std::string& name) {
  return name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0;
}

}  // namespace tfw
