// Chat templates: recognising the family from a GGUF Jinja template and rendering it.
#include "server/chat_format.h"

#include <gtest/gtest.h>

namespace shrike::server {
namespace {

const std::vector<ChatMessage> kConversation = {
    {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", " How are you? "}};

// Shortened versions of the templates these models ship.
constexpr const char* kQwenTemplate =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";
constexpr const char* kLlama3Template =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | "
    "trim + '<|eot_id|>' %}{{ content }}{% endfor %}";
constexpr const char* kLlama2Template =
    "{% if messages[0]['role'] == 'system' %}{% set system_message = '<<SYS>>\\n' + "
    "messages[0]['content'] + '\\n<</SYS>>\\n\\n' %}{% endif %}{{ bos_token + '[INST] ' + "
    "content.strip() + ' [/INST]' }}";
constexpr const char* kMistralTemplate =
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' "
    "+ message['content'] + ' [/INST]' }}{% else %}{{ message['content'] + eos_token}}{% endif "
    "%}{% endfor %}";

TEST(ChatFormat, DetectsFamilies) {
  EXPECT_EQ(detect_chat_format(kQwenTemplate), ChatFormat::ChatMl);
  EXPECT_EQ(detect_chat_format(kLlama3Template), ChatFormat::Llama3);
  EXPECT_EQ(detect_chat_format(kLlama2Template), ChatFormat::Llama2);
  EXPECT_EQ(detect_chat_format(kMistralTemplate), ChatFormat::Mistral);
  EXPECT_EQ(detect_chat_format(""), ChatFormat::Plain);
  EXPECT_EQ(detect_chat_format("{{ messages | something_else }}"), ChatFormat::Plain);
}

TEST(ChatFormat, Names) {
  for (ChatFormat f : {ChatFormat::ChatMl, ChatFormat::Llama3, ChatFormat::Llama2,
                       ChatFormat::Mistral, ChatFormat::Plain})
    EXPECT_EQ(chat_format_from_name(chat_format_name(f)), f);
  EXPECT_FALSE(chat_format_from_name("jinja").has_value());
}

TEST(ChatFormat, ChatMl) {
  EXPECT_EQ(render_chat(ChatFormat::ChatMl, kConversation),
            "<|im_start|>system\nBe brief.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n"
            "<|im_start|>user\n How are you? <|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatFormat, Llama3TrimsContent) {
  EXPECT_EQ(render_chat(ChatFormat::Llama3, kConversation),
            "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatFormat, Llama2PutsSystemInFirstTurn) {
  EXPECT_EQ(render_chat(ChatFormat::Llama2, kConversation),
            "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello. </s>"
            "<s>[INST] How are you? [/INST]");
}

TEST(ChatFormat, MistralJoinsSystemText) {
  EXPECT_EQ(render_chat(ChatFormat::Mistral, kConversation),
            "[INST] Be brief.\n\nHi [/INST]Hello.</s>[INST]  How are you?  [/INST]");
  EXPECT_EQ(render_chat(ChatFormat::Mistral, {{"user", "x"}}), "[INST] x [/INST]");
}

TEST(ChatFormat, PlainTranscript) {
  EXPECT_EQ(render_chat(ChatFormat::Plain, kConversation),
            "System: Be brief.\nUser: Hi\nAssistant: Hello.\nUser:  How are you? \nAssistant:");
  EXPECT_EQ(render_chat(ChatFormat::Plain, {{"user", "x"}}), "User: x\nAssistant:");
}

}  // namespace
}  // namespace shrike::server
