#include "api/model_impl.h"
#include "engine/scheduler.h"

namespace ember {

struct Service::Impl {
  Impl(Model::Impl& m, const ServiceOptions& o, const Model::Impl* draft)
      : model(m),
        scheduler(*m.model, m.tokenizer,
                  engine::SchedulerOptions{.max_parallel = o.max_parallel,
                                           .context = m.planned_context(o.max_parallel, engine::Scheduler::kPoolFactor),
                                           .max_queue = o.max_queue,
                                           .spec = speculation_of(m, draft, o.speculate)}) {}
  Request submit(engine::GenerationRequest g) {
    Request r;
    try {
      r.stream_ = scheduler.submit(std::move(g));
    } catch (const engine::QueueFull& e) {
      throw Error(std::string("the service is busy: ") + e.what());
    }
    return r;
  }
  Model::Impl& model;
  engine::Scheduler scheduler;
};

Service::Service(Model& model, ServiceOptions options)
    : impl_(std::make_unique<Impl>(*model.impl_, options, options.draft ? options.draft->impl_.get() : nullptr)) {}
Service::~Service() = default;

Service::Request Service::chat(const std::vector<Message>& conversation, const SamplingOptions& sampling,
                               std::optional<bool> enable_thinking) {
  engine::ChatOptions o;
  o.enable_thinking = enable_thinking;
  const sampling::SamplingParams params = impl_->model.params(sampling);
  return impl_->submit(engine::chat_request(impl_->model.prompts.build(to_json(conversation), o), params));
}

Service::Request Service::complete(std::string_view prompt, const SamplingOptions& sampling) {
  engine::GenerationRequest g;
  g.prompt = impl_->model.tokenizer.encode(prompt, /*add_special_tokens=*/true);
  g.params = impl_->model.params(sampling);
  return impl_->submit(std::move(g));
}

bool Service::Request::next(Update& update, std::chrono::milliseconds timeout) {
  auto* s = static_cast<engine::RequestStream*>(stream_.get());
  engine::StreamUpdate u;
  if (s == nullptr || !s->next(u, timeout)) return false;
  update.content = std::move(u.content);
  update.reasoning = std::move(u.reasoning);
  update.finished = u.finished;
  update.finish_reason = u.finished ? engine::finish_reason_name(u.finish) : "";
  update.error = std::move(u.error);
  return true;
}

void Service::Request::cancel() {
  if (auto* s = static_cast<engine::RequestStream*>(stream_.get())) s->cancel();
}

}  // namespace ember
