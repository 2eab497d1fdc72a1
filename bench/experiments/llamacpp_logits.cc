// llamacpp_logits: dump llama.cpp's logits for a fixed token sequence, as a reference to compare
// shrike's logits against. Standalone; it uses only the public llama.h API and is not part of the
// shrike build. Written against llama.cpp commit c392e5094deaf2d1a7c18683214f007fad3fe42b
// (2025-02-20: llama_model_load_from_file / llama_init_from_model / llama_vocab_n_tokens); older
// or newer llama.h versions may need small changes.
//
//   llamacpp_logits MODEL.gguf TOKENS.txt OUT.f32 [THREADS] [KV_TYPE]
//
// TOKENS.txt holds whitespace-separated token ids (no BOS is added: put it in the file if wanted).
// The model runs on the CPU. All tokens are decoded as one batch (positions 0..n-1, sequence 0)
// with logits requested at every position, and OUT.f32 receives [n_tokens][n_vocab] float32,
// little-endian, row-major, no header. n_tokens and n_vocab are printed to stderr.
// THREADS defaults to the number of hardware threads. KV_TYPE is f32 (default, so the KV cache adds
// no rounding) or f16 (llama.cpp's own default, as llama-cli/llama-server use it).
// llama.cpp's log is filtered to warnings and errors; set LLAMACPP_LOGITS_VERBOSE=1 to see all of
// it.
//
// Build against a llama.cpp CMake build with BUILD_SHARED_LIBS=ON (libllama.so and libggml*.so
// land in build/bin):
//   LLAMA=/work/llama.cpp
//   g++ -O2 -std=c++17 bench/experiments/llamacpp_logits.cc -I$LLAMA/include
//       -I$LLAMA/ggml/include -L$LLAMA/build/bin -lllama -lggml -lggml-base
//       -Wl,-rpath,$LLAMA/build/bin -o /tmp/llamacpp_logits
// (one command line; -lggml is needed because this file calls ggml-backend.h directly)
// ik_llama.cpp (for architectures mainline at that commit lacks, such as qwen3 and gemma3): the
// same command with -DIK_LLAMA and ik_llama.cpp's directories (its llama.h keeps the older
// llama_free_model / llama_n_ctx_train names and has no backend registry).
// Example (stories260K: BOS + "Once upon a time"; ids must be < n_vocab, 512 here):
//   echo "1 403 407 261 378 432" > /tmp/toks.txt
//   /tmp/llamacpp_logits /work/shared/reference/stories260K/stories260K.gguf /tmp/toks.txt
//       /tmp/logits.f32 1        (one command line; writes 6*512 floats)

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"

namespace {

bool g_verbose = false;
ggml_log_level g_last_level = GGML_LOG_LEVEL_INFO;

void log_filter(ggml_log_level level, const char* text, void* /*user*/) {
  // CONT lines continue the previous message and inherit its level.
  if (level != GGML_LOG_LEVEL_CONT) g_last_level = level;
  if (g_verbose || g_last_level == GGML_LOG_LEVEL_WARN || g_last_level == GGML_LOG_LEVEL_ERROR) {
    std::fputs(text, stderr);
  }
}

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "llamacpp_logits: error: %s\n", msg.c_str());
  std::exit(1);
}

void usage() {
  std::fprintf(stderr,
               "usage: llamacpp_logits MODEL.gguf TOKENS.txt OUT.f32 [THREADS] [KV_TYPE]\n"
               "  TOKENS.txt: whitespace-separated token ids, decoded as one batch\n"
               "  OUT.f32:    [n_tokens][n_vocab] float32 little-endian logits, every position\n"
               "  THREADS:    default: hardware threads; KV_TYPE: f32 (default) or f16\n");
}

bool file_readable(const char* path) {
  std::FILE* f = std::fopen(path, "rb");
  if (!f) return false;
  std::fclose(f);
  return true;
}

std::vector<long long> read_tokens(const char* path) {
  std::ifstream in(path);
  if (!in) die(std::string("cannot open token file '") + path + "': " + std::strerror(errno));
  std::vector<long long> ids;
  std::string word;
  while (in >> word) {
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(word.c_str(), &end, 10);
    if (errno != 0 || end == word.c_str() || *end != '\0') {
      die(std::string("token file '") + path + "': '" + word + "' (item " +
          std::to_string(ids.size()) + ") is not an integer token id");
    }
    ids.push_back(v);
  }
  if (ids.empty()) die(std::string("token file '") + path + "' holds no token ids");
  return ids;
}

int parse_threads(const char* s) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < 1 || v > 1024) {
    die(std::string("THREADS must be an integer in 1..1024, got '") + s + "'");
  }
  return static_cast<int>(v);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || argc > 6) {
    usage();
    return 1;
  }
  const char* model_path = argv[1];
  const char* tokens_path = argv[2];
  const char* out_path = argv[3];
  int n_threads = 0;
  if (argc >= 5) {
    n_threads = parse_threads(argv[4]);
  } else {
    n_threads = static_cast<int>(std::thread::hardware_concurrency());
    if (n_threads < 1) n_threads = 1;
  }
  ggml_type kv_type = GGML_TYPE_F32;
  if (argc >= 6) {
    const std::string kv = argv[5];
    if (kv == "f32") {
      kv_type = GGML_TYPE_F32;
    } else if (kv == "f16") {
      kv_type = GGML_TYPE_F16;
    } else {
      die("KV_TYPE must be f32 or f16, got '" + kv + "'");
    }
  }
  {
    const uint16_t probe = 1;
    unsigned char first = 0;
    std::memcpy(&first, &probe, 1);
    if (first != 1) die("this program writes host-order floats and needs a little-endian host");
  }

  const char* verbose_env = std::getenv("LLAMACPP_LOGITS_VERBOSE");
  g_verbose = verbose_env && *verbose_env && std::strcmp(verbose_env, "0") != 0;
  llama_log_set(log_filter, nullptr);

  if (!file_readable(model_path)) {
    die(std::string("cannot open model '") + model_path + "': " + std::strerror(errno));
  }
  const std::vector<long long> ids = read_tokens(tokens_path);

  // A build with GGML_BACKEND_DL=ON registers no backend until one is loaded.
#ifndef IK_LLAMA
  if (ggml_backend_dev_count() == 0) ggml_backend_load_all();
#endif
  llama_backend_init();

  llama_model_params mparams = llama_model_default_params();
  mparams.n_gpu_layers = 0;  // CPU only
  llama_model* model = llama_model_load_from_file(model_path, mparams);
  if (!model) die(std::string("llama.cpp failed to load model '") + model_path + "'");

  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int32_t n_vocab = llama_vocab_n_tokens(vocab);
  if (n_vocab <= 0) die("model reports n_vocab = " + std::to_string(n_vocab));
  const int32_t n_tokens = static_cast<int32_t>(ids.size());
  if (ids.size() > 1000000) die("too many tokens: " + std::to_string(ids.size()));
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= n_vocab) {
      die("token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
          " is out of range [0, " + std::to_string(n_vocab) + ")");
    }
  }
#ifdef IK_LLAMA
  const int32_t n_ctx_train = llama_n_ctx_train(model);
#else
  const int32_t n_ctx_train = llama_model_n_ctx_train(model);
#endif
  if (n_ctx_train > 0 && n_tokens > n_ctx_train) {
    std::fprintf(stderr,
                 "llamacpp_logits: warning: %d tokens exceed the model's training context %d\n",
                 n_tokens, n_ctx_train);
  }

  llama_context_params cparams = llama_context_default_params();
  const uint32_t n = static_cast<uint32_t>(n_tokens);
  cparams.n_ctx = n;     // llama.cpp pads this up to its KV-cache granularity
  cparams.n_batch = n;   // the whole sequence must fit one llama_decode call ...
  cparams.n_ubatch = n;  // ... and one physical batch, so it runs as one graph
  cparams.n_seq_max = 1;
  cparams.n_threads = n_threads;
  cparams.n_threads_batch = n_threads;
  cparams.type_k = kv_type;
  cparams.type_v = kv_type;
  cparams.flash_attn = false;  // (ik_llama.cpp: an f32 V cache needs it, so use KV_TYPE f16)
#ifndef IK_LLAMA
  cparams.no_perf = true;
#endif
  llama_context* ctx = llama_init_from_model(model, cparams);
  if (!ctx) die("llama.cpp failed to create a context for " + std::to_string(n_tokens) + " tokens");
  if (llama_n_batch(ctx) < n || llama_n_ubatch(ctx) < n) {
    die("context accepted n_batch=" + std::to_string(llama_n_batch(ctx)) +
        " n_ubatch=" + std::to_string(llama_n_ubatch(ctx)) + ", fewer than the " +
        std::to_string(n_tokens) + " tokens");
  }

  llama_batch batch = llama_batch_init(n_tokens, 0, 1);
  for (int32_t i = 0; i < n_tokens; ++i) {
    batch.token[i] = static_cast<llama_token>(ids[i]);
    batch.pos[i] = i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  batch.n_tokens = n_tokens;

  const int32_t rc = llama_decode(ctx, batch);
  if (rc != 0) {
    llama_batch_free(batch);
    die("llama_decode failed with code " + std::to_string(rc) +
        (rc == 1 ? " (no KV-cache slot for the batch)" : ""));
  }

  std::FILE* out = std::fopen(out_path, "wb");
  if (!out) die(std::string("cannot open output '") + out_path + "': " + std::strerror(errno));
  for (int32_t i = 0; i < n_tokens; ++i) {
    const float* row = llama_get_logits_ith(ctx, i);
    if (!row) {
      std::fclose(out);
      die("llama.cpp returned no logits for position " + std::to_string(i));
    }
    if (std::fwrite(row, sizeof(float), static_cast<size_t>(n_vocab), out) !=
        static_cast<size_t>(n_vocab)) {
      std::fclose(out);
      die(std::string("write to '") + out_path + "' failed: " + std::strerror(errno));
    }
  }
  if (std::fclose(out) != 0) {
    die(std::string("closing '") + out_path + "' failed: " + std::strerror(errno));
  }
  std::fprintf(stderr, "n_tokens %d\nn_vocab %d\n", n_tokens, n_vocab);

  llama_batch_free(batch);
  llama_free(ctx);
#ifdef IK_LLAMA
  llama_free_model(model);
#else
  llama_model_free(model);
#endif
  llama_backend_free();
  return 0;
}
