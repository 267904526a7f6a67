// Errors the engine throws. It never exits or aborts on user input: it throws one of
// these with what was wrong and how to fix it; the CLI maps them to exit codes
// (UsageError -> 2, Error -> 1).
#pragma once

#include <stdexcept>
#include <string>

namespace tfw {

// A runtime failure: a file that cannot be read, a plugin that fails to load.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// The user's input is wrong (a bad config key or value, an unknown name): exit code 2.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& what) : Error(what) {}
};

// Joins a message and a hint in the project's one format: "message\n  hint: fix".
std::string with_hint(const std::string& message, const std::string& hint);

}  // namespace tfw
