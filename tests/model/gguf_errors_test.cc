// Truncated and corrupted copies of a shared GGUF file (and small crafted ones): each must give an
// ember::Error naming the file, the byte offset and the key or tensor at fault, never a crash or a
// huge allocation.
#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "base/mapped_file.h"
#include "gguf_test_writer.h"
#include "model/gguf.h"
#include "test_paths.h"

namespace ember::model {
namespace {

using test::le;

class GgufErrors : public ::testing::Test {
 protected:
  void SetUp() override { original_ = read_file(test::model_dir("gguf/tiny-qwen2-q4_0.gguf")); }

  // The message of the error opening `bytes` gives, or "no error".
  std::string error_of(const std::string& bytes) const {
    const std::string path = dir_.write("corrupt.gguf", bytes);
    try {
      const GgufFile g(path);
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(path), std::string::npos) << m;
      return m;
    }
    return "no error";
  }
  // Position of the length prefix of the GGUF string `s` (a key or tensor name) in the file.
  size_t string_at(const std::string& s) const {
    const size_t p = original_.find(le(s.size(), 8) + s);
    EXPECT_NE(p, std::string::npos) << s;
    return p;
  }
  std::string with(size_t at, const std::string& bytes) const {
    std::string out = original_;
    out.replace(at, bytes.size(), bytes);
    return out;
  }
  // The position just after the GGUF string `s`.
  size_t after(const std::string& s) const { return string_at(s) + 8 + s.size(); }

  std::string original_;
  test::TempFolder dir_;
};

#define EXPECT_HAS(message, part) EXPECT_NE((message).find(part), std::string::npos) << (message)

TEST_F(GgufErrors, TheOriginalOpens) { EXPECT_EQ(error_of(original_), "no error"); }

TEST_F(GgufErrors, TruncatedAnywhere) {
  const size_t in_tokens = after("tokenizer.ggml.tokens") + 100;
  const size_t in_infos = after("blk.0.ffn_up.weight") + 2;  // inside its dimension count
  for (size_t len : {size_t{0}, size_t{3}, size_t{7}, size_t{15}, size_t{23}, size_t{40}, in_tokens, in_infos,
                     original_.size() - 1}) {
    SCOPED_TRACE(len);
    const std::string m = error_of(original_.substr(0, len));
    EXPECT_HAS(m, "offset");
    if (len == in_tokens) {
      EXPECT_HAS(m, "tokenizer.ggml.tokens");
    } else if (len == in_infos) {
      EXPECT_HAS(m, "blk.0.ffn_up.weight");
    } else if (len == original_.size() - 1) {
      EXPECT_HAS(m, "needs bytes");
    }
  }
}

TEST_F(GgufErrors, Header) {
  EXPECT_HAS(error_of(with(0, "GGML")), "not a GGUF file");
  EXPECT_HAS(error_of(with(4, le(1, 4))), "version 1");
  EXPECT_HAS(error_of(with(4, le(99, 4))), "unsupported GGUF version 99");
  EXPECT_HAS(error_of(with(4, le(3u << 24, 4))), "big-endian");
  EXPECT_HAS(error_of(with(8, le(1ull << 60, 8))), "tensor count");
  const std::string kv = error_of(with(16, le(1ull << 60, 8)));
  EXPECT_HAS(kv, "metadata count");
  EXPECT_HAS(kv, "offset 16");
}

TEST_F(GgufErrors, Metadata) {
  const std::string tokens = "tokenizer.ggml.tokens";
  const std::string count = error_of(with(after(tokens) + 8, le(1ull << 60, 8)));
  EXPECT_HAS(count, tokens);
  EXPECT_HAS(count, "cannot fit");
  EXPECT_HAS(count, "offset " + std::to_string(after(tokens) + 8));
  const std::string elem = error_of(with(after(tokens) + 4, le(77, 4)));
  EXPECT_HAS(elem, "unknown metadata value type 77");

  const std::string type = error_of(with(after("general.name"), le(99, 4)));
  EXPECT_HAS(type, "unknown metadata value type 99");
  EXPECT_HAS(type, "general.name");
  const std::string len = error_of(with(after("general.name") + 4, le(1ull << 50, 8)));
  EXPECT_HAS(len, "general.name");
  EXPECT_HAS(len, "runs past the end");
  const std::string b = error_of(with(after("tokenizer.ggml.add_bos_token") + 4, le(2, 1)));
  EXPECT_HAS(b, "tokenizer.ggml.add_bos_token");
  EXPECT_HAS(b, "boolean");
}

TEST_F(GgufErrors, TensorInfos) {
  const std::string name = "blk.0.attn_q.weight";  // Q4_0, 2 dimensions
  const size_t dims = after(name), type = dims + 4 + 16, offset = type + 4;
  auto expect = [&](const std::string& bytes, const char* what) {
    const std::string m = error_of(bytes);
    EXPECT_HAS(m, name);
    EXPECT_HAS(m, what);
    EXPECT_HAS(m, "offset");
  };
  expect(with(dims, le(5, 4)), "5 dimensions");
  expect(with(dims + 4, le(1ull << 62, 8)), "too large");
  expect(with(dims + 4, le(33, 8)), "not a multiple of the Q4_0 block size 32");
  expect(with(type, le(99, 4)), "unknown ggml type id 99");
  expect(with(offset, le(1, 8)), "not a multiple of the alignment");
  expect(with(offset, le(1ull << 40, 8)), "needs bytes");
  expect(with(offset, le(0, 8)), "overlapping");
  const std::string n = error_of(with(string_at(name), le(1ull << 40, 8)));
  EXPECT_HAS(n, "runs past the end");
}

TEST_F(GgufErrors, CraftedFiles) {
  {
    test::GgufWriter w;
    w.kv_u32("a.b", 1);
    w.kv_u32("a.b", 2);
    EXPECT_HAS(error_of(w.bytes()), "key \"a.b\" appears twice");
  }
  {
    test::GgufWriter w;
    w.kv_u32("general.alignment", 48);
    EXPECT_HAS(error_of(w.bytes()), "not a power of two");
  }
  {
    test::GgufWriter w;
    w.kv_string("general.alignment", "32");
    const std::string m = error_of(w.bytes());
    EXPECT_HAS(m, "general.alignment");
    EXPECT_HAS(m, "expected uint32");
  }
  {
    std::string nested;
    for (int i = 0; i < GgufFile::kMaxArrayDepth + 2; ++i) nested += test::GgufWriter::array_of(9, 1);
    nested += test::GgufWriter::array_of(0, 0);
    test::GgufWriter w;
    w.kv("deep", 9, nested);
    const std::string m = error_of(w.bytes());
    EXPECT_HAS(m, "deep");
    EXPECT_HAS(m, "nested deeper");
  }
  {
    // No elements, so no bytes, but a row of 2^62 F32 elements (2^64 bytes): found by fuzz_gguf.
    test::GgufWriter w;
    w.tensor("t", {uint64_t{1} << 62, 0}, 0, "");
    const std::string m = error_of(w.bytes());
    EXPECT_HAS(m, "tensor \"t\"");
    EXPECT_HAS(m, "too large");
  }
  {
    test::GgufWriter w;
    w.tensor("t", {4}, 0, std::string(16, '\0'));
    w.tensor("t", {4}, 0, std::string(16, '\0'));
    EXPECT_HAS(error_of(w.bytes()), "tensor \"t\" appears twice");
  }
}

}  // namespace
}  // namespace ember::model
