// Chat messages -> the prompt text a model was trained on. GGUF files carry a Jinja template
// (tokenizer.chat_template); instead of interpreting Jinja, the template is recognised by the
// markers it contains and one of a few built-in formats is rendered. Models without a template
// (or with one not recognised) get a plain "System: / User: / Assistant:" transcript.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/openai_protocol.h"

namespace shrike::server {

enum class ChatFormat {
  ChatMl,     // <|im_start|>role\n...<|im_end|> (Qwen, SmolLM, many fine-tunes)
  Llama3,     // <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>
  Llama2,     // [INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST] (Llama 2 chat)
  Mistral,    // [INST] ... [/INST] without a system block (system text joins the first user turn)
  Phi3,       // <|role|>\n...<|end|>\n
  Gemma,      // <start_of_turn>user\n...<end_of_turn>\n, assistant is "model", no system role
  DeepSeek2,  // User: ...\n\nAssistant: ...<｜end▁of▁sentence｜>
  DeepSeek3,  // <｜User｜>...<｜Assistant｜>...<｜end▁of▁sentence｜> (DeepSeek V3, R1)
  Plain,      // System: ...\nUser: ...\nAssistant:
};

// The format a Jinja chat template asks for, by its markers; Plain for "" or an unknown template.
ChatFormat detect_chat_format(std::string_view jinja_template);

// "chatml", "llama3", "llama2", "mistral", "phi3", "gemma", "deepseek2", "deepseek3", "plain"
const char* chat_format_name(ChatFormat f);
std::optional<ChatFormat> chat_format_from_name(std::string_view name);
// Every format, for option checking and listings.
std::vector<ChatFormat> all_chat_formats();

// The prompt for `messages`, ending where the assistant's reply starts. BOS is not written: the
// tokenizer adds it when the model wants one. Special-token markers are written as text; the
// server tokenizes the result with special-token parsing on, as llama.cpp and vLLM do.
std::string render_chat(ChatFormat f, const std::vector<ChatMessage>& messages);

}  // namespace shrike::server
