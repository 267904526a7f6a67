// SHA-256 (FIPS 180-4), for content hashes of run bundles (runner/bundle.h). Torch-free.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tfw {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, std::size_t bytes);
  void update(std::string_view text) { update(text.data(), text.size()); }
  std::string hex();  // the digest as 64 lowercase hex digits; the object is spent after it

 private:
  void block(const unsigned char* p);
  std::array<std::uint32_t, 8> h_;
  unsigned char buffer_[64];
  std::size_t used_ = 0;
  std::uint64_t length_ = 0;  // bytes so far
};

std::string sha256_hex(std::string_view text);

}  // namespace tfw
