// ember serve: the OpenAI-compatible HTTP service and web chat page.
#include <pthread.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <thread>

#include "apps/ember/commands.h"
#include "apps/ember/flag_range.h"
#include "apps/ember/model_options.h"
#include "apps/ember/spec_options.h"
#include "base/error.h"
#include "server/server.h"

namespace ember::app {

namespace {

struct ServeOpts {
  ModelOptions model;
  server::ServerOptions server;
  engine::SchedulerOptions scheduler;
  SpecFlags spec;
  std::string chat_template_file;
};

int serve(ServeOpts& o) {
  // SIGINT/SIGTERM are taken by one waiting thread (blocked everywhere else, so every thread created
  // from here inherits the mask); SIGPIPE from a vanished client must not kill the process.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  // An embedding folder may have no lm_head: it then serves /v1/embeddings only.
  o.model.lm_head = model::LoadOptions::LmHead::kIfStored;
  o.server.chat_template = read_chat_template(o.chat_template_file);
  LoadedModel m = load_model(o.model);
  // The server keeps as many blocks again for reusing finished conversations' prefixes.
  o.scheduler.context = planned_context(*m.model, o.model, o.scheduler.max_parallel, engine::Scheduler::kPoolFactor);
  o.scheduler.spec = o.spec.resolve(*m.model, m.tokenizer, o.model);
  server::Server srv(*m.model, m.tokenizer, o.scheduler, o.server);
  const int port = srv.bind();
  if (!o.model.quiet)
    std::fprintf(stderr, "ember serve: http://%s:%d/ (OpenAI API under /v1, %lld parallel sequences, context %lld%s)\n",
                 o.server.host.c_str(), port, static_cast<long long>(o.scheduler.max_parallel),
                 static_cast<long long>(srv.scheduler().context()),
                 srv.scheduler().speculation().mode == engine::SpecMode::kOff
                     ? ""
                     : (std::string(", speculation ") + engine::spec_mode_name(srv.scheduler().speculation().mode)).c_str());

  std::atomic<bool> exiting{false};
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    if (exiting.load()) return;  // woken by the exit path below
    if (!o.model.quiet) std::fprintf(stderr, "ember serve: signal %d, shutting down\n", sig);
    srv.stop();
  });
  srv.run();
  // run() also returns if listening failed; wake the waiter so that it can be joined.
  exiting.store(true);
  pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
  srv.stop();
  return 0;
}

}  // namespace

Run add_serve_command(CLI::App& app) {
  auto o = std::make_shared<ServeOpts>();
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP API and web chat page");
  o->model.add_to(*cmd);
  o->spec.add_to(*cmd);
  cmd->add_option("--host", o->server.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", o->server.port, "Port to listen on (0: any free port)")
      ->capture_default_str()
      ->check(in_range(0, 65535));
  cmd->add_option("--parallel", o->scheduler.max_parallel, "Sequences decoded together")
      ->capture_default_str()
      ->check(in_range<int64_t>(1, 1024));
  cmd->add_option("--queue", o->scheduler.max_queue, "Requests that may wait; more get 429")
      ->capture_default_str()
      ->check(in_range<int64_t>(1, 1 << 20));
  cmd->add_option("--prefill-chunk", o->scheduler.prefill_chunk, "Prompt tokens computed per step")
      ->capture_default_str()
      ->check(in_range<int64_t>(1, 1 << 20));
  cmd->add_option("--api-key", o->server.api_key, "Require \"Authorization: Bearer KEY\" on /v1/*");
  cmd->add_option("--max-body", o->server.max_body_bytes, "Largest request body in bytes")
      ->capture_default_str()
      ->check(in_range<size_t>(1024, size_t{1} << 30));
  cmd->add_option("--timeout", o->server.request_timeout_s, "Seconds a request may run")
      ->capture_default_str()
      ->check(in_range(1.0, 604800.0));
  cmd->add_option("--model-name", o->server.model_name, "Model id reported by /v1/models (default: folder name)");
  cmd->add_option("--cors", o->server.cors_origins,
                  "Origins whose pages may call the API from a browser: ORIGIN[,ORIGIN...] or * (default: none)")
      ->delimiter(',');
  add_chat_template_option(*cmd, o->chat_template_file);
  return [o] { return serve(*o); };
}

}  // namespace ember::app
