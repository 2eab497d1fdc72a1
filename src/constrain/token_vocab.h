// The vocabulary as constraints see it: each token's exact output bytes, which tokens may appear
// in constrained text, the end-of-sequence token, and a trie over the bytes so that a token mask
// for one automaton state is one pass over the trie, skipping every subtree whose prefix the
// automaton already rejects.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace shrike::tokenizer {
class Tokenizer;
}

namespace shrike::constrain {

class TokenVocab {
 public:
  // token_bytes[i]: what token i appends to the output text. usable[i]: whether it may appear in
  // constrained text at all (tokens with no bytes never may: they make no progress). eos: the
  // end-of-sequence id (-1: none), allowed exactly where the automaton accepts.
  // strip_leading_space: the detokeniser drops a leading ' ' from the first output token (the
  // SentencePiece dummy prefix), so the first token's bytes are matched without it.
  TokenVocab(std::vector<std::string> token_bytes, std::vector<uint8_t> usable, int32_t eos,
             bool strip_leading_space);

  // From a tokenizer: bytes = token_to_piece. Control, unknown and unused tokens are not usable
  // (EOS is handled apart), nor are byte-fallback tokens (<0xNN>) whose byte a normal token
  // also spells: SentencePiece never produces those, so a model has not seen them there.
  // The encoder is a copy of the tokenizer, owned by the vocabulary.
  static std::shared_ptr<const TokenVocab> from_tokenizer(const tokenizer::Tokenizer& tok);

  // The tokenizer's own tokenization of a text (no BOS / EOS): how jump-forward emits text the
  // constraint forces, so that a choice costs the tokens it is known to cost. Without an encoder
  // (vocabularies built by hand) forced text is left to the sampler token by token.
  using Encoder = std::function<std::vector<int32_t>(std::string_view)>;
  void set_encoder(Encoder e) { encoder_ = std::move(e); }
  bool has_encoder() const { return bool(encoder_); }
  std::vector<int32_t> encode(std::string_view text) const {
    return encoder_ ? encoder_(text) : std::vector<int32_t>{};
  }

  int32_t size() const { return int32_t(bytes_.size()); }
  int32_t eos() const { return eos_; }
  bool strip_leading_space() const { return strip_leading_space_; }
  const std::string& bytes(int32_t id) const { return bytes_[size_t(id)]; }
  bool usable(int32_t id) const { return usable_[size_t(id)] != 0; }

  // The trie in preorder: node 0 is the root; node i's subtree is [i, skip); tokens_[tok_begin,
  // tok_end) are the usable tokens whose bytes end at node i.
  struct Node {
    int32_t skip = 0;
    int32_t tok_begin = 0, tok_end = 0;
    uint16_t depth = 0;
    uint8_t byte = 0;
  };
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int32_t>& node_tokens() const { return tokens_; }
  int32_t max_depth() const { return max_depth_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<uint8_t> usable_;
  int32_t eos_ = -1;
  bool strip_leading_space_ = false;
  std::vector<Node> nodes_;
  std::vector<int32_t> tokens_;
  int32_t max_depth_ = 0;
  Encoder encoder_;
};

}  // namespace shrike::constrain
