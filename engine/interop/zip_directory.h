// The central directory of a zip archive (a torch.save file), read by our own bounded code
// before LibTorch's reader opens the file: LibTorch's reader inflates records into buffers of
// their declared sizes, the `version` record as it opens the file. Torch-free.
#pragma once

#include <string>

namespace tfw {

// Every record's inflated size as the directory declares it (zip64 sizes from their extra
// field) must be at most 4 times the file + 1 MiB: torch.save stores records uncompressed.
// UsageError naming the record otherwise. A directory that cannot be found or read is left to
// LibTorch's reader, which says the archive is corrupt. Reads at most the last 64 KiB and a
// directory of at most 64 MiB.
void zip_sizes_check(const std::string& path);

}  // namespace tfw
