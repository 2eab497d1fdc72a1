// Several models in one `shrike serve` (issue 19): routing by the request's "model", 404 for
// others, one KV memory budget shared with a guaranteed minimum per model (never exceeded, a burst
// on one model does not starve the other), metrics labelled by model, vLLM's gauge names under
// --metrics-compat vllm read while requests run (and checked by promtool when installed), the
// admin route that adds and removes a model while serving, readiness and liveness routes.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "run_shrike.h"
#include "server_process.h"

namespace shrike::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kAdminKey = "admin-secret";
constexpr double kBudgetMiB = 4, kMinMiB = 1;

struct Reply {
  int status = 0;
  std::string body;
  json parsed() const { return json::parse(body, nullptr, false); }
};

Reply request(int port, const std::string& method, const std::string& path,
              const std::string& body = "", const std::string& bearer = "") {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(120, 0);
  httplib::Headers h;
  if (!bearer.empty()) h.emplace("Authorization", "Bearer " + bearer);
  httplib::Result r = method == "GET"    ? c.Get(path.c_str(), h)
                      : method == "POST" ? c.Post(path.c_str(), h, body, "application/json")
                                         : c.Delete(path.c_str(), h);
  return r ? Reply{r->status, r->body} : Reply{};
}

Reply complete(int port, const std::string& model, const std::string& prompt, int max_tokens,
               bool ignore_eos = false) {
  json body = {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
  if (ignore_eos) body["ignore_eos"] = true;  // every request its full length
  if (!model.empty()) body["model"] = model;
  return request(port, "POST", "/v1/completions", body.dump());
}

// Samples of a Prometheus text: "name{labels}" -> value.
std::map<std::string, double> samples(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    out[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return out;
}

double at(const std::map<std::string, double>& m, const std::string& key) {
  const auto it = m.find(key);
  if (it == m.end()) {
    ADD_FAILURE() << "no sample " << key;
    return -1;
  }
  return it->second;
}

class MultiModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() /
                        ("shrike_multi_model_test_" + std::to_string(getpid())));
    fs::create_directories(*dir_);
    error_ = new std::string;
    // Two different models: other shapes, other weights.
    for (const auto& [name, shape] : std::vector<std::pair<std::string, std::string>>{
             {"a", "--dim 64 --layers 2 --heads 4 --ffn 128 --seed 1"},
             {"b", "--dim 32 --layers 1 --heads 2 --ffn 64 --seed 2"}}) {
      const auto r = run_shrike("synth " + shape + " --vocab 512 --context 256 --type f32 -o " +
                                (*dir_ / (name + ".gguf")).string());
      if (r.exit_code != 0) *error_ += "shrike synth failed: " + r.err;
    }
    server_ = new ServerProcess();
    char budget[32], min[32];
    std::snprintf(budget, sizeof budget, "%g", kBudgetMiB);
    std::snprintf(min, sizeof min, "%g", kMinMiB);
    if (error_->empty() &&
        !server_->start({"alpha=" + (*dir_ / "a.gguf").string(),
                         "beta=" + (*dir_ / "b.gguf").string(), "--threads", "1", "--kv-memory",
                         budget, "--kv-min-mb", min, "--max-seqs", "32", "--admin-key", kAdminKey,
                         "--metrics-compat", "vllm"}))
      *error_ = "shrike serve did not start:\n" + server_->log();
  }
  static void TearDownTestSuite() {
    server_->signal(SIGTERM);
    EXPECT_EQ(server_->wait_exit(30), 0) << server_->log();
    delete server_;
    fs::remove_all(*dir_);
    delete dir_;
    delete error_;
  }
  void SetUp() override { ASSERT_TRUE(error_->empty()) << *error_; }
  int port() const { return server_->port(); }
  std::map<std::string, double> scrape() const {
    const Reply r = request(port(), "GET", "/metrics");
    EXPECT_EQ(r.status, 200);
    return samples(r.body);
  }

  static fs::path* dir_;
  static std::string* error_;
  static ServerProcess* server_;
};
fs::path* MultiModelTest::dir_ = nullptr;
std::string* MultiModelTest::error_ = nullptr;
ServerProcess* MultiModelTest::server_ = nullptr;

// --http-threads left out: 64 workers whatever the models and their batches (a stream or an
// answer being generated holds none; the stream pump writes it).
TEST_F(MultiModelTest, HttpWorkersDefaultToTheDocumentedCount) {
  EXPECT_NE(server_->log().find("shrike serve: 64 HTTP workers"), std::string::npos)
      << server_->log();
}

TEST_F(MultiModelTest, EachModelAnswersByItsName) {
  const Reply a = complete(port(), "alpha", "the same prompt", 12);
  const Reply b = complete(port(), "beta", "the same prompt", 12);
  ASSERT_EQ(a.status, 200) << a.body;
  ASSERT_EQ(b.status, 200) << b.body;
  EXPECT_EQ(a.parsed()["model"], "alpha");
  EXPECT_EQ(b.parsed()["model"], "beta");
  // Different weights: greedy answers to the same prompt differ (they would not if both names
  // reached one engine).
  EXPECT_NE(a.parsed()["choices"][0]["text"], b.parsed()["choices"][0]["text"]);
  // And each is its model's own: asked again, the same text.
  EXPECT_EQ(complete(port(), "alpha", "the same prompt", 12).parsed()["choices"][0]["text"],
            a.parsed()["choices"][0]["text"]);

  const json models = request(port(), "GET", "/v1/models").parsed();
  ASSERT_EQ(models["data"].size(), 2u) << models.dump();
  EXPECT_EQ(models["data"][0]["id"], "alpha");
  EXPECT_EQ(models["data"][1]["id"], "beta");
  EXPECT_EQ(models["data"][1]["shrike"]["serving_options"]["model_file"], "b.gguf");
  EXPECT_EQ(request(port(), "GET", "/v1/models/beta").parsed()["id"], "beta");
}

TEST_F(MultiModelTest, UnknownModelIs404AndAMissingNameIs400) {
  const Reply r = complete(port(), "gamma", "hello", 4);
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.parsed()["error"]["code"], "model_not_found") << r.body;
  EXPECT_EQ(request(port(), "GET", "/v1/models/gamma").status, 404);
  const Reply chat =
      request(port(), "POST", "/v1/chat/completions",
              R"({"model": "gamma", "messages": [{"role": "user", "content": "x"}]})");
  EXPECT_EQ(chat.status, 404);
  // Two models and no name: which one is ambiguous.
  const Reply none = complete(port(), "", "hello", 4);
  EXPECT_EQ(none.status, 400);
  EXPECT_NE(none.body.find("alpha, beta"), std::string::npos) << none.body;
}

TEST_F(MultiModelTest, HealthIsReadinessAndLiveIsLiveness) {
  const Reply h = request(port(), "GET", "/health");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.parsed()["models"], 2);
  EXPECT_EQ(request(port(), "GET", "/live").status, 200);
}

// A burst on alpha bigger than the whole budget while beta keeps answering: the budget's claimed
// bytes (sum over models of max(committed, minimum)) never pass it, alpha never commits into
// beta's minimum, and the protocol's gauges, read while requests run, equal shrike's own.
TEST_F(MultiModelTest, ABurstStaysWithinTheSharedBudgetAndTheGaugesFollowIt) {
  const double budget = kBudgetMiB * (1 << 20), min = kMinMiB * (1 << 20);
  // Four waves of 32 (--max-seqs): long enough for the scrapes below to catch a queue.
  constexpr int kBurst = 128;
  std::atomic<int> ok{0}, failed{0};
  std::vector<std::thread> burst;
  // Requests of about 220 positions, 32 at a time: 32 x 14 blocks of 8 KiB = 3.5 MiB, more
  // than the 3 MiB alpha may take (4 MiB less beta's 1 MiB minimum).
  for (int i = 0; i < kBurst; ++i)
    burst.emplace_back([&, i] {
      std::string prompt;
      for (int w = 0; w < 25; ++w) prompt += "w" + std::to_string((i * 7 + w) % 97) + " ";
      const Reply r = complete(port(), "alpha", prompt, 120, true);
      (r.status == 200 ? ok : failed).fetch_add(1);
    });
  std::atomic<bool> done{false};
  std::atomic<int> beta_ok{0};
  std::thread beta([&] {
    while (!done.load())
      if (complete(port(), "beta", "still here", 8).status == 200) beta_ok.fetch_add(1);
  });
  int scrapes = 0, saw_running = 0, saw_waiting = 0;
  double peak_claimed = 0, peak_alpha_bytes = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (ok.load() + failed.load() < kBurst && std::chrono::steady_clock::now() < deadline) {
    const auto m = scrape();
    ++scrapes;
    const double claimed = at(m, "shrike_kv_memory_claimed_bytes");
    peak_claimed = std::max(peak_claimed, claimed);
    EXPECT_LE(claimed, budget);
    EXPECT_EQ(at(m, "shrike_kv_memory_budget_bytes"), budget);
    // What alpha has committed (blocks of 2 layers x 4 kv heads x 16 dims x 16 positions, K
    // and V, f16) never reaches into beta's guaranteed minimum.
    const double alpha_bytes = at(m, "shrike_kv_blocks_committed{model=\"alpha\"}") * 8192;
    peak_alpha_bytes = std::max(peak_alpha_bytes, alpha_bytes);
    EXPECT_LE(alpha_bytes, budget - min);
    for (const std::string model : {"alpha", "beta"}) {
      const std::string ml = "{model=\"" + model + "\"}", vl = "{model_name=\"" + model + "\"}";
      const double running = at(m, "shrike_requests_running" + ml);
      EXPECT_EQ(at(m, "vllm:num_requests_running" + vl), running);
      EXPECT_EQ(at(m, "vllm:num_requests_waiting" + vl), at(m, "shrike_requests_waiting" + ml));
      const double used = at(m, "shrike_kv_blocks_used" + ml);
      const double usable = at(m, "shrike_kv_blocks_usable" + ml);
      const double usage = at(m, "vllm:kv_cache_usage_perc" + vl);
      EXPECT_GE(usage, 0);
      EXPECT_LE(usage, 1);
      if (usable > 0) {
        EXPECT_NEAR(usage, std::min(1.0, used / usable), 1e-9);
      }
      if (model == "alpha" && running > 0 && used > 0) ++saw_running;
      if (model == "alpha" && at(m, "vllm:num_requests_waiting" + vl) > 0) ++saw_waiting;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (auto& t : burst) t.join();
  done.store(true);
  beta.join();
  EXPECT_EQ(ok.load(), kBurst) << failed.load() << " failed";
  EXPECT_GT(beta_ok.load(), 0) << "beta answered nothing during alpha's burst";
  EXPECT_GT(saw_running, 0) << "no scrape saw alpha's requests running (" << scrapes << ")";
  // --max-seqs 32 with 128 requests: some must have been seen waiting.
  EXPECT_GT(saw_waiting, 0) << "no scrape saw alpha's queue (" << scrapes << " scrapes)";
  // The burst did use the shared part beyond alpha's own minimum.
  EXPECT_GT(peak_alpha_bytes, min) << "the burst never needed more than alpha's minimum";
  EXPECT_LE(peak_claimed, budget);
  std::printf(
      "burst: %d scrapes, peak claimed %.2f MiB of %.0f, alpha committed up to %.2f MiB, "
      "beta answered %d times\n",
      scrapes, peak_claimed / (1 << 20), kBudgetMiB, peak_alpha_bytes / (1 << 20), beta_ok.load());
  // Everything ends: no running request, no block held.
  const auto after = scrape();
  EXPECT_EQ(at(after, "vllm:num_requests_running{model_name=\"alpha\"}"), 0);
  EXPECT_EQ(at(after, "shrike_kv_blocks_used{model=\"alpha\"}"), 0);
}

// promtool (Debian's prometheus package; scripts/setup.sh installs it) on the live /metrics:
// shrike's own families lint clean; vLLM's names draw exactly promtool's note that ':' is meant
// for recording rules (the protocol fixes those names: vLLM's own output gets the same note).
TEST_F(MultiModelTest, PromtoolChecksTheExposition) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "promtool not installed (apt-get install prometheus; scripts/setup.sh does)";
  complete(port(), "alpha", "fill the histograms", 4);
  const Reply r = request(port(), "GET", "/metrics");
  ASSERT_EQ(r.status, 200);
  const fs::path all = *dir_ / "metrics.txt", own = *dir_ / "own.txt";
  {
    std::ofstream out(all);
    out << r.body;
    std::ofstream own_out(own);
    std::istringstream in(r.body);
    for (std::string line; std::getline(in, line);)
      if (line.find("vllm:") == std::string::npos) own_out << line << "\n";
  }
  const auto check = [](const fs::path& p) {
    const fs::path log = p.string() + ".promtool";
    const int rc = std::system(
        ("promtool check metrics < " + p.string() + " > " + log.string() + " 2>&1").c_str());
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    return std::make_pair(WEXITSTATUS(rc), text.str());
  };
  const auto [own_rc, own_text] = check(own);
  EXPECT_EQ(own_rc, 0) << own_text;
  EXPECT_EQ(own_text, "");
  const auto [all_rc, all_text] = check(all);
  std::istringstream lines(all_text);
  int notes = 0;
  for (std::string line; std::getline(lines, line);) {
    ++notes;
    EXPECT_NE(line.find("metric names should not contain ':'"), std::string::npos) << line;
    EXPECT_EQ(line.rfind("vllm:", 0), 0u) << line;
  }
  EXPECT_EQ(notes, 3) << all_text;
}

TEST_F(MultiModelTest, TheAdminRouteAddsAndRemovesAModelWithoutARestart) {
  const std::string path = (*dir_ / "b.gguf").string();
  const std::string body = json{{"name", "gamma"}, {"path", path}}.dump();
  // Without the key, or with a wrong one of the same length: 401, nothing added.
  EXPECT_EQ(request(port(), "POST", "/admin/models", body).status, 401);
  EXPECT_EQ(request(port(), "POST", "/admin/models", body, "admin-secreT").status, 401);
  EXPECT_EQ(complete(port(), "gamma", "hi", 4).status, 404);
  // Bad bodies name what is wrong.
  const Reply no_path = request(port(), "POST", "/admin/models", R"({"name": "x"})", kAdminKey);
  EXPECT_EQ(no_path.status, 400);
  EXPECT_EQ(no_path.parsed()["error"]["param"], "path");
  const Reply missing = request(port(), "POST", "/admin/models",
                                R"({"name": "x", "path": "/nonexistent.gguf"})", kAdminKey);
  EXPECT_EQ(missing.status, 400);
  EXPECT_NE(missing.body.find("nonexistent"), std::string::npos) << missing.body;
  // Names are bounded and printable: a 1 MB name would bloat every /metrics scrape and could not
  // be deleted (its DELETE line would exceed the URI limit).
  for (const std::string& bad : {std::string(1 << 20, 'n'), std::string(129, 'n'),
                                 std::string("two words"), std::string("tab\there")}) {
    const Reply r = request(port(), "POST", "/admin/models",
                            json{{"name", bad}, {"path", path}}.dump(), kAdminKey);
    EXPECT_EQ(r.status, 400) << bad.size();
    EXPECT_EQ(r.parsed()["error"]["param"], "name") << r.body;
  }
  EXPECT_EQ(request(port(), "POST", "/admin/models", json{{"name", "alpha"}, {"path", path}}.dump(),
                    kAdminKey)
                .status,
            409);

  const double claimed_before = at(scrape(), "shrike_kv_memory_claimed_bytes");
  const Reply added = request(port(), "POST", "/admin/models", body, kAdminKey);
  ASSERT_EQ(added.status, 201) << added.body;
  const Reply g = complete(port(), "gamma", "the same prompt", 12);
  ASSERT_EQ(g.status, 200) << g.body;
  // gamma is beta's file: the same answer.
  EXPECT_EQ(g.parsed()["choices"][0]["text"],
            complete(port(), "beta", "the same prompt", 12).parsed()["choices"][0]["text"]);
  EXPECT_EQ(request(port(), "GET", "/v1/models").parsed()["data"].size(), 3u);
  // Its guaranteed minimum is claimed from the shared budget.
  EXPECT_GT(at(scrape(), "shrike_kv_memory_claimed_bytes"), claimed_before);
  EXPECT_EQ(at(scrape(), "shrike_requests_running{model=\"gamma\"}"), 0);

  EXPECT_EQ(request(port(), "DELETE", "/admin/models/gamma").status, 401);
  const Reply removed = request(port(), "DELETE", "/admin/models/gamma", "", kAdminKey);
  ASSERT_EQ(removed.status, 200) << removed.body;
  EXPECT_EQ(removed.parsed()["drained"], true);
  EXPECT_EQ(complete(port(), "gamma", "hi", 4).status, 404);
  EXPECT_EQ(request(port(), "DELETE", "/admin/models/gamma", "", kAdminKey).status, 404);
  EXPECT_EQ(request(port(), "GET", "/v1/models").parsed()["data"].size(), 2u);
  EXPECT_EQ(scrape().count("shrike_requests_running{model=\"gamma\"}"), 0u);
  EXPECT_LE(at(scrape(), "shrike_kv_memory_claimed_bytes"), claimed_before);
  EXPECT_EQ(complete(port(), "beta", "hi", 4).status, 200);
}

// Requests racing a model's removal get their answer (200) or 404, never 503: a request that
// looked the model up just before the DELETE and submits just after finds its engine draining,
// which is the model's end, not the server's. Four clients send short requests to a model added
// for the purpose while it is removed; all must be 200 or 404 and the other models stay served.
TEST_F(MultiModelTest, RequestsRacingARemovalGet200Or404) {
  const std::string path = (*dir_ / "b.gguf").string();
  for (int round = 0; round < 3; ++round) {
    const Reply added = request(port(), "POST", "/admin/models",
                                json{{"name", "racer"}, {"path", path}}.dump(), kAdminKey);
    ASSERT_EQ(added.status, 201) << added.body;
    std::atomic<bool> removed{false};
    std::atomic<int> ok{0}, gone{0}, other{0};
    std::vector<std::thread> clients;
    for (int c = 0; c < 4; ++c)
      clients.emplace_back([&] {
        // Until some requests after the removal have come back.
        for (int after = 0; after < 20;) {
          const int status = complete(port(), "racer", "hi", 2).status;
          (status == 200 ? ok : status == 404 ? gone : other).fetch_add(1);
          if (removed.load()) ++after;
        }
      });
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    const Reply r = request(port(), "DELETE", "/admin/models/racer", "", kAdminKey);
    removed = true;
    for (auto& t : clients) t.join();
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_GT(ok.load(), 0);
    EXPECT_GT(gone.load(), 0);
    EXPECT_EQ(other.load(), 0) << "answers other than 200 and 404 in round " << round;
  }
  EXPECT_EQ(complete(port(), "beta", "hi", 4).status, 200);
}

// Without --admin-key the admin routes do not exist.
TEST(MultiModelAdmin, RoutesAreOffWithoutAKey) {
  const fs::path dir = fs::temp_directory_path() / ("shrike_admin_off_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string model = (dir / "m.gguf").string();
  ASSERT_EQ(run_shrike("synth --dim 32 --layers 1 --heads 2 --ffn 64 --vocab 512 --context 64 "
                       "-o " +
                       model)
                .exit_code,
            0);
  ServerProcess server;
  ASSERT_TRUE(server.start({model, "--threads", "1"})) << server.log();
  const Reply r = request(server.port(), "POST", "/admin/models",
                          json{{"name", "x"}, {"path", model}}.dump(), "anything");
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(request(server.port(), "DELETE", "/admin/models/m", "", "anything").status, 404);
  EXPECT_EQ(complete(server.port(), "", "hi", 4).status, 200);  // one model: no name needed
  server.signal(SIGTERM);
  EXPECT_EQ(server.wait_exit(30), 0) << server.log();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace shrike::testing
