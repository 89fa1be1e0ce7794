// engine::Embedder against every embedding golden: each case alone and all of them in one call
// (as text and as token ids, and in batches that take several passes), within the golden's
// tolerance; the sentence-transformers folder rules and their errors.
#include <gtest/gtest.h>

#include "embedding_goldens.h"
#include "engine/pooling.h"
#include "error_of.h"
#include "model/load_tokenizer.h"

namespace ember::test {
namespace {

using nlohmann::json;

std::unique_ptr<model::Model> load_for_embeddings(const std::string& dir) {
  model::LoadOptions lo;
  lo.threads = 2;
  lo.lm_head = model::LoadOptions::LmHead::kNone;
  return model::Model::load(dir, lo);
}

TEST(Embedder, GoldenFolderSettingsAreRead) {
  const auto goldens = embedding_goldens();
  ASSERT_FALSE(goldens.empty());
  for (const auto& g : goldens) {
    const auto c = model::load_sentence_transformers(g.model(), g.j["dimension"].get<int64_t>());
    ASSERT_EQ(c.pooling.size(), 1u) << g.file;
    EXPECT_EQ(model::pooling_mode_name(c.pooling[0]), g.j["pooling"]["mode"].get<std::string>()) << g.file;
    EXPECT_EQ(c.include_prompt, g.j["pooling"]["include_prompt"].get<bool>()) << g.file;
    EXPECT_EQ(c.normalize, g.j["normalize"].get<bool>()) << g.file;
    EXPECT_EQ(c.output_dimension(), g.j["dimension"].get<int64_t>()) << g.file;
    EXPECT_EQ(json(c.prompts), g.j["prompts"]) << g.file;
  }
}

TEST(Embedder, EveryGoldenCaseAloneAndBatched) {
  for (const auto& g : embedding_goldens()) {
    const auto model = load_for_embeddings(g.model());
    const auto tok = model::load_tokenizer(g.model());
    engine::Embedder embedder(*model, tok);
    const json& cases = g.j["cases"];
    std::vector<engine::EmbeddingInput> texts, ids;
    int64_t total = 0;
    for (const auto& c : cases) {
      texts.push_back(case_input(c, false));
      ids.push_back(case_input(c, true));
      total += c["n_tokens"].get<int64_t>();
      EXPECT_EQ(embedder.tokens(texts.back()), c["ids"].get<std::vector<int32_t>>()) << g.file << " " << c["name"];
      expect_matches(g, c, embedder.embed({&texts.back(), 1}).vectors[0], "alone, text");
      expect_matches(g, c, embedder.embed({&ids.back(), 1}).vectors[0], "alone, ids");
    }
    const engine::Embeddings batch = embedder.embed(texts);
    EXPECT_EQ(batch.tokens, total) << g.file;
    // Texts and ids mixed, in reverse order.
    std::vector<engine::EmbeddingInput> mixed;
    for (size_t i = cases.size(); i-- > 0;) mixed.push_back(i % 2 ? texts[i] : ids[i]);
    const engine::Embeddings reversed = embedder.embed(mixed);
    for (size_t i = 0; i < cases.size(); ++i) {
      expect_matches(g, cases[i], batch.vectors[i], "batched");
      expect_matches(g, cases[i], reversed.vectors[cases.size() - 1 - i], "batched, mixed and reversed");
    }
    // The cosine matrix of the batch.
    for (size_t a = 0; a < cases.size(); ++a)
      for (size_t b = 0; b < cases.size(); ++b) {
        const std::vector<double> va(batch.vectors[a].begin(), batch.vectors[a].end());
        const std::vector<double> vb(batch.vectors[b].begin(), batch.vectors[b].end());
        EXPECT_NEAR(cosine(va, vb), g.j["cosine_similarity"][a][b].get<double>(), 1e-5) << g.file << " " << a << "," << b;
      }
  }
}

// A batch of more tokens than one pass takes runs as several passes, each vector as alone.
TEST(Embedder, LargeBatchTakesSeveralPasses) {
  const auto g = embedding_goldens().front();
  const auto model = load_for_embeddings(g.model());
  const auto tok = model::load_tokenizer(g.model());
  engine::Embedder embedder(*model, tok);
  const json& cases = g.j["cases"];
  std::vector<engine::EmbeddingInput> inputs;
  int64_t tokens = 0;
  while (tokens <= 2 * engine::Embedder::kBatchTokens)
    for (const auto& c : cases) {
      inputs.push_back(case_input(c, false));
      tokens += c["n_tokens"].get<int64_t>();
    }
  const engine::Embeddings out = embedder.embed(inputs);
  ASSERT_EQ(out.vectors.size(), inputs.size());
  EXPECT_EQ(out.tokens, tokens);
  for (size_t i = 0; i < inputs.size(); ++i) expect_matches(g, cases[i % cases.size()], out.vectors[i], "several passes");
}

// Longer inputs are cut to max_seq_length keeping the special tokens, as sentence-transformers does.
TEST(Embedder, LongInputsAreTruncatedKeepingSpecialTokens) {
  for (const auto& g : embedding_goldens()) {
    FolderCopy folder(g.model(), {"sentence_bert_config.json"});
    constexpr int64_t kMax = 8;
    folder.write("sentence_bert_config.json", {{"max_seq_length", kMax}, {"do_lower_case", false}});
    const auto model = load_for_embeddings(folder.str());
    const auto tok = model::load_tokenizer(folder.str());
    engine::Embedder embedder(*model, tok);
    EXPECT_EQ(embedder.max_tokens(), kMax);
    const size_t special = tok.with_special_tokens({}).size();
    for (const auto& c : g.j["cases"]) {
      engine::EmbeddingInput in = case_input(c, false);
      const auto full = c["ids"].get<std::vector<int32_t>>();
      std::vector<int32_t> plain = tok.encode(c["input"].get<std::string>(), false);
      if (plain.size() > kMax - special) plain.resize(kMax - special);
      const std::vector<int32_t> want = tok.with_special_tokens(plain);
      EXPECT_EQ(embedder.tokens(in), want) << c["name"];
      if (full.size() <= static_cast<size_t>(kMax)) {
        EXPECT_EQ(want, full) << c["name"];
      }
      // Ids are the exact tokens: too many is an error naming the limit.
      engine::EmbeddingInput as_ids = case_input(c, true);
      if (full.size() > static_cast<size_t>(kMax)) {
        const std::string e = error_of([&] { embedder.embed({&as_ids, 1}); });
        EXPECT_NE(e.find("max_seq_length"), std::string::npos) << e;
      }
    }
  }
}

// include_prompt false: the prompt's tokens (a BOS included, an appended EOS not) are left out of
// mean pooling; the last token is the last token either way.
TEST(Embedder, PromptLeftOutWhereIncludePromptIsFalse) {
  for (const auto& g : embedding_goldens()) {
    if (g.j["pooling"]["mode"] != "mean" && g.j["pooling"]["mode"] != "lasttoken") continue;  // what is computed below
    FolderCopy folder(g.model(), {"1_Pooling/config.json"});
    json pooling = json::parse(read_file(g.model() + "/1_Pooling/config.json"));
    pooling["include_prompt"] = false;
    folder.write("1_Pooling/config.json", pooling);
    const auto model = load_for_embeddings(folder.str());
    const auto tok = model::load_tokenizer(folder.str());
    engine::Embedder embedder(*model, tok);
    const int64_t H = model->config().hidden_size;
    for (const auto& c : g.j["cases"]) {
      if (c["prompt_name"].is_null()) continue;
      const std::string prompt = g.j["prompts"][c["prompt_name"].get<std::string>()].get<std::string>();
      std::vector<int32_t> alone = tok.encode(prompt, true);
      if (tok.is_special(alone.back())) alone.pop_back();
      const engine::EmbeddingInput in = case_input(c, false);
      int64_t prompt_tokens = 0;
      const auto ids = embedder.tokens(in, &prompt_tokens);
      EXPECT_EQ(prompt_tokens, static_cast<int64_t>(alone.size())) << g.file;
      EXPECT_TRUE(std::equal(alone.begin(), alone.end(), ids.begin())) << g.file << ": the prompt's tokens begin the input";
      // The mean over the text's own rows, from a forward pass of all of them.
      auto cache = model->make_cache(static_cast<int64_t>(ids.size()));
      model::KvSequence seq(*cache);
      std::vector<float> hidden(ids.size() * static_cast<size_t>(H));
      model::ForwardItem item{&seq, ids, nullptr, false};
      item.hidden = hidden.data();
      model->forward(std::span<model::ForwardItem>(&item, 1));
      const std::vector<float> got = embedder.embed({&in, 1}).vectors[0];
      std::vector<float> want(static_cast<size_t>(H));
      const bool mean = g.j["pooling"]["mode"] == "mean";
      for (int64_t h = 0; h < H; ++h) {
        double sum = 0;
        for (size_t t = mean ? alone.size() : ids.size() - 1; t < ids.size(); ++t) sum += hidden[t * H + h];
        want[h] = static_cast<float>(sum / static_cast<double>(mean ? ids.size() - alone.size() : 1));
      }
      if (g.j["normalize"].get<bool>()) engine::normalize(want);
      for (int64_t h = 0; h < H; ++h) EXPECT_NEAR(got[h], want[h], 1e-5) << g.file << " " << h;
      if (!mean) expect_matches(g, c, got, "include_prompt false, last token");
    }
  }
}

TEST(Embedder, CausalLmFolderIsRefusedNamingWhatIsMissing) {
  const std::string dir = model_dir("tiny-llama-f32");
  const auto model = load_for_embeddings(dir);
  const auto tok = model::load_tokenizer(dir);
  const std::string e = error_of([&] { engine::Embedder(*model, tok); });
  EXPECT_NE(e.find("modules.json"), std::string::npos) << e;
  EXPECT_NE(e.find("1_Pooling/config.json"), std::string::npos) << e;
}

TEST(Embedder, FolderErrorsAreNamed) {
  const auto g = embedding_goldens().front();
  const int64_t H = g.j["dimension"].get<int64_t>();
  auto error_with = [&](const std::string& rel, const json& j, std::vector<std::string> leave_out = {}) {
    leave_out.push_back(rel);
    FolderCopy folder(g.model(), leave_out);
    if (!j.is_null()) folder.write(rel, j);
    return error_of([&] { model::load_sentence_transformers(folder.str(), H); });
  };
  const json transformer = {{"idx", 0}, {"name", "0"}, {"path", ""}, {"type", "sentence_transformers.models.Transformer"}};
  const json pooling = {{"idx", 1}, {"name", "1"}, {"path", "1_Pooling"}, {"type", "sentence_transformers.models.Pooling"}};
  const json dense = {{"idx", 2}, {"name", "2"}, {"path", "2_Dense"}, {"type", "sentence_transformers.models.Dense"}};
  EXPECT_NE(error_with("modules.json", json::array({transformer})).find("no Pooling module"), std::string::npos);
  EXPECT_NE(error_with("modules.json", json::array({transformer, pooling, dense})).find("models.Dense"), std::string::npos);
  EXPECT_NE(error_with("1_Pooling/config.json", nullptr).find("1_Pooling/config.json: not found"), std::string::npos);
  const json whitening = {{"word_embedding_dimension", H}, {"pooling_mode_zipfian_whitening", true}};
  EXPECT_NE(error_with("1_Pooling/config.json", whitening).find("pooling_mode_zipfian_whitening"), std::string::npos);
  const json wrong_width = {{"word_embedding_dimension", H + 1}, {"pooling_mode_mean_tokens", true}};
  EXPECT_NE(error_with("1_Pooling/config.json", wrong_width).find("word_embedding_dimension"), std::string::npos);
  const json bad_default = {{"prompts", {{"query", "q: "}}}, {"default_prompt_name", "doc"}};
  EXPECT_NE(error_with("config_sentence_transformers.json", bad_default).find("default_prompt_name"), std::string::npos);
  // sentence-transformers 5's form: one "pooling_mode" name or a list of them.
  FolderCopy v5(g.model(), {"1_Pooling/config.json"});
  v5.write("1_Pooling/config.json", {{"embedding_dimension", H}, {"pooling_mode", json::array({"lasttoken", "cls"})}});
  const auto c = model::load_sentence_transformers(v5.str(), H);
  ASSERT_EQ(c.pooling.size(), 2u);
  EXPECT_EQ(c.pooling[0], model::PoolingMode::kCls);  // concatenated in sentence-transformers' order
  EXPECT_EQ(c.output_dimension(), 2 * H);
}

TEST(Embedder, UnknownPromptIsNamed) {
  const auto g = embedding_goldens().front();
  const auto model = load_for_embeddings(g.model());
  const auto tok = model::load_tokenizer(g.model());
  engine::Embedder embedder(*model, tok);
  engine::EmbeddingInput in;
  in.text = "a";
  in.prompt_name = "no-such-prompt";
  const std::string e = error_of([&] { embedder.embed({&in, 1}); });
  EXPECT_NE(e.find("prompt_name"), std::string::npos) << e;
  EXPECT_NE(e.find("no-such-prompt"), std::string::npos) << e;
}

// The pooling rules on hidden states small enough to check by hand.
TEST(Pooling, ModesOverRealTokens) {
  model::SentenceTransformersConfig c;
  c.dimension = 2;
  const float h[] = {1, -2, 3, 4, -5, 6};  // 3 tokens
  auto pooled = [&](model::PoolingMode m, bool include_prompt = true, int64_t prompt = 0) {
    c.pooling = {m};
    c.include_prompt = include_prompt;
    return engine::pool(c, h, 3, prompt);
  };
  using M = model::PoolingMode;
  EXPECT_EQ(pooled(M::kCls), (std::vector<float>{1, -2}));
  EXPECT_EQ(pooled(M::kLastToken), (std::vector<float>{-5, 6}));
  EXPECT_EQ(pooled(M::kMax), (std::vector<float>{3, 6}));
  EXPECT_EQ(pooled(M::kMean), (std::vector<float>{-1.0f / 3, 8.0f / 3}));
  EXPECT_EQ(pooled(M::kWeightedMean), (std::vector<float>{(1 + 6 - 15) / 6.0f, (-2 + 8 + 18) / 6.0f}));
  EXPECT_FLOAT_EQ(pooled(M::kMeanSqrtLen)[0], static_cast<float>(-1 / std::sqrt(3.0)));
  // include_prompt false leaves the prompt's tokens out (never the last one).
  EXPECT_EQ(pooled(M::kMean, false, 1), (std::vector<float>{-1, 5}));
  EXPECT_EQ(pooled(M::kMax, false, 5), (std::vector<float>{-5, 6}));
  EXPECT_EQ(pooled(M::kCls, false, 1), (std::vector<float>{1, -2}));
  c.normalize = true;
  const auto unit = pooled(M::kLastToken);
  EXPECT_FLOAT_EQ(unit[0] * unit[0] + unit[1] * unit[1], 1.0f);
  std::vector<float> v = {3, 4, 12};
  engine::truncate_dimensions(v, 2, true);
  EXPECT_EQ(v, (std::vector<float>{0.6f, 0.8f}));
}

// A model loaded for hidden states only has no logits to give.
TEST(Embedder, HiddenStatesOnlyModelRefusesLogits) {
  const auto model = load_for_embeddings(embedding_goldens().front().model());
  auto cache = model->make_cache(16);
  model::KvSequence seq(*cache);
  const std::vector<int32_t> ids = {1, 2, 3};
  const std::string e = error_of([&] { model->forward(seq, ids); });
  EXPECT_NE(e.find("lm_head"), std::string::npos) << e;
  EXPECT_EQ(seq.length(), 0);
}

}  // namespace
}  // namespace ember::test
