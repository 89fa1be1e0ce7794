// ember chat: an interactive multi-turn chat on one KV cache, a piped mode (one user message per
// line) and a one-shot mode (--messages FILE).
#include <editline/readline.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>

#include "apps/ember/commands.h"
#include "apps/ember/flag_range.h"
#include "apps/ember/generation_stats.h"
#include "apps/ember/grammar_options.h"
#include "apps/ember/jsonl.h"
#include "apps/ember/model_options.h"
#include "base/error.h"
#include "chat/messages.h"
#include "apps/ember/spec_options.h"
#include "engine/chat_session.h"
#include "tokenizer/tokenizer.h"

namespace ember::app {

namespace {

using nlohmann::ordered_json;

// Ctrl-C during a reply stops that reply only; the flag is the one state a signal handler may touch.
std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted.store(true); }

struct ChatOpts {
  ModelOptions model;
  SamplingOptions sampling;
  GrammarOptions grammar;
  SpecFlags spec;
  std::string system;
  bool think = false, no_think = false, show_think = false, json = false, verbose = false;
  int64_t think_budget = -1;
  std::string reasoning_effort;  // "": the template's default
  std::string messages_file, chat_template_file;
};

// A conversation file (--messages, /load): a JSON array of {role, content} messages, checked as the
// server checks a request's (the file and the message at fault named).
ordered_json read_messages(const std::string& path) {
  ordered_json m = read_json_file(path);
  if (!m.is_array()) fail(path, "expected a JSON array of {role, content} messages");
  if (m.empty()) return m;  // /load of an empty conversation
  try {
    return chat::check_messages(m);
  } catch (const chat::MessageError& e) {
    fail(path, e.what());
  }
}

class ChatApp {
 public:
  ChatApp(const ChatOpts& o, std::shared_ptr<const grammar::Grammar> grammar)
      : o_(o),
        m_(load_model(o.model, &o.sampling)),
        chat_(*m_.model, m_.tokenizer, o.model.dir, planned_context(*m_.model, o.model),
              read_chat_template(o.chat_template_file)) {
    chat_.require_template();  // before the first line: no line of a base model's chat could succeed
    options_.grammar = constraint_for(std::move(grammar), m_.tokenizer, o.grammar.source());
    options_.structured = !o.grammar.json_schema_file.empty();
    if (o.think) options_.enable_thinking = true;
    if (o.no_think) options_.enable_thinking = false;
    options_.think_budget = o.think_budget;
    // As the server's reasoning_effort: gpt-oss's template writes it into its system message.
    if (!o.reasoning_effort.empty()) options_.extra_variables["reasoning_effort"] = o.reasoning_effort;
    if (!m_.params.max_new_tokens && !o.sampling.to_the_end) m_.params.max_new_tokens = 1024;
    chat_.session().set_speculation(o.spec.resolve(*m_.model, m_.tokenizer, o.model));
    reset();
  }

  int one_shot(const ordered_json& messages) {
    engine::ChatCallbacks cb;
    if (!o_.json) cb.on_content = [](std::string_view t) { std::cout << t << std::flush; };
    const engine::ChatReply r = chat_.reply(messages, m_.params, options_, cb);
    if (o_.json) {
      std::cout << dump_line(ordered_json{{"content", r.content}, {"reasoning_content", r.reasoning_content}}) << '\n';
    } else {
      std::cout << '\n';
    }
    report(r);
    return 0;
  }

  // Returns 1 when a piped line failed (each one reported by its line number), 0 otherwise.
  int loop() {
    tty_ = ::isatty(STDIN_FILENO) != 0 && ::isatty(STDOUT_FILENO) != 0;
    if (tty_) {
      std::signal(SIGINT, on_sigint);
      std::cout << "Chatting with " << o_.model.dir
                << ". Commands: /reset, /system TEXT, /think on|off, /save FILE, /load FILE, /quit\n";
    }
    for (;;) {
      std::string line;
      if (tty_) {
        char* raw = ::readline("> ");
        if (raw == nullptr) break;
        line = raw;
        std::free(raw);
        if (!line.empty()) ::add_history(line.c_str());
      } else if (!std::getline(std::cin, line)) {
        break;
      }
      ++line_no_;
      if (line.empty()) continue;
      if (line[0] == '/') {
        if (!command(line)) break;
        continue;
      }
      messages_.push_back({{"role", "user"}, {"content", line}});
      turn();
    }
    return failed_lines_ ? 1 : 0;
  }

 private:
  void reset() {
    messages_ = ordered_json::array();
    if (!o_.system.empty()) messages_.push_back({{"role", "system"}, {"content", o_.system}});
  }

  // Returns false to quit.
  bool command(const std::string& line) {
    const size_t sp = line.find(' ');
    const std::string cmd = line.substr(0, sp);
    const std::string arg = sp == std::string::npos ? "" : line.substr(sp + 1);
    try {
      if (cmd == "/quit" || cmd == "/exit") return false;
      if (cmd == "/reset") {
        reset();
        chat_.session().reset();
      } else if (cmd == "/system") {
        o_.system = arg;
        if (!messages_.empty() && messages_[0]["role"] == "system") messages_.erase(0);
        if (!arg.empty()) messages_.insert(messages_.begin(), ordered_json{{"role", "system"}, {"content", arg}});
      } else if (cmd == "/think") {
        if (arg != "on" && arg != "off") throw Error("usage: /think on|off");
        options_.enable_thinking = arg == "on";
      } else if (cmd == "/save") {
        std::ofstream out(arg);
        if (!out) throw Error(arg + ": cannot write");
        out << messages_.dump(2) << '\n';
        out.close();  // a full disk may show only here, when the buffer is written
        if (!out) throw Error(arg + ": write failed (" + std::strerror(errno) + ")");
      } else if (cmd == "/load") {
        messages_ = read_messages(arg);
      } else {
        throw Error("unknown command " + cmd + " (/reset, /system TEXT, /think on|off, /save FILE, /load FILE, /quit)");
      }
    } catch (const std::exception& e) {
      line_failed(e.what());
    }
    return true;
  }

  void turn() {
    g_interrupted.store(false);
    engine::ChatCallbacks cb;
    bool in_thought = false;
    cb.on_reasoning = [&](std::string_view t) {
      if (!o_.show_think) return;
      if (!in_thought) std::cout << (tty_ ? "\033[2m" : "");
      in_thought = true;
      std::cout << t << std::flush;
    };
    cb.on_content = [&](std::string_view t) {
      if (in_thought) std::cout << (tty_ ? "\033[0m\n" : "\n");
      in_thought = false;
      std::cout << t << std::flush;
    };
    cb.cancelled = [] { return g_interrupted.load(); };
    try {
      const engine::ChatReply r = chat_.reply(messages_, m_.params, options_, cb);
      if (in_thought) std::cout << (tty_ ? "\033[0m" : "");
      std::cout << '\n' << std::flush;
      ordered_json msg{{"role", "assistant"}, {"content", r.content}};
      if (!r.reasoning_content.empty()) msg["reasoning_content"] = r.reasoning_content;
      messages_.push_back(std::move(msg));
      report(r);
      if (r.generation.finish == engine::FinishReason::kContext)
        std::cerr << "[the conversation filled the context of " << chat_.session().context()
                  << " tokens: the reply was cut; /reset starts a new conversation]\n";
    } catch (const Error& e) {
      messages_.erase(messages_.size() - 1);  // the turn failed: keep the conversation as it was
      line_failed(e.what());
    }
  }

  // The chat goes on after a failed line. On a terminal the user sees the error at once; piped
  // lines are named by number, and the exit status says that one failed (as embed's lines).
  void line_failed(const std::string& what) {
    if (tty_) {
      std::cerr << "error: " << what << '\n';
      return;
    }
    std::cerr << "ember: error: line " << line_no_ << ": " << what << '\n';
    ++failed_lines_;
  }

  void report(const engine::ChatReply& r) const {
    const auto& g = r.generation;
    if (o_.verbose)
      std::fprintf(stderr, "[prompt %lld tokens, prefilled %lld (%.1f tokens/s), generated %zu (decode %.1f tokens/s), %s%s%s]\n",
                   static_cast<long long>(g.prompt_tokens), static_cast<long long>(g.prefilled_tokens),
                   prefill_tokens_per_second(g), g.tokens.size(), decode_tokens_per_second(g),
                   engine::finish_reason_name(g.finish), r.thought_forced_closed ? ", thought cut by budget" : "",
                   speculation_note(g).c_str());
  }

  ChatOpts o_;
  LoadedModel m_;
  engine::ChatSession chat_;
  engine::ChatOptions options_;
  ordered_json messages_;
  bool tty_ = false;
  size_t line_no_ = 0;       // of the line being run (piped mode)
  size_t failed_lines_ = 0;  // piped lines that failed
};

}  // namespace

Run add_chat_command(CLI::App& app) {
  auto o = std::make_shared<ChatOpts>();
  CLI::App* cmd = app.add_subcommand("chat", "Chat with a model (interactive, piped lines, or one-shot --messages)");
  o->model.add_to(*cmd);
  o->sampling.add_to(*cmd);
  cmd->add_option("--system", o->system, "System prompt");
  auto* think = cmd->add_flag("--think", o->think, "Enable thinking (enable_thinking=true in the template)");
  cmd->add_flag("--no-think", o->no_think, "Disable thinking (enable_thinking=false)")->excludes(think);
  cmd->add_option("--think-budget", o->think_budget, "Force the thought closed after N thinking tokens (-1: no limit)")
      ->check(in_range<int64_t>(-1, int64_t{1} << 30));
  cmd->add_flag("--show-think", o->show_think, "Print the model's reasoning (dimmed on a terminal)");
  cmd->add_option("--reasoning-effort", o->reasoning_effort,
                  "How long the model reasons, for templates that read reasoning_effort (gpt-oss): low, medium, high")
      ->check(CLI::IsMember({"low", "medium", "high"}));
  add_chat_template_option(*cmd, o->chat_template_file);
  cmd->add_option("--messages", o->messages_file, "One-shot: reply to the conversation in FILE (JSON array)");
  cmd->add_flag("--json", o->json, "With --messages: print {\"content\", \"reasoning_content\"}");
  cmd->add_flag("-v,--verbose", o->verbose, "Print tokens prefilled and generated per turn to stderr");
  o->grammar.add_to(*cmd);
  o->spec.add_to(*cmd);
  return [o] {
    if (o->json && o->messages_file.empty()) throw Error("--json needs --messages FILE");
    if (o->json) o->model.quiet = true;
    auto grammar = o->grammar.compile();  // before the model loads: fail fast
    if (o->messages_file.empty()) return ChatApp(*o, std::move(grammar)).loop();
    const ordered_json messages = read_messages(o->messages_file);
    if (messages.empty()) fail(o->messages_file, "holds no messages: there is nothing to reply to");
    return ChatApp(*o, std::move(grammar)).one_shot(messages);
  };
}

}  // namespace ember::app
