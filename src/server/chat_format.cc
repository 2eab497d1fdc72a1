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

std::string render_phi3(const std::vector<ChatMessage>& messages) {
  std::string out;
  for (const auto& m : messages) out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
  return out + "<|assistant|>\n";
}

// Gemma has no system role: system text opens the first user turn (as llama.cpp renders it).
std::string render_gemma(const std::vector<ChatMessage>& messages) {
  std::string out, system;
  for (const auto& m : messages) {
    if (m.role == "system") {
      system += trim(m.content);
      continue;
    }
    const std::string role = m.role == "assistant" ? "model" : m.role;
    out += "<start_of_turn>" + role + "\n";
    if (!system.empty() && role != "model") {
      out += system + "\n\n";
      system.clear();
    }
    out += std::string(trim(m.content)) + "<end_of_turn>\n";
  }
  return out + "<start_of_turn>model\n";
}

constexpr const char* kDeepSeekEos = "<｜end▁of▁sentence｜>";
constexpr const char* kDeepSeekUser = "<｜User｜>";
constexpr const char* kDeepSeekAssistant = "<｜Assistant｜>";

std::string render_deepseek(const std::vector<ChatMessage>& messages, bool v3) {
  std::string out;
  for (const auto& m : messages) {
    if (m.role == "system") {
      out += m.content + "\n\n";
    } else if (m.role == "user") {
      out += v3 ? kDeepSeekUser + m.content : "User: " + m.content + "\n\n";
    } else {
      out += (v3 ? kDeepSeekAssistant : "Assistant: ") + m.content + kDeepSeekEos;
    }
  }
  return out + (v3 ? kDeepSeekAssistant : "Assistant:");
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
  auto has = [&](std::string_view marker) { return t.find(marker) != std::string_view::npos; };
  if (has("<|im_start|>")) return ChatFormat::ChatMl;
  if (has("<|start_header_id|>")) return ChatFormat::Llama3;
  if (has("<|assistant|>") && has("<|end|>")) return ChatFormat::Phi3;
  if (has("<start_of_turn>")) return ChatFormat::Gemma;
  if (has(kDeepSeekAssistant) && has(kDeepSeekUser)) return ChatFormat::DeepSeek3;
  if (has("'Assistant: ' + message['content'] + eos_token")) return ChatFormat::DeepSeek2;
  if (has("[INST]")) return has("<<SYS>>") ? ChatFormat::Llama2 : ChatFormat::Mistral;
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
    case ChatFormat::Phi3:
      return "phi3";
    case ChatFormat::Gemma:
      return "gemma";
    case ChatFormat::DeepSeek2:
      return "deepseek2";
    case ChatFormat::DeepSeek3:
      return "deepseek3";
    case ChatFormat::Plain:
      return "plain";
  }
  return "plain";
}

std::vector<ChatFormat> all_chat_formats() {
  return {ChatFormat::ChatMl,    ChatFormat::Llama3,    ChatFormat::Llama2,
          ChatFormat::Mistral,   ChatFormat::Phi3,      ChatFormat::Gemma,
          ChatFormat::DeepSeek2, ChatFormat::DeepSeek3, ChatFormat::Plain};
}

std::optional<ChatFormat> chat_format_from_name(std::string_view name) {
  for (ChatFormat f : all_chat_formats())
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
    case ChatFormat::Phi3:
      return render_phi3(messages);
    case ChatFormat::Gemma:
      return render_gemma(messages);
    case ChatFormat::DeepSeek2:
      return render_deepseek(messages, /*v3=*/false);
    case ChatFormat::DeepSeek3:
      return render_deepseek(messages, /*v3=*/true);
    case ChatFormat::Plain:
      return render_plain(messages);
  }
  return render_plain(messages);
}

}  // namespace shrike::server
