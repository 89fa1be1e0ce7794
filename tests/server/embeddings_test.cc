// /v1/embeddings: the request parser and response shaper without a socket, then an in-process
// `ember serve` of every embedding golden's model: each case alone and all in one request, as
// text and as token ids, float and base64 (decoded, equal), Matryoshka `dimensions` where the folder
// declares it, and the errors, each naming its field.
#include <gtest/gtest.h>

#include <bit>
#include <future>

#include "../engine/embedding_goldens.h"
#include "http_helpers.h"
#include "model/load_tokenizer.h"
#include "server/embeddings_api.h"

namespace ember::test {
namespace {

using nlohmann::json;

std::vector<float> decode_base64_floats(const std::string& s) {
  auto value = [](char c) -> uint32_t {
    if (c >= 'A' && c <= 'Z') return static_cast<uint32_t>(c - 'A');
    if (c >= 'a' && c <= 'z') return static_cast<uint32_t>(c - 'a' + 26);
    if (c >= '0' && c <= '9') return static_cast<uint32_t>(c - '0' + 52);
    return c == '+' ? 62u : 63u;
  };
  std::string bytes;
  for (size_t i = 0; i + 3 < s.size(); i += 4) {
    uint32_t chunk = 0;
    int pad = 0;
    for (size_t k = 0; k < 4; ++k) {
      pad += s[i + k] == '=';
      chunk = chunk << 6 | (s[i + k] == '=' ? 0u : value(s[i + k]));
    }
    for (int k = 0; k < 3 - pad; ++k) bytes += static_cast<char>((chunk >> (16 - 8 * k)) & 0xff);
  }
  std::vector<float> out(bytes.size() / 4);
  for (size_t i = 0; i < out.size(); ++i) {
    uint32_t u = 0;
    for (size_t b = 0; b < 4; ++b) u |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[i * 4 + b])) << (8 * b);
    out[i] = std::bit_cast<float>(u);
  }
  return out;
}

std::string param_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const server::ApiError& e) {
    EXPECT_EQ(e.status, 400) << e.what();
    EXPECT_NE(std::string(e.what()).find(e.param), std::string::npos) << e.what();  // the message names it
    return e.param;
  }
  return "(no error)";
}

TEST(EmbeddingsApi, RequestFieldsAreCheckedByName) {
  const server::EmbeddingWidths plain{64, false}, matryoshka{64, true};
  auto parse = [](const json& body, const server::EmbeddingWidths& w) {
    return server::parse_embeddings_request(body, w, 2048);
  };
  EXPECT_EQ(parse({{"input", "a"}}, plain).inputs.size(), 1u);
  EXPECT_EQ(parse({{"input", {"a", "b"}}}, plain).inputs.size(), 2u);
  EXPECT_EQ(parse({{"input", {1, 2, 3}}}, plain).inputs[0].ids, (std::vector<int32_t>{1, 2, 3}));
  const auto lists = parse({{"input", {{1, 2}, {3}}}, {"model", "m"}, {"user", "u"}, {"encoding_format", "base64"}}, plain);
  EXPECT_EQ(lists.inputs.size(), 2u);
  EXPECT_TRUE(lists.base64);
  EXPECT_EQ(lists.model, "m");
  EXPECT_EQ(parse({{"input", "a"}, {"dimensions", 64}}, plain).dimensions, 64);
  EXPECT_EQ(parse({{"input", "a"}, {"dimensions", 16}}, matryoshka).dimensions, 16);
  EXPECT_EQ(param_of([&] { parse({{"input", "a"}, {"dimensions", 16}}, plain); }), "dimensions");
  EXPECT_EQ(param_of([&] { parse({{"input", "a"}, {"dimensions", 65}}, matryoshka); }), "dimensions");
  EXPECT_EQ(param_of([&] { parse({{"input", "a"}, {"dimensions", 0}}, matryoshka); }), "dimensions");
  EXPECT_EQ(param_of([&] { parse({{"input", "a"}, {"encoding_format", "int8"}}, plain); }), "encoding_format");
  EXPECT_EQ(param_of([&] { parse({{"input", "a"}, {"temperature", 1}}, plain); }), "temperature");
  EXPECT_EQ(param_of([&] { parse(json::object(), plain); }), "input");
  EXPECT_EQ(param_of([&] { parse({{"input", {1, 99999}}}, plain); }), "input");
  EXPECT_EQ(param_of([&] { parse({{"input", {{"x", 1}}}}, plain); }), "input");
  EXPECT_EQ(param_of([&] { parse({{"input", json::array()}}, plain); }), "input");
  EXPECT_EQ(param_of([&] { parse({{"input", "a"}, {"model", 3}}, plain); }), "model");
}

TEST(EmbeddingsApi, Base64IsLittleEndianFloat32) {
  const std::vector<float> v = {1.0f, -2.5f, 3.14159f, 0.0f, -0.0f, 1e-30f, 7.0f};
  for (size_t n = 0; n <= v.size(); ++n) {  // every padding length
    const std::span<const float> part(v.data(), n);
    EXPECT_EQ(decode_base64_floats(server::base64_floats(part)), std::vector<float>(part.begin(), part.end()));
  }
  EXPECT_EQ(server::base64_floats(std::vector<float>{1.0f}), "AACAPw==");  // bytes 00 00 80 3f
}

class EmbeddingsServe : public ::testing::Test {
 protected:
  static std::unique_ptr<RunningServer> serve(model::Model& m, const tokenizer::Tokenizer& tok) {
    engine::SchedulerOptions so;
    so.max_parallel = 2;
    so.context = 512;
    return std::make_unique<RunningServer>(m, tok, so, server::ServerOptions{});
  }
  static json post(const RunningServer& s, const json& body, int expect_status = 200,
                   const char* path = "/v1/embeddings") {
    httplib::Client c = s.client();
    const auto r = c.Post(path, body.dump(), "application/json");
    EXPECT_TRUE(r) << body.dump();
    if (!r) return json();
    EXPECT_EQ(r->status, expect_status) << r->body;
    return json::parse(r->body);
  }
};

TEST_F(EmbeddingsServe, EveryGoldenCaseAloneAndInOneRequest) {
  for (const auto& g : embedding_goldens()) {
    model::LoadOptions lo;
    lo.threads = 2;
    lo.kv_dtype = model::kKvTypeDefault;  // as `ember serve` stores keys: the embeddings' pass keeps float32
    auto model = model::Model::load(g.model(), lo);
    const auto tok = model::load_tokenizer(g.model());
    const auto s = serve(*model, tok);
    const json& cases = g.j["cases"];
    const std::string name = g.j["model"].get<std::string>();
    json texts = json::array(), ids = json::array();
    int64_t tokens = 0;
    for (const auto& c : cases) {
      // The API has no prompt names: the input is the prompt and the text as sentence-transformers joins them.
      texts.push_back(c["input"]);
      ids.push_back(c["ids"]);
      tokens += c["n_tokens"].get<int64_t>();
      const json one = post(*s, {{"input", c["input"]}, {"model", name}});
      ASSERT_EQ(one["data"].size(), 1u) << one;
      expect_matches(g, c, one["data"][0]["embedding"].get<std::vector<float>>(), "served alone");
      EXPECT_EQ(one["usage"]["prompt_tokens"], c["n_tokens"]);
      const json as_ids = post(*s, {{"input", c["ids"]}});
      expect_matches(g, c, as_ids["data"][0]["embedding"].get<std::vector<float>>(), "served alone, ids");
    }
    for (const json& input : {texts, ids}) {
      const json all = post(*s, {{"input", input}, {"model", name}, {"encoding_format", "float"}});
      EXPECT_EQ(all["object"], "list");
      EXPECT_EQ(all["model"], name);
      EXPECT_EQ(all["usage"], json({{"prompt_tokens", tokens}, {"total_tokens", tokens}}));
      const json b64 = post(*s, {{"input", input}, {"encoding_format", "base64"}, {"dimensions", g.j["dimension"]}});
      ASSERT_EQ(all["data"].size(), cases.size()) << all;
      for (size_t i = 0; i < cases.size(); ++i) {
        EXPECT_EQ(all["data"][i]["object"], "embedding");
        EXPECT_EQ(all["data"][i]["index"], i);
        const auto v = all["data"][i]["embedding"].get<std::vector<float>>();
        expect_matches(g, cases[i], v, "served in one request");
        EXPECT_EQ(decode_base64_floats(b64["data"][i]["embedding"].get<std::string>()), v);
      }
    }
    // Errors name their field.
    const json unknown = post(*s, {{"input", "a"}, {"stream", true}}, 400);
    EXPECT_EQ(unknown["error"]["param"], "stream");
    const json dims = post(*s, {{"input", "a"}, {"dimensions", 8}}, 400);
    EXPECT_EQ(dims["error"]["param"], "dimensions");
    EXPECT_NE(dims["error"]["message"].get<std::string>().find("dimensions"), std::string::npos);
  }
}

// Embeddings requests on several connections at once, beside completions the scheduler is running:
// the passes take turns on the model, and every vector is still the golden's.
TEST_F(EmbeddingsServe, ConcurrentRequestsBesideGeneration) {
  for (const auto& g : embedding_goldens()) {
    auto model = model::Model::load(g.model(), {.threads = 2, .progress = {}});
    if (!model->has_logits()) continue;
    const auto tok = model::load_tokenizer(g.model());
    const auto s = serve(*model, tok);
    const json& cases = g.j["cases"];
    json texts = json::array();
    for (const auto& c : cases) texts.push_back(c["input"]);
    std::vector<std::future<json>> embeds, completions;
    for (int i = 0; i < 4; ++i) {
      completions.push_back(std::async(std::launch::async, [&] {
        return post(*s, {{"prompt", "Once upon a time"}, {"max_tokens", 24}}, 200, "/v1/completions");
      }));
      embeds.push_back(std::async(std::launch::async, [&] { return post(*s, {{"input", texts}}); }));
    }
    for (auto& f : embeds) {
      const json r = f.get();
      ASSERT_EQ(r["data"].size(), cases.size()) << r;
      for (size_t i = 0; i < cases.size(); ++i)
        expect_matches(g, cases[i], r["data"][i]["embedding"].get<std::vector<float>>(), "concurrent");
    }
    for (auto& f : completions) EXPECT_EQ(f.get()["object"], "text_completion");
  }
}

// A folder that declares Matryoshka training (truncate_dim) gives vectors of that width by default,
// and any `dimensions` up to the full width, re-normalised where the folder normalises.
TEST_F(EmbeddingsServe, DimensionsWhereTheFolderDeclaresTruncateDim) {
  for (const auto& g : embedding_goldens()) {
    FolderCopy folder(g.model(), {"config_sentence_transformers.json"});
    json st = json::parse(read_file(g.model() + "/config_sentence_transformers.json"));
    st["truncate_dim"] = 32;
    folder.write("config_sentence_transformers.json", st);
    auto model = model::Model::load(folder.str(), {.threads = 2, .progress = {}});
    const auto tok = model::load_tokenizer(folder.str());
    const auto s = serve(*model, tok);
    const json& c = g.j["cases"][0];
    const auto want = c["embedding"].get<std::vector<double>>();
    const bool normalized = g.j["normalize"].get<bool>();
    for (int64_t dims : {int64_t{0}, int64_t{16}, g.j["dimension"].get<int64_t>()}) {
      json body = {{"input", c["input"]}};
      if (dims > 0) body["dimensions"] = dims;
      const auto v = post(*s, body)["data"][0]["embedding"].get<std::vector<double>>();
      ASSERT_EQ(static_cast<int64_t>(v.size()), dims > 0 ? dims : 32);
      double kept = 0;
      for (size_t i = 0; i < v.size(); ++i) kept += want[i] * want[i];
      const double scale = normalized ? 1 / std::sqrt(kept) : 1.0;
      for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(v[i], want[i] * scale, 1e-4) << g.file << " " << dims << " " << i;
    }
    const json over = post(*s, {{"input", "a"}, {"dimensions", g.j["dimension"].get<int64_t>() + 1}}, 400);
    EXPECT_EQ(over["error"]["param"], "dimensions");
  }
}

// A causal LM folder has no pooling rule: a 400 naming what is missing, and chat still works.
TEST_F(EmbeddingsServe, ModelWithoutPoolingConfigIsA400NamingWhatIsMissing) {
  const std::string dir = model_dir("tiny-llama-f32");
  auto model = model::Model::load(dir, {.threads = 2, .progress = {}});
  const auto tok = model::load_tokenizer(dir);
  const auto s = serve(*model, tok);
  const json e = post(*s, {{"input", "a"}}, 400);
  const std::string message = e["error"]["message"].get<std::string>();
  EXPECT_NE(message.find("modules.json"), std::string::npos) << message;
  EXPECT_NE(message.find("1_Pooling/config.json"), std::string::npos) << message;
  httplib::Client c = s->client();
  const auto r = c.Post("/v1/completions", json({{"prompt", "Once"}, {"max_tokens", 2}}).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  const auto wrong = c.Get("/v1/embeddings");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 405);
}

}  // namespace
}  // namespace ember::test
