// SHA-256 against the standard's own test vectors (FIPS 180-4 examples, NIST CSHA), and the
// config differences of `tfw runs diff` on hand-written configs.
#include <string>

#include <gtest/gtest.h>

#include "engine/config/config_diff.h"
#include "engine/core/sha256.h"

namespace test_sha256 {

TEST(Sha256, MatchesTheStandardsVectors) {
  EXPECT_EQ(tfw::sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(tfw::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(tfw::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // One million 'a', fed in uneven pieces: the block boundary and the length both matter.
  tfw::Sha256 hash;
  const std::string piece(997, 'a');
  std::size_t left = 1000000;
  while (left > 0) {
    const std::size_t n = std::min(left, piece.size());
    hash.update(piece.data(), n);
    left -= n;
  }
  EXPECT_EQ(hash.hex(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // 55 and 56 bytes: the padding's length field fits in the last block, then does not.
  EXPECT_EQ(tfw::sha256_hex(std::string(55, 'a')), "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ(tfw::sha256_hex(std::string(56, 'a')), "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
}

TEST(ConfigDiff, NamesTheKeysThatDifferOrThatOneSideLacks) {
  const std::string a = "name = \"x\"\n[model]\nlayers = 4\nd = 128\n[train]\nlr = 0.002\nmax_steps = 200\n";
  const std::string b = "name = \"x\"\n[model]\nlayers = 4\nd = 256\n[train]\nlr = 0.002\nmax_steps = 400\nseed = 1\n";
  const std::vector<tfw::ConfigDifference> d = tfw::config_differences(a, b);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].key, "model.d");
  EXPECT_EQ(d[0].a, "128");
  EXPECT_EQ(d[0].b, "256");
  EXPECT_EQ(d[1].key, "train.max_steps");
  EXPECT_EQ(d[2].key, "train.seed");
  EXPECT_EQ(d[2].a, "");
  EXPECT_EQ(d[2].b, "1");
  EXPECT_TRUE(tfw::config_differences(a, a).empty());
  EXPECT_THROW(tfw::config_differences(a, "[model\n"), std::exception);
}

}  // namespace test_sha256
