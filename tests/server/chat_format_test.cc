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
  for (ChatFormat f : all_chat_formats()) EXPECT_EQ(chat_format_from_name(chat_format_name(f)), f);
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

// Markers of the templates Phi-3, Gemma and DeepSeek ship (shortened).
constexpr const char* kPhi3Template =
    "{% for message in messages %}{% if message['role'] == 'user' %}{{'<|user|>' + '\n' + "
    "message['content'] + '<|end|>' + '\n' + '<|assistant|>' + '\n'}}{% endif %}{% endfor %}";
constexpr const char* kGemmaTemplate =
    "{% for message in messages %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim "
    "+ '<end_of_turn>\n' }}{% endfor %}{{'<start_of_turn>model\n'}}";
constexpr const char* kDeepSeek3Template =
    "{{'<｜User｜>' + message['content']}}{{'<｜Assistant"
    "｜>' + content + "
    "'<｜end▁of▁sentence｜>'}}";
constexpr const char* kDeepSeek2Template =
    "{% if message['role'] == 'user' %}{{ 'User: ' + message['content'] + '\n\n' }}{% elif "
    "message['role'] == 'assistant' %}{{ 'Assistant: ' + message['content'] + eos_token }}";

TEST(ChatFormat, DetectsPhi3GemmaAndDeepSeek) {
  EXPECT_EQ(detect_chat_format(kPhi3Template), ChatFormat::Phi3);
  EXPECT_EQ(detect_chat_format(kGemmaTemplate), ChatFormat::Gemma);
  EXPECT_EQ(detect_chat_format(kDeepSeek3Template), ChatFormat::DeepSeek3);
  EXPECT_EQ(detect_chat_format(kDeepSeek2Template), ChatFormat::DeepSeek2);
}

// Expected strings as llama.cpp's llm_chat_apply_template renders these families.
TEST(ChatFormat, Phi3) {
  EXPECT_EQ(render_chat(ChatFormat::Phi3, kConversation),
            "<|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\nHello.<|end|>\n"
            "<|user|>\n How are you? <|end|>\n<|assistant|>\n");
}

TEST(ChatFormat, GemmaPutsSystemIntoTheFirstUserTurn) {
  EXPECT_EQ(render_chat(ChatFormat::Gemma, kConversation),
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello."
            "<end_of_turn>\n<start_of_turn>user\nHow are you?<end_of_turn>\n"
            "<start_of_turn>model\n");
}

TEST(ChatFormat, DeepSeek) {
  const std::string eos = "<｜end▁of▁sentence｜>";
  const std::string user = "<｜User｜>";
  const std::string assistant = "<｜Assistant｜>";
  EXPECT_EQ(render_chat(ChatFormat::DeepSeek3, kConversation),
            "Be brief.\n\n" + user + "Hi" + assistant + "Hello." + eos + user + " How are you? " +
                assistant);
  EXPECT_EQ(render_chat(ChatFormat::DeepSeek2, kConversation),
            "Be brief.\n\nUser: Hi\n\nAssistant: Hello." + eos +
                "User:  How are you? \n\n"
                "Assistant:");
}

}  // namespace
}  // namespace shrike::server
