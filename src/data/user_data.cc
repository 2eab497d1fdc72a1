#include "data/user_data.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <stdexcept>

#include "core/file_buffer.h"
#include "data/generator.h"
#include "data/importers.h"
#include "data/rng.h"

namespace shrike::data {
namespace fs = std::filesystem;
namespace {

bool has_extension(const fs::path& p, const char* ext) {
  std::string e = p.extension().string();
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return std::tolower(c); });
  return e == ext;
}

std::vector<Example> read_file(const fs::path& p) {
  if (has_extension(p, ".csv")) return read_labelled_csv(p.string());
  return read_examples(p.string());
}

// The text two copies of one utterance share: ASCII case folded, runs of whitespace as one
// space, none at the ends.
std::string fold(const std::string& text) {
  std::string out;
  bool space = false;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    out.push_back(char(std::tolower(c)));
  }
  return out;
}

uint64_t hash_text(const std::string& s, uint64_t seed) {
  uint64_t h = 0xcbf29ce484222325ULL ^ (seed * 0x9e3779b97f4a7c15ULL);
  for (const char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return Rng(h).next();  // FNV alone orders similar strings alike; one mixing step spreads them
}

// The noise pass over every example, from its own stream of the seed.
std::vector<Example> noisy(const std::vector<Example>& in, uint64_t seed, int64_t* changed) {
  Rng rng(seed);
  std::vector<Example> out;
  out.reserve(in.size());
  for (const Example& ex : in) {
    out.push_back(noisy_copy(ex, rng));
    if (changed && out.back().text != ex.text) ++*changed;
  }
  return out;
}

void derive(UserSplits& s, const SplitOptions& o) {
  s.test_noisy = noisy(s.test, o.seed ^ 0x6e6f697379ULL, &s.noisy_changed);
  std::vector<Example> seen = s.train;
  seen.insert(seen.end(), s.dev.begin(), s.dev.end());
  s.calib = noisy(seen, o.seed ^ 0x63616c6962ULL, nullptr);
}

}  // namespace

std::vector<Example> read_labelled(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(path, ec))
      if (e.is_regular_file() &&
          (has_extension(e.path(), ".jsonl") || has_extension(e.path(), ".csv")))
        files.push_back(e.path());
    if (ec) throw FileError(path + ": cannot list: " + ec.message());
    if (files.empty()) throw FileError(path + ": no .jsonl or .csv file of labelled utterances");
    std::sort(files.begin(), files.end());
    std::vector<Example> out;
    for (const fs::path& f : files) {
      std::vector<Example> part = read_file(f);
      out.insert(out.end(), std::make_move_iterator(part.begin()),
                 std::make_move_iterator(part.end()));
    }
    if (out.empty()) throw FileError(path + ": no examples in its .jsonl/.csv files");
    return out;
  }
  if (!fs::is_regular_file(path, ec)) throw FileError(path + ": cannot open (no such file)");
  std::vector<Example> out = read_file(path);
  if (out.empty()) throw FileError(path + ": no examples");
  return out;
}

UserSplits split_examples(const std::vector<Example>& examples, const SplitOptions& o) {
  if (!(o.dev >= 0 && o.dev <= 0.5 && o.test >= 0 && o.test <= 0.5))
    throw std::invalid_argument("split: the dev and test fractions must be in [0, 0.5]");
  if (examples.empty()) throw std::invalid_argument("split: no examples");
  // Distinct texts per intent (an utterance's intent is that of its first copy), in file order.
  std::map<std::string, size_t> group_of;  // folded text -> group
  std::vector<std::string> group_text;
  std::map<std::string, std::vector<size_t>> groups_by_intent;
  std::vector<size_t> group_of_example(examples.size());
  for (size_t i = 0; i < examples.size(); ++i) {
    const std::string key = fold(examples[i].text);
    auto [it, added] = group_of.emplace(key, group_text.size());
    if (added) {
      group_text.push_back(key);
      groups_by_intent[examples[i].intent].push_back(it->second);
    }
    group_of_example[i] = it->second;
  }
  enum Where : uint8_t { Train, Dev, Test };
  std::vector<Where> where(group_text.size(), Train);
  for (auto& [intent, groups] : groups_by_intent) {
    std::sort(groups.begin(), groups.end(), [&](size_t a, size_t b) {
      return hash_text(group_text[a], o.seed) < hash_text(group_text[b], o.seed);
    });
    const auto n = int64_t(groups.size());
    if (n < 3) continue;  // too few to hold any out: all train
    const int64_t n_test = o.test > 0 ? std::max<int64_t>(1, std::llround(double(n) * o.test)) : 0;
    const int64_t n_dev = o.dev > 0 ? std::max<int64_t>(1, std::llround(double(n) * o.dev)) : 0;
    for (int64_t k = 0; k < n && k < n_test + n_dev && k < n - 1; ++k)
      where[groups[size_t(k)]] = k < n_test ? Test : Dev;
  }
  UserSplits s;
  s.distinct_texts = int64_t(group_text.size());
  s.intents = int64_t(groups_by_intent.size());
  for (size_t i = 0; i < examples.size(); ++i) {
    switch (where[group_of_example[i]]) {
      case Train:
        s.train.push_back(examples[i]);
        break;
      case Dev:
        s.dev.push_back(examples[i]);
        break;
      case Test:
        s.test.push_back(examples[i]);
        break;
    }
  }
  derive(s, o);
  return s;
}

bool read_presplit(const std::string& path, const SplitOptions& o, UserSplits& out) {
  const fs::path dir(path);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return false;
  for (const char* split : {"train", "dev", "test"})
    if (!fs::exists(dir / (std::string(split) + ".jsonl"), ec)) return false;
  out = UserSplits{};
  auto read = [&](const char* split, std::vector<Example>& dst) {
    const std::string file = (dir / (std::string(split) + ".jsonl")).string();
    dst = read_examples(file);
    if (dst.empty()) throw FileError(file + ": no examples");
  };
  read("train", out.train);
  read("dev", out.dev);
  read("test", out.test);
  derive(out, o);
  if (fs::exists(dir / "test_noisy.jsonl", ec)) {
    out.test_noisy = read_examples((dir / "test_noisy.jsonl").string());
    out.noisy_changed = 0;
    for (size_t i = 0; i < out.test_noisy.size() && i < out.test.size(); ++i)
      out.noisy_changed += out.test_noisy[i].text != out.test[i].text;
  }
  std::map<std::string, int> intents;
  std::map<std::string, int> texts;
  for (const auto* v : {&out.train, &out.dev, &out.test})
    for (const Example& ex : *v) {
      intents[ex.intent] = 1;
      texts[fold(ex.text)] = 1;
    }
  out.intents = int64_t(intents.size());
  out.distinct_texts = int64_t(texts.size());
  return true;
}

void write_user_splits(const UserSplits& s, const std::string& dir) {
  create_dataset_directory(dir);
  write_examples(s.train, dir + "/train.jsonl");
  write_examples(s.dev, dir + "/dev.jsonl");
  write_examples(s.test, dir + "/test.jsonl");
  write_examples(s.test_noisy, dir + "/test_noisy.jsonl");
  write_examples(s.calib, dir + "/calib.jsonl");
}

}  // namespace shrike::data
