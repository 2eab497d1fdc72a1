#include "loadtest/arrivals.h"

#include <memory>
#include <stdexcept>

namespace shrike::loadtest {

GammaGaps::GammaGaps(double rate, double burstiness, uint64_t seed)
    : rng_(seed), dist_(burstiness, 1.0 / (rate * burstiness)) {
  if (!(rate > 0) || !(burstiness > 0))
    throw std::invalid_argument("arrival rate and burstiness must be > 0");
}

Schedule closed_loop_schedule(int concurrency, int64_t input_tokens, int64_t output_tokens) {
  Schedule s;
  s.concurrency = concurrency;
  s.next = [=]() -> std::optional<PlannedRequest> {
    return PlannedRequest{0, input_tokens, output_tokens, {}};
  };
  return s;
}

Schedule rate_schedule(double rate, double burstiness, uint64_t seed, int64_t input_tokens,
                       int64_t output_tokens) {
  Schedule s;
  s.intended_rate = rate;
  auto gaps = std::make_shared<GammaGaps>(rate, burstiness, seed);
  auto t = std::make_shared<double>(0.0);
  // The first request goes out at 0; each later one a gamma gap after the previous.
  auto first = std::make_shared<bool>(true);
  s.next = [=]() -> std::optional<PlannedRequest> {
    if (!*first) *t += gaps->next();
    *first = false;
    return PlannedRequest{*t, input_tokens, output_tokens, {}};
  };
  return s;
}

Schedule trace_schedule(std::vector<TraceEntry> entries) {
  Schedule s;
  if (entries.size() > 1 && entries.back().t > 0)
    s.intended_rate = (entries.size() - 1) / entries.back().t;
  auto e = std::make_shared<std::vector<TraceEntry>>(std::move(entries));
  auto i = std::make_shared<size_t>(0);
  s.next = [=]() -> std::optional<PlannedRequest> {
    if (*i >= e->size()) return std::nullopt;
    auto& x = (*e)[(*i)++];
    return PlannedRequest{x.t, x.input_tokens, x.output_tokens, std::move(x.hash_ids)};
  };
  return s;
}

}  // namespace shrike::loadtest
