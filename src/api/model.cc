#include "api/model_impl.h"

#include "kernels/quant_mix.h"
#include "model/load_tokenizer.h"
#include "sampling/overrides.h"

namespace ember {

Model::Impl::Impl(const std::string& path, const LoadOptions& o)
    : dir(path),
      model(model::Model::load(path, model::LoadOptions{.threads = o.threads,
                                                        .progress = o.progress,
                                                        .quantize = kernels::parse_quantization(o.quantize),
                                                        .kv_dtype = o.kv_dtype.empty() ? model::kKvTypeDefault
                                                                                       : model::parse_kv_dtype(o.kv_dtype),
                                                        .bf16_activations = o.bf16_activations})),
      tokenizer(model::load_tokenizer(path)),
      prompts(tokenizer, path),
      defaults(engine::default_params(path, model->config())),
      memory{.context = o.context, .sequences = 1, .pool_factor = 1, .budget_bytes = o.kv_memory_bytes},
      context(planned_context(1, 1)) {}

int64_t Model::Impl::planned_context(int64_t sequences, int64_t pool_factor) const {
  engine::MemoryRequest r = memory;
  r.sequences = sequences;
  r.pool_factor = pool_factor;
  return engine::plan_memory(*model, r).context;
}

sampling::SamplingParams Model::Impl::params(const SamplingOptions& o) const { return sampling::apply(defaults, o); }

nlohmann::ordered_json to_json(const std::vector<Message>& messages) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const Message& m : messages) a.push_back({{"role", m.role}, {"content", m.content}});
  return a;
}

engine::SpecOptions speculation_of(const Model::Impl& target, const Model::Impl* draft, bool speculate) {
  if (!draft) return speculate ? prompt_lookup() : engine::SpecOptions{};
  // Not owned: the caller keeps the draft alive as long as the Chat or Service.
  return engine::draft_speculation(std::shared_ptr<model::Model>(std::shared_ptr<model::Model>(), draft->model.get()),
                                   draft->tokenizer, *target.model, target.tokenizer);
}

Reply to_reply(engine::GenerationResult r) {
  Reply out;
  out.content = std::move(r.text);
  out.reasoning = std::move(r.reasoning);
  out.tokens = std::move(r.tokens);
  out.finish_reason = engine::finish_reason_name(r.finish);
  out.prompt_tokens = r.prompt_tokens;
  out.prefilled_tokens = r.prefilled_tokens;
  return out;
}

namespace {
engine::GenerationCallbacks to_engine(const StreamCallbacks& cb) {
  engine::GenerationCallbacks g;
  g.on_text = cb.on_content;
  g.on_reasoning = cb.on_reasoning;
  g.cancelled = cb.cancelled;
  return g;
}
}  // namespace

Model::Model(const std::string& path, const LoadOptions& options) : impl_(std::make_unique<Impl>(path, options)) {}
Model::~Model() = default;
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;

std::vector<int32_t> Model::tokenize(std::string_view text, bool add_special_tokens) const {
  return impl_->tokenizer.encode(text, add_special_tokens);
}

std::string Model::detokenize(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return impl_->tokenizer.decode(ids, skip_special_tokens);
}

std::string Model::render(const std::vector<Message>& messages, bool add_generation_prompt,
                          std::optional<bool> enable_thinking) const {
  engine::ChatOptions o;
  o.enable_thinking = enable_thinking;
  return impl_->prompts.render(to_json(messages), o, add_generation_prompt);
}

Reply Model::generate(std::string_view prompt, const SamplingOptions& sampling, const StreamCallbacks& callbacks) {
  Impl& m = *impl_;
  const sampling::SamplingParams params = m.params(sampling);
  if (!m.session) m.session = std::make_unique<engine::Session>(*m.model, m.tokenizer, m.context);
  return to_reply(m.session->generate(m.tokenizer.encode(prompt, true), params, to_engine(callbacks)));
}

std::string Model::architecture() const { return impl_->model->config().model_type; }
int64_t Model::context() const { return impl_->context; }

}  // namespace ember
