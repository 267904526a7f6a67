#include "engine/files.h"

#include <fcntl.h>
#include <unistd.h>

namespace tfw {

void path_fsync(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace tfw
