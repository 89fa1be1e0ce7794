// A terminal chat through Ember's C++ API: one user message per line on stdin, the reply streamed
// to stdout. Build it against an installed Ember (see examples/CMakeLists.txt):
//   cmake -S examples -B /tmp/ex -DCMAKE_PREFIX_PATH=<prefix> && cmake --build /tmp/ex
//   /tmp/ex/chat ../shared/models/chat-skills
#include <ember/ember.h>

#include <iostream>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: " << argv[0] << " MODEL_DIR [SYSTEM_PROMPT]\n";
    return 2;
  }
  try {
    ember::LoadOptions load;
    load.progress = [](const std::string& stage) { std::cerr << "loading: " << stage << '\n'; };
    ember::Model model(argv[1], load);

    ember::ChatOptions options;
    if (argc > 2) options.system = argv[2];
    options.enable_thinking = false;
    ember::Chat chat(model, options);

    ember::SamplingOptions sampling;
    sampling.max_tokens = 256;
    ember::StreamCallbacks stream;
    stream.on_content = [](std::string_view text) { std::cout << text << std::flush; };

    std::string line;
    while (std::getline(std::cin, line)) {
      if (line.empty()) continue;
      if (line == "/reset") {
        chat.reset();
        continue;
      }
      const ember::Reply reply = chat.say(line, sampling, stream);
      std::cout << '\n';
      std::cerr << "[" << reply.prompt_tokens << " prompt tokens, " << reply.prefilled_tokens << " computed, "
                << reply.tokens.size() << " generated, " << reply.finish_reason << "]\n";
    }
    return 0;
  } catch (const ember::Error& e) {
    std::cerr << "error: " << e.what() << '\n';
    return 1;
  }
}
