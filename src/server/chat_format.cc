#include "server/chat_format.h"

namespace shrike::server {
namespace {

// Jinja's `| trim` and Python's str.strip(), which the Llama templates apply to each message.
std::string_view trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

std::string render_chatml(const std::vector<ChatMessage>& messages) {
  std::string out;
  for (const auto& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  return out + "<|im_start|>assistant\n";
}

std::string render_llama3(const std::vector<ChatMessage>& messages) {
  std::string out;
  for (const auto& m : messages) {
    out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n";
    out += trim(m.content);
    out += "<|eot_id|>";
  }
  return out + "<|start_header_id|>assistant<|end_header_id|>\n\n";
}

// Llama 2 and Mistral: the system text goes into the first user turn (Llama 2 inside <<SYS>>).
// Every user turn after an assistant reply starts a new BOS-delimited exchange; the first BOS is
// the tokenizer's.
std::string render_inst(const std::vector<ChatMessage>& messages, bool llama2) {
  std::string system;
  size_t first = 0;
  if (!messages.empty() && messages[0].role == "system") {
    system = messages[0].content;
    first = 1;
  }
  std::string out;
  bool first_user = true;
  for (size_t i = first; i < messages.size(); ++i) {
    const auto& m = messages[i];
    if (m.role == "user") {
      std::string content = m.content;
      if (first_user && !system.empty()) {
        content =
            llama2 ? "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content : system + "\n\n" + content;
      }
      if (!out.empty()) out += llama2 ? "<s>" : "";
      out += "[INST] ";
      out += llama2 ? std::string(trim(content)) : content;
      out += " [/INST]";
      first_user = false;
    } else if (m.role == "assistant") {
      out += llama2 ? " " + std::string(trim(m.content)) + " </s>" : m.content + "</s>";
    } else {
      // A system message later in the conversation: neither template has a slot for it, so it
      // is passed on as an instruction of its own.
      if (!out.empty()) out += llama2 ? "<s>" : "";
      out += "[INST] " + m.content + " [/INST]";
    }
  }
  return out;
}

std::string render_plain(const std::vector<ChatMessage>& messages) {
  std::string out;
  for (const auto& m : messages) {
    const char* who = m.role == "system" ? "System" : m.role == "user" ? "User" : "Assistant";
    out += std::string(who) + ": " + m.content + "\n";
  }
  return out + "Assistant:";
}

}  // namespace

ChatFormat detect_chat_format(std::string_view t) {
  if (t.find("<|im_start|>") != std::string_view::npos) return ChatFormat::ChatMl;
  if (t.find("<|start_header_id|>") != std::string_view::npos) return ChatFormat::Llama3;
  if (t.find("[INST]") != std::string_view::npos)
    return t.find("<<SYS>>") != std::string_view::npos ? ChatFormat::Llama2 : ChatFormat::Mistral;
  return ChatFormat::Plain;
}

const char* chat_format_name(ChatFormat f) {
  switch (f) {
    case ChatFormat::ChatMl:
      return "chatml";
    case ChatFormat::Llama3:
      return "llama3";
    case ChatFormat::Llama2:
      return "llama2";
    case ChatFormat::Mistral:
      return "mistral";
    case ChatFormat::Plain:
      return "plain";
  }
  return "plain";
}

std::optional<ChatFormat> chat_format_from_name(std::string_view name) {
  for (ChatFormat f : {ChatFormat::ChatMl, ChatFormat::Llama3, ChatFormat::Llama2,
                       ChatFormat::Mistral, ChatFormat::Plain})
    if (name == chat_format_name(f)) return f;
  return std::nullopt;
}

std::string render_chat(ChatFormat f, const std::vector<ChatMessage>& messages) {
  switch (f) {
    case ChatFormat::ChatMl:
      return render_chatml(messages);
    case ChatFormat::Llama3:
      return render_llama3(messages);
    case ChatFormat::Llama2:
      return render_inst(messages, /*llama2=*/true);
    case ChatFormat::Mistral:
      return render_inst(messages, /*llama2=*/false);
    case ChatFormat::Plain:
      return render_plain(messages);
  }
  return render_plain(messages);
}

}  // namespace shrike::server
