// See protocol.h.
#include "workbench/service/protocol.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/core/json_depth.h"

namespace tfw::service {

std::pair<std::string, unsigned short> address_parse(const std::string& address) {
  const std::size_t colon = address.rfind(':');
  const std::string hint = "write HOST:PORT, e.g. 127.0.0.1:7433 or 0.0.0.0:7433 (port 0: any free port)";
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    throw UsageError(with_hint(fmt::format("'{}' is not an address", address), hint));
  }
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string port_text = address.substr(colon + 1);
  char* end = nullptr;
  const long port = std::strtol(port_text.c_str(), &end, 10);
  if (*end != '\0' || port < 0 || port > 65535) {
    throw UsageError(with_hint(fmt::format("'{}' is not a port number in '{}'", port_text, address), hint));
  }
  return {host, static_cast<unsigned short>(port)};
}

std::string address_resolve(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("TFW_SERVICE"); env && *env) return env;
  return kDefaultAddress;
}

std::string token_read(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError(with_hint(fmt::format("cannot read the token file {}", path), "check the path"));
  // A secret others can read is no secret: refused as ssh refuses a readable private key.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    throw UsageError(with_hint(fmt::format("the token file {} can be read or written by other users (mode {:04o}): "
                                           "anyone on this machine could use the service as you",
                                           path, st.st_mode & 07777),
                               fmt::format("chmod 600 {}", path)));
  }
  std::stringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  const auto begin = token.find_first_not_of(" \t\r\n");
  const auto end = token.find_last_not_of(" \t\r\n");
  if (begin == std::string::npos) {
    throw UsageError(with_hint(fmt::format("the token file {} is empty", path),
                               "put a long random secret in it, e.g. `head -c 32 /dev/urandom | base64 > FILE`"));
  }
  return token.substr(begin, end - begin + 1);
}

int json_depth(const std::string& text, int limit) { return json_nesting_depth(text, limit); }

bool token_equal(const std::string& a, const std::string& b) {
  unsigned char difference = a.size() == b.size() ? 0 : 1;
  const std::size_t n = std::max(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    difference |= static_cast<unsigned char>(x ^ y);
  }
  return difference == 0;
}

}  // namespace tfw::service
