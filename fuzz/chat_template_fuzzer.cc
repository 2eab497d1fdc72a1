// The chat-template renderer: a Jinja template recognised by its markers, and every built-in
// format rendering messages whose roles and contents come from the input.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "server/chat_format.h"
#include "server/openai_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shrike;
  auto [tmpl, rest] = fuzz::split_once(fuzz::as_text(data, size));
  (void)server::chat_format_name(server::detect_chat_format(tmpl));
  (void)server::chat_format_from_name(tmpl);
  // Messages: lines "role:content" after the separator.
  static const char* kRoles[] = {"system", "user", "assistant", "developer"};
  std::vector<server::ChatMessage> messages;
  size_t start = 0;
  while (start <= rest.size() && rest.data() != nullptr) {
    size_t end = rest.find('\n', start);
    if (end == std::string_view::npos) end = rest.size();
    std::string_view line = rest.substr(start, end - start);
    server::ChatMessage m;
    m.role = kRoles[line.empty() ? 0 : uint8_t(line[0]) % 4];
    m.content = std::string(line.empty() ? line : line.substr(1));
    messages.push_back(std::move(m));
    start = end + 1;
  }
  for (server::ChatFormat f : server::all_chat_formats()) (void)server::render_chat(f, messages);
  return 0;
}
