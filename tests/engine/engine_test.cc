// The engine end to end on real forward passes: batch invariance under continuous batching,
// prefix caching, preemption, cancellation, deadlines, the bounded queue, static batching, stop
// strings, and that no KV block is left in use after any of it.
#include "engine/engine.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <thread>

#include "core/sanitizers.h"
#include "engine/loaded_model.h"
#include "engine/stream_output.h"
#include "gguf/gguf.h"
#include "kernels/matmul.h"
#include "model/synth.h"
#include "shared_data.h"
#include "tokenizer/vocab.h"

namespace shrike::engine {
namespace {

using namespace std::chrono_literals;

using test_util::load_gguf;
using test_util::Loaded;

// A small model with a 1024-token context (prompts up to 500 tokens plus output).
Loaded make_synth(DType type) {
  return test_util::load_synth(test_util::tiny_synth_options(type, 5),
                               "engine_test_" + std::string(dtype_name(type)));
}

const Loaded& synth_f32() {
  static const Loaded l = make_synth(DType::F32);
  return l;
}

using test_util::collect;
using test_util::Output;

GenerationRequest greedy_request(std::vector<int32_t> prompt, int64_t max_tokens) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  return r;
}

EngineConfig config(int64_t max_batch_tokens = 256, int64_t max_seqs = 64) {
  EngineConfig c;
  c.scheduler.max_batch_tokens = max_batch_tokens;
  c.scheduler.max_seqs = max_seqs;
  c.threads = 2;
  c.batch_invariant = true;
  return c;
}

void expect_no_blocks_in_use(const Engine& e) {
  // The engine publishes its gauges after each step; give it a moment after the last event.
  for (int i = 0; i < 200 && e.gauges().kv_blocks_used != 0; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(e.gauges().kv_blocks_used, 0);
  EXPECT_TRUE(e.idle());
}

std::vector<GenerationRequest> random_requests(int n, int64_t max_prompt, int64_t max_out,
                                               int32_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < n; ++i) {
    const int64_t len = std::uniform_int_distribution<int64_t>(1, max_prompt)(rng);
    std::vector<int32_t> p(size_t(len), 0);
    for (auto& t : p) t = std::uniform_int_distribution<int32_t>(3, vocab - 1)(rng);
    reqs.push_back(greedy_request(p, std::uniform_int_distribution<int64_t>(1, max_out)(rng)));
  }
  return reqs;
}

std::vector<Output> run_alone(const Loaded& m, const std::vector<GenerationRequest>& reqs,
                              const EngineConfig& c) {
  Engine e(*m.model, *m.tok, c);
  std::vector<Output> out;
  for (const auto& r : reqs) {
    auto s = e.submit(r);
    EXPECT_EQ(s.status, SubmitStatus::Accepted) << s.message;
    out.push_back(collect(*s.stream));
  }
  expect_no_blocks_in_use(e);
  return out;
}

std::vector<Output> run_alone(const Loaded& m, const std::vector<GenerationRequest>& reqs,
                              bool batch_invariant = true) {
  EngineConfig c = config();
  c.batch_invariant = batch_invariant;
  return run_alone(m, reqs, c);
}

std::vector<Output> run_concurrently(Engine& e, const std::vector<GenerationRequest>& reqs) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& r : reqs) {
    auto s = e.submit(r);
    EXPECT_EQ(s.status, SubmitStatus::Accepted) << s.message;
    streams.push_back(s.stream);
  }
  std::vector<Output> out;
  for (auto& s : streams) out.push_back(collect(*s));
  return out;
}

void expect_same_outputs(const std::vector<Output>& a, const std::vector<Output>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].tokens, b[i].tokens) << "request " << i;
    EXPECT_EQ(a[i].last.finish_reason, b[i].last.finish_reason) << "request " << i;
  }
}

std::string kv_name(const ::testing::TestParamInfo<kv::KvType>& info) {
  std::string n = kv::kv_type_name(info.param);
  for (char& ch : n)
    if (ch == '-') ch = '_';
  return n;
}

// With the default f16 KV cache and the others (serve --kv-type): int8 positions are quantised
// once, from batch-invariant f32 values; int8-mixed decides its f16 copies from weights summed in
// position order at each sequence's logits calls, whatever else shares the step.
class EngineKvType : public ::testing::TestWithParam<kv::KvType> {};

TEST_P(EngineKvType, SixtyFourConcurrentRequestsGiveTheirSoloOutputs) {
  const auto& m = synth_f32();
  const auto reqs = random_requests(64, 500, 48, 512, 1);
  EngineConfig c = config();
  c.kv.type = GetParam();
  const auto alone = run_alone(m, reqs, c);
  Engine e(*m.model, *m.tok, c);
  EXPECT_EQ(e.config().kv.type, GetParam());
  const auto together = run_concurrently(e, reqs);
  expect_same_outputs(alone, together);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(int64_t(together[i].tokens.size()), reqs[i].max_tokens);
    EXPECT_EQ(together[i].last.finish_reason, FinishReason::Length);
    EXPECT_EQ(together[i].last.completion_tokens, reqs[i].max_tokens);
    EXPECT_EQ(together[i].last.prompt_tokens, int64_t(reqs[i].prompt.size()));
  }
  EXPECT_GT(e.metrics().steps.load(), 0);
  expect_no_blocks_in_use(e);
  EXPECT_EQ(e.gauges().kv_f16_copy_bytes, 0);
  EXPECT_EQ(e.gauges().kv_bytes_used, 0);
}

INSTANTIATE_TEST_SUITE_P(KvTypes, EngineKvType,
                         ::testing::Values(kv::KvType::F16, kv::KvType::F32, kv::KvType::Int8,
                                           kv::KvType::Int8Mixed),
                         kv_name);

// A request's blocks (and int8-mixed f16 copies) while it runs, as the gauges show them.
// Polls until the request holds blocks and at least min_tokens positions.
EngineGauges gauges_while_running(Engine& e, int64_t min_tokens = 1) {
  // Gauges are published after each step, and a step of this tiny model takes microseconds:
  // poll without sleeping, or the whole request may run between two looks.
  EngineGauges g = e.gauges();
  for (const auto give_up = Clock::now() + 10s;
       (g.kv_blocks_used == 0 || g.kv_tokens_used < min_tokens) && Clock::now() < give_up;)
    g = e.gauges();
  return g;
}

// The KV type sets the bytes of a block, so the blocks that fit in kv_cache_bytes.
TEST(Engine, KvTypeSetsTheCacheMemory) {
  const auto& m = synth_f32();  // 2 layers, 2 kv heads of 16, context 1024 (64 blocks)
  const int64_t f32_block = 2 * 2 * 2 * 16 * 16 * 4;     // K and V, layers, heads, dims, positions
  const int64_t int8_block = 2 * 2 * 2 * 16 * (16 + 4);  // quants and one f32 scale per row
  EngineConfig c = config();
  EXPECT_EQ(c.kv.type, kv::KvType::F16);  // the default
  c.kv_blocks = 70;
  c.kv.type = kv::KvType::F32;
  EXPECT_EQ(Engine(*m.model, *m.tok, c).gauges().kv_bytes_total, 70 * f32_block);
  c.kv.type = kv::KvType::F16;
  EXPECT_EQ(Engine(*m.model, *m.tok, c).gauges().kv_bytes_total, 70 * f32_block / 2);
  c.kv.type = kv::KvType::Int8;
  const Engine int8(*m.model, *m.tok, c);
  EXPECT_EQ(int8.gauges().kv_bytes_total, 70 * int8_block);
  EXPECT_EQ(int8.gauges().kv_type, "int8");
  EXPECT_DOUBLE_EQ(int8.gauges().kv_bytes_per_token, int8_block / 16.0);
  // Automatic block count: max_seqs (64) full contexts would need 4096 blocks; the cap allows
  // 100 f32 blocks, 200 f16 ones, 327 int8 ones.
  c.kv_blocks = 0;
  c.kv_cache_bytes = size_t(100 * f32_block);
  c.kv.type = kv::KvType::F32;
  EXPECT_EQ(Engine(*m.model, *m.tok, c).config().kv_blocks, 100);
  c.kv.type = kv::KvType::Int8;
  EXPECT_EQ(Engine(*m.model, *m.tok, c).config().kv_blocks, 100 * f32_block / int8_block);
  c.kv.type = kv::KvType::F16;
  Engine e(*m.model, *m.tok, c);
  EXPECT_EQ(e.config().kv_blocks, 200);
  EXPECT_EQ(e.gauges().kv_bytes_total, 100 * f32_block);
  // A request's blocks count at f16 size while it runs.
  auto s = e.submit(greedy_request(std::vector<int32_t>(40, 7), 900));
  ASSERT_EQ(s.status, SubmitStatus::Accepted);
  const EngineGauges g = gauges_while_running(e);
  EXPECT_GT(g.kv_blocks_used, 0);
  EXPECT_EQ(g.kv_bytes_used, g.kv_blocks_used * f32_block / 2);
  s.stream->cancel();
  collect(*s.stream);
  expect_no_blocks_in_use(e);
  // Invalid options are refused.
  c.kv.heavy_fraction = 1.5;
  EXPECT_THROW(Engine(*m.model, *m.tok, c), std::invalid_argument);
  c.kv.heavy_fraction = 0.1;
  c.kv.fp16_layers = {0};  // only int8-mixed has f16 layers
  EXPECT_THROW(Engine(*m.model, *m.tok, c), std::invalid_argument);
  c.kv.type = kv::KvType::Int8Mixed;
  c.kv.fp16_layers = {2};  // the model has 2 layers
  EXPECT_THROW(Engine(*m.model, *m.tok, c), std::invalid_argument);
}

// int8-mixed: the f16 copies count in the memory cap and in the bytes used while a request runs;
// f16 layers are f16 blocks; the prefix cache is off; nothing is left when requests end.
TEST(Engine, Int8MixedCountsItsCopiesAndReleasesThem) {
  const auto& m = synth_f32();
  const int64_t copy = 2 * 2 * 16 * 2;  // one position of one layer: K and V halves
  const int64_t sums = 2 * 4;           // and its weight sums (2 kv heads)
  EngineConfig c = config(256, 4);
  c.kv.type = kv::KvType::Int8Mixed;
  c.kv.sinks = 4;
  c.kv.window = 16;
  c.kv.heavy_fraction = 0.25;
  c.kv.fp16_layers = {1};
  c.kv_cache_bytes = size_t(512) << 10;
  Engine e(*m.model, *m.tok, c);
  EXPECT_FALSE(e.config().scheduler.prefix_caching);
  // Blocks: layer 0 int8 (2 x 16 x 16 + 2 x 16 scales, K and V), layer 1 f16.
  const int64_t block = 2 * (2 * 16 * (16 + 4)) + 2 * (2 * 16 * 16 * 2);
  EXPECT_EQ(e.gauges().kv_bytes_total, e.config().kv_blocks * block);
  // The cap holds the blocks and the policy's bound: copies (with sums) of sinks + window of 4
  // sequences, of a step's prefill, and of a quarter of every block's positions, and a slot index
  // per position of the int8 layer.
  const int64_t fixed = (copy + sums) * (4 * (4 + 16) + 256);
  const int64_t per_block = block + 4 * (copy + sums) + 16 * 4;
  EXPECT_EQ(e.config().kv_blocks, ((int64_t(512) << 10) - fixed) / per_block);
  std::vector<int32_t> prompt(300);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t(3 + i % 500);
  auto s = e.submit(greedy_request(prompt, 900));
  ASSERT_EQ(s.status, SubmitStatus::Accepted);
  // Decoding (the prompt's positions were in f16 until its last chunk's logits call decided).
  const EngineGauges g = gauges_while_running(e, 310);
  ASSERT_GE(g.kv_tokens_used, 310);
  EXPECT_GE(g.kv_f16_copy_bytes, copy * (4 + 16));
  // At most: sinks, window, a quarter of the others (plus a step that may separate the two
  // gauges).
  EXPECT_LE(g.kv_f16_copy_bytes, copy * (4 + 16 + (g.kv_tokens_used + 1 - 20) / 4 + 1));
  // Bytes used: the blocks, and the state: the copies in use and the slots allocated (at most
  // about twice as many, or 16) with their sums, and a slot index per position.
  EXPECT_GE(g.kv_bytes_used, g.kv_blocks_used * block + g.kv_f16_copy_bytes);
  const int64_t slots = std::max<int64_t>(16, 3 * g.kv_f16_copy_bytes / copy);
  EXPECT_LE(g.kv_bytes_used,
            g.kv_blocks_used * block + slots * (copy + sums) + 4 * (g.kv_tokens_used + 1));
  s.stream->cancel();
  collect(*s.stream);
  expect_no_blocks_in_use(e);
  EXPECT_EQ(e.gauges().kv_f16_copy_bytes, 0);
  // A repeated prompt is computed again (no prefix cache in this mode).
  collect(*e.submit(greedy_request(prompt, 3)).stream);
  collect(*e.submit(greedy_request(prompt, 3)).stream);
  EXPECT_EQ(e.gauges().prefix_hit_tokens, 0);
  expect_no_blocks_in_use(e);
}

// Quantised weights are batch-invariant without the (float-only) batch-invariant mode.
TEST(Engine, Q8ModelGivesSoloOutputsWithoutTheInvariantMode) {
  const Loaded m = make_synth(DType::Q8_0);
  const auto reqs = random_requests(32, 300, 32, 512, 7);
  const auto alone = run_alone(m, reqs, false);
  EngineConfig c = config();
  c.batch_invariant = false;
  Engine e(*m.model, *m.tok, c);
  expect_same_outputs(alone, run_concurrently(e, reqs));
  expect_no_blocks_in_use(e);
}

TEST(Engine, Stories260KConcurrentRequestsGiveTheirSoloOutputs) {
  SHRIKE_REQUIRE_SHARED("reference/stories260K/stories260K.gguf");
  const Loaded m = load_gguf(testing::shared_dir() + "/reference/stories260K/stories260K.gguf");
#if defined(SHRIKE_SANITIZED)
  constexpr int kRequests = 32;  // the same batching, at half the sanitizer time
#else
  constexpr int kRequests = 64;
#endif
  auto reqs = random_requests(kRequests, 400, 100, 512, 2);
  for (auto& r : reqs) r.ignore_eos = false;  // real text: let EOS end some of them
  const auto alone = run_alone(m, reqs);
  Engine e(*m.model, *m.tok, config());
  expect_same_outputs(alone, run_concurrently(e, reqs));
  expect_no_blocks_in_use(e);
}

TEST(Engine, SharedPrefixIsComputedOnceAndGivesTheColdOutput) {
  const auto& m = synth_f32();
  std::mt19937 rng(3);
  std::vector<int32_t> prefix(256);
  for (auto& t : prefix) t = std::uniform_int_distribution<int32_t>(3, 511)(rng);
  auto first = prefix, second = prefix;
  for (int32_t t : {40, 41, 42}) first.push_back(t);
  for (int32_t t : {50, 51, 52, 53, 54}) second.push_back(t);

  Engine cold(*m.model, *m.tok, config());
  const auto cold_out = collect(*cold.submit(greedy_request(second, 20)).stream);

  Engine e(*m.model, *m.tok, config());
  collect(*e.submit(greedy_request(first, 20)).stream);
  const auto hits_before = e.gauges().prefix_hit_tokens;
  const auto steps_before = e.metrics().batch_tokens.load();
  const auto warm_out = collect(*e.submit(greedy_request(second, 20)).stream);
  EXPECT_GE(e.gauges().prefix_hit_tokens - hits_before, 256);
  EXPECT_EQ(warm_out.last.cached_prompt_tokens, 256);
  // Only the suffix (5 tokens) and the generated tokens were computed.
  EXPECT_EQ(e.metrics().batch_tokens.load() - steps_before, 5 + 19);
  EXPECT_EQ(warm_out.tokens, cold_out.tokens);
  expect_no_blocks_in_use(e);
}

// Preempted sequences are recomputed (int8-mixed: their f16 copies and weight sums from scratch)
// and still give their solo outputs.
class EnginePreemption : public ::testing::TestWithParam<kv::KvType> {};

TEST_P(EnginePreemption, UnderASmallPoolEveryOutputIsKept) {
  const auto& m = synth_f32();
  const auto reqs = random_requests(64, 300, 64, 512, 4);
  EngineConfig c = config();
  c.kv.type = GetParam();
  const auto alone = run_alone(m, reqs, c);
  c.kv_blocks = 3 * (364 / 16 + 1);  // about three of the longest sequences at once
  Engine e(*m.model, *m.tok, c);
  expect_same_outputs(alone, run_concurrently(e, reqs));
  EXPECT_GT(e.metrics().preemptions.load(), 0);
  std::printf("[ preempt  ] %s: %lld preemptions with a pool of %lld blocks\n",
              kv::kv_type_name(GetParam()), (long long)e.metrics().preemptions.load(),
              (long long)e.config().kv_blocks);
  expect_no_blocks_in_use(e);
  EXPECT_EQ(e.gauges().kv_f16_copy_bytes, 0);
}

INSTANTIATE_TEST_SUITE_P(KvTypes, EnginePreemption,
                         ::testing::Values(kv::KvType::F16, kv::KvType::Int8Mixed), kv_name);

TEST(Engine, CancellationFreesTheBlocksAndEndsTheStream) {
  const auto& m = synth_f32();
  Engine e(*m.model, *m.tok, config());
  auto s = e.submit(greedy_request(std::vector<int32_t>(100, 7), 800)).stream;
  StreamEvent ev;
  ASSERT_TRUE(s->next(ev, 10s));
  s->cancel();
  const auto out = collect(*s);
  EXPECT_EQ(out.last.finish_reason, FinishReason::Cancelled);
  EXPECT_LT(out.last.completion_tokens, 800);
  EXPECT_EQ(e.metrics().finished[size_t(FinishReason::Cancelled)].load(), 1);
  expect_no_blocks_in_use(e);
}

TEST(Engine, DeadlineEndsARequestWithWhatItHas) {
  const auto& m = synth_f32();
  Engine e(*m.model, *m.tok, config());
  auto r = greedy_request(std::vector<int32_t>(50, 9), 900);
  // A deadline a third of the time the whole request takes here, so 900 tokens cannot fit in
  // it whatever the core's speed (a fixed 2 ms could let all 900 finish on a fast core). Passing
  // before the first step is fine too: the request then ends with no tokens.
  const auto start = Clock::now();
  EXPECT_EQ(collect(*e.submit(r).stream).last.finish_reason, FinishReason::Length);
  r.deadline = Clock::now() + (Clock::now() - start) / 3;
  const auto out = collect(*e.submit(r).stream);
  EXPECT_EQ(out.last.finish_reason, FinishReason::Deadline);
  EXPECT_LT(out.last.completion_tokens, 900);
  EXPECT_EQ(e.metrics().timed_out.load(), 1);
  expect_no_blocks_in_use(e);
}

TEST(Engine, RefusesBadRequestsAndAFullQueueAndWhileDraining) {
  const auto& m = synth_f32();
  EngineConfig c = config();
  c.scheduler.max_queue = 2;
  c.scheduler.max_seqs = 1;
  Engine e(*m.model, *m.tok, c);
  EXPECT_EQ(e.submit(greedy_request({}, 5)).status, SubmitStatus::Invalid);
  EXPECT_EQ(e.submit(greedy_request(std::vector<int32_t>(1024, 3), 5)).status,
            SubmitStatus::Invalid);
  EXPECT_EQ(e.submit(greedy_request({3, 512}, 5)).status, SubmitStatus::Invalid);
  EXPECT_EQ(e.submit(greedy_request({3}, 0)).status, SubmitStatus::Invalid);
  // One runs (max_seqs 1), two wait, the next is refused. This tiny model can finish the running
  // request's 1,000 tokens in a few milliseconds on a fast core (CI once saw it), which frees a
  // place before the fourth submit: so try a few times, and require a refusal in one of them.
  std::vector<std::shared_ptr<RequestStream>> streams;
  bool refused = false;
  for (int attempt = 0; attempt < 20 && !refused; ++attempt) {
    for (auto& s : streams) {
      s->cancel();
      collect(*s);
    }
    streams.clear();
    streams.push_back(e.submit(greedy_request({3, 4}, 1000)).stream);
    for (int i = 0; i < 200 && e.gauges().running == 0; ++i) std::this_thread::sleep_for(5ms);
    streams.push_back(e.submit(greedy_request({3, 4}, 1000)).stream);
    streams.push_back(e.submit(greedy_request({3, 4}, 1000)).stream);
    const auto full = e.submit(greedy_request({3, 4}, 5));
    if (full.status == SubmitStatus::QueueFull) {
      refused = true;
      EXPECT_NE(full.message.find("queue is full"), std::string::npos) << full.message;
    } else {
      ASSERT_EQ(full.status, SubmitStatus::Accepted) << full.message;
      streams.push_back(full.stream);
    }
  }
  EXPECT_TRUE(refused) << "a third waiting request was accepted in every attempt";
  e.drain();
  EXPECT_EQ(e.submit(greedy_request({3, 4}, 5)).status, SubmitStatus::Draining);
  for (auto& s : streams) {
    ASSERT_TRUE(s);
    s->cancel();
    const auto reason = collect(*s).last.finish_reason;  // the first may have finished already
    EXPECT_TRUE(reason == FinishReason::Cancelled || reason == FinishReason::Length);
  }
  expect_no_blocks_in_use(e);
}

TEST(Engine, StaticBatchingGivesTheSameOutputs) {
  const auto& m = synth_f32();
  const auto reqs = random_requests(12, 200, 30, 512, 6);
  const auto alone = run_alone(m, reqs);
  EngineConfig c = config();
  c.scheduler.mode = BatchingMode::Static;
  c.scheduler.batch_size = 5;
  c.scheduler.batch_wait_ms = 5;
  Engine e(*m.model, *m.tok, c);
  expect_same_outputs(alone, run_concurrently(e, reqs));
  expect_no_blocks_in_use(e);
}

TEST(Engine, StopStringEndsTheTextBeforeIt) {
  const auto& m = synth_f32();
  Engine e(*m.model, *m.tok, config());
  const auto full = collect(*e.submit(greedy_request({3, 100, 200, 300}, 60)).stream);
  ASSERT_GT(full.text.size(), 20u);
  // Some 3 bytes from the middle of the text, on character boundaries.
  size_t at = full.text.size() / 2;
  while (at > 0 && (full.text[at] & 0xC0) == 0x80) --at;
  size_t end = at + 3;
  while (end < full.text.size() && (full.text[end] & 0xC0) == 0x80) ++end;
  const std::string stop = full.text.substr(at, end - at);
  auto r = greedy_request({3, 100, 200, 300}, 60);
  r.stop = {"\x01never", stop};
  const auto cut = collect(*e.submit(r).stream);
  EXPECT_EQ(cut.last.finish_reason, FinishReason::Stop);
  EXPECT_EQ(cut.text, full.text.substr(0, full.text.find(stop)));
  expect_no_blocks_in_use(e);
}

TEST(Engine, ShutdownEndsEveryRequest) {
  const auto& m = synth_f32();
  auto e = std::make_unique<Engine>(*m.model, *m.tok, config());
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 5; ++i) streams.push_back(e->submit(greedy_request({3, 4, 5}, 900)).stream);
  e->shutdown();
  for (auto& s : streams) EXPECT_EQ(collect(*s).last.finish_reason, FinishReason::Cancelled);
}

// The event loop's hook (RequestStream::set_listener): called after every push, at once when
// events already wait, and never after it is removed; next() with no wait takes what is there.
TEST(RequestStream, ListenerHearsEveryPushAndWhatWaited) {
  RequestStream s;
  StreamEvent ev;
  ev.text = "a";
  s.push(ev);  // before any listener
  int calls = 0;
  s.set_listener([&] { ++calls; });
  EXPECT_EQ(calls, 1) << "the event pushed before the listener went unnoticed";
  ev.text = "b";
  s.push(ev);
  EXPECT_EQ(calls, 2);
  StreamEvent got;
  ASSERT_TRUE(s.next(got, 0ms));
  EXPECT_EQ(got.text, "a");
  ASSERT_TRUE(s.next(got, 0ms));
  EXPECT_EQ(got.text, "b");
  EXPECT_FALSE(s.next(got, 0ms));
  s.set_listener(nullptr);
  ev.finished = true;
  s.push(ev);
  EXPECT_EQ(calls, 2) << "a removed listener was called";
  ASSERT_TRUE(s.next(got, 0ms));
  EXPECT_TRUE(got.finished);
}

}  // namespace
}  // namespace shrike::engine
