// The run store's schema as a list of migrations (docs/store.md, "Schema"): migration i
// takes a store from version i to i + 1; store.cpp applies them. Append, never edit.
#pragma once

#include <vector>

namespace tfw::detail {

const std::vector<const char*>& store_migrations();

}  // namespace tfw::detail
