#include "api/model_impl.h"
#include "engine/chat_session.h"

namespace ember {

struct Chat::Impl {
  Impl(Model::Impl& m, ChatOptions o, const Model::Impl* draft)
      : model(m), options(std::move(o)), session(*m.model, m.tokenizer, m.dir, m.context) {
    if (options.speculate || draft) session.session().set_speculation(speculation_of(m, draft, options.speculate));
    reset();
  }
  void reset() {
    history.clear();
    if (!options.system.empty()) history.push_back({"system", options.system});
  }
  Reply reply(const std::vector<Message>& conversation, const SamplingOptions& sampling, const StreamCallbacks& cb) {
    engine::ChatOptions o;
    o.enable_thinking = options.enable_thinking;
    o.think_budget = options.think_budget;
    engine::ChatCallbacks ccb{cb.on_content, cb.on_reasoning, cb.cancelled};
    return to_reply(session.reply(to_json(conversation), model.params(sampling), o, ccb).generation);
  }

  Model::Impl& model;
  ChatOptions options;
  engine::ChatSession session;
  std::vector<Message> history;
};

Chat::Chat(Model& model, ChatOptions options) {
  const Model::Impl* draft = options.draft ? options.draft->impl_.get() : nullptr;
  impl_ = std::make_unique<Impl>(*model.impl_, std::move(options), draft);
}
Chat::~Chat() = default;

Reply Chat::say(std::string_view user_message, const SamplingOptions& sampling, const StreamCallbacks& callbacks) {
  std::vector<Message>& h = impl_->history;
  h.push_back({"user", std::string(user_message)});
  try {
    Reply r = impl_->reply(h, sampling, callbacks);
    h.push_back({"assistant", r.content});
    return r;
  } catch (...) {
    h.pop_back();  // nothing lost: the conversation is as before the failed turn
    throw;
  }
}

Reply Chat::reply(const std::vector<Message>& conversation, const SamplingOptions& sampling,
                  const StreamCallbacks& callbacks) {
  return impl_->reply(conversation, sampling, callbacks);
}

const std::vector<Message>& Chat::history() const { return impl_->history; }
void Chat::reset() { impl_->reset(); }

}  // namespace ember
