// File durability: fsync a file or folder by path (errors ignored: best effort after the
// data itself was written and checked), so that a rename is durable across a crash.
#pragma once

#include <string>

namespace tfw {

void path_fsync(const std::string& path);

}  // namespace tfw
