// libFuzzer target: one line a client sends the engine service, through the checks the
// service applies before and while parsing it (workbench/service/protocol.h): the nesting
// scan, then nlohmann's parser, then the echo of its id as the reply would serialise it.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "workbench/service/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > tfw::service::kMaxLine) return 0;  // refused unread by the connection
  const std::string line(reinterpret_cast<const char*>(data), size);
  if (tfw::service::json_depth(line) > tfw::service::kMaxDepth) return 0;  // refused before parsing
  const nlohmann::json message = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (message.is_discarded()) return 0;
  if (message.is_object() && message.contains("id")) {
    const nlohmann::json reply = {{"type", "error"}, {"reply_to", message["id"]}};
    (void)reply.dump();
  }
  (void)message.dump();
  return 0;
}
