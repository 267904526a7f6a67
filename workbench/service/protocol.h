// The engine service's wire protocol (docs/service.md): newline-delimited JSON over TCP.
// A client's first message is a hello with the protocol version (and the token when the
// service has one); then requests, each answered by one reply, except `watch`, which streams
// a run's metrics and events until the client disconnects. Torch-free, ImGui-free.
#pragma once

#include <cstddef>
#include <string>

namespace tfw::service {

inline constexpr int kProtocolVersion = 1;
inline constexpr const char* kDefaultAddress = "127.0.0.1:7433";
inline constexpr std::size_t kMaxLine = 1 << 20;  // bytes per message, newline included
inline constexpr int kMaxDepth = 64;              // nested arrays and objects per message

// How deeply the arrays and objects of a JSON text nest (brackets inside strings do not
// count), scanning no further than one level past `limit`. A message nested past kMaxDepth
// is refused before it is parsed: echoing or printing one recurses once a level.
int json_depth(const std::string& text, int limit = kMaxDepth);

// "HOST:PORT" (HOST may be [v6]); throws UsageError with a hint for anything else.
std::pair<std::string, unsigned short> address_parse(const std::string& address);

// The service to talk to: `flag`, else $TFW_SERVICE, else kDefaultAddress.
std::string address_resolve(const std::string& flag);

// The token in `path` (surrounding whitespace removed); throws UsageError when missing or empty.
std::string token_read(const std::string& path);

// Compares in time independent of where the strings differ.
bool token_equal(const std::string& a, const std::string& b);

}  // namespace tfw::service
