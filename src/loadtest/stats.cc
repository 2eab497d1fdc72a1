#include "loadtest/stats.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <stdexcept>

namespace shrike::loadtest {

double percentile(const std::vector<double>& s, double p) {
  if (s.empty()) return NAN;
  const double pos = p / 100.0 * (s.size() - 1);
  const size_t lo = (size_t)std::floor(pos), hi = std::min(lo + 1, s.size() - 1);
  return s[lo] + (s[hi] - s[lo]) * (pos - lo);
}

Distribution distribution(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return std::isnan(x); }), v.end());
  Distribution d;
  d.n = v.size();
  if (v.empty()) return d;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  d.mean = sum / v.size();
  d.p50 = percentile(v, 50);
  d.p90 = percentile(v, 90);
  d.p99 = percentile(v, 99);
  d.max = v.back();
  return d;
}

Slo parse_slo(const std::string& spec) {
  Slo slo;
  std::stringstream ss(spec);
  std::string part;
  while (std::getline(ss, part, ',')) {
    const auto eq = part.find('=');
    const std::string key = part.substr(0, eq);
    double v = 0;
    try {
      size_t used = 0;
      v = std::stod(part.substr(eq == std::string::npos ? part.size() : eq + 1), &used);
      if (used != part.size() - eq - 1 || !(v > 0)) throw std::invalid_argument("");
    } catch (const std::exception&) {
      throw std::invalid_argument("--slo: bad '" + part + "' (expected ttft=MS,tpot=MS,e2e=MS)");
    }
    if (key == "ttft")
      slo.ttft_ms = v;
    else if (key == "tpot")
      slo.tpot_ms = v;
    else if (key == "e2e")
      slo.e2e_ms = v;
    else
      throw std::invalid_argument("--slo: unknown metric '" + key + "' (ttft, tpot, e2e)");
  }
  return slo;
}

bool meets_slo(const RequestRecord& r, const Slo& slo) {
  if (r.outcome != Outcome::kCompleted) return false;
  if (slo.ttft_ms > 0 && !(r.ttft * 1000 <= slo.ttft_ms)) return false;
  if (slo.tpot_ms > 0 && std::isfinite(r.tpot) && !(r.tpot * 1000 <= slo.tpot_ms)) return false;
  if (slo.e2e_ms > 0 && !(r.e2e * 1000 <= slo.e2e_ms)) return false;
  return true;
}

Summary summarise(const RunResult& run, const Slo& slo) {
  Summary s;
  s.wall_s = run.wall_s;
  s.concurrency = run.concurrency;
  s.max_in_flight = run.max_in_flight;
  s.intended_rate = run.intended_rate;
  std::vector<double> ttft, tpot, itl, e2e, setup;
  double first_send = INFINITY, last_send = -INFINITY, lag_sum = 0;
  s.usage_from_server = true;
  std::map<std::string, int64_t> errors;
  for (const auto& r : run.records) {
    ++s.sent;
    first_send = std::min(first_send, r.sent_s);
    last_send = std::max(last_send, r.sent_s);
    const double lag = r.sent_s - r.scheduled_s;
    lag_sum += lag;
    s.max_send_lag = std::max(s.max_send_lag, lag);
    switch (r.outcome) {
      case Outcome::kCompleted:
        ++s.completed;
        break;
      case Outcome::kFailed:
        ++s.failed;
        break;
      case Outcome::kTimedOut:
        ++s.timed_out;
        break;
    }
    if (r.outcome != Outcome::kCompleted) {
      ++errors[r.error.substr(0, 100)];
      continue;
    }
    s.usage_from_server &= r.usage_from_server;
    ttft.push_back(r.ttft);
    setup.push_back(r.setup);
    tpot.push_back(r.tpot);
    e2e.push_back(r.e2e);
    itl.insert(itl.end(), r.itl.begin(), r.itl.end());
    s.output_tokens += r.output_tokens;
    s.prompt_tokens += std::max<int64_t>(0, r.prompt_tokens);
    if (meets_slo(r, slo)) ++s.good;
  }
  if (s.completed == 0) s.usage_from_server = false;
  s.top_errors.assign(errors.begin(), errors.end());
  std::stable_sort(s.top_errors.begin(), s.top_errors.end(),
                   [](auto& a, auto& b) { return a.second > b.second; });
  if (s.top_errors.size() > 3) s.top_errors.resize(3);
  s.ttft = distribution(std::move(ttft));
  s.tpot = distribution(std::move(tpot));
  s.itl = distribution(std::move(itl));
  s.e2e = distribution(std::move(e2e));
  s.setup = distribution(std::move(setup));
  if (s.wall_s > 0) {
    s.requests_per_s = s.completed / s.wall_s;
    s.output_tokens_per_s = s.output_tokens / s.wall_s;
    s.goodput_per_s = s.good / s.wall_s;
  }
  if (s.sent > 0) {
    s.error_rate = (double)s.failed / s.sent;
    s.timeout_rate = (double)s.timed_out / s.sent;
    s.mean_send_lag = lag_sum / s.sent;
  }
  if (s.sent > 1 && last_send > first_send)
    s.achieved_rate = (s.sent - 1) / (last_send - first_send);
  return s;
}

}  // namespace shrike::loadtest
