#pragma once
// Open-loop load: when requests arrive, whatever the answers do. A data
// loader asks at its own rate; when that rate is more than the network
// carries, requests queue and their latency grows without bound — the
// collapse a closed loop (each connection waiting for its answer) hides.
// Used by lanes-traffic's fetch --rate and by the dataload figures.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace lanes::scenarios {

enum class Arrival { constant, poisson };

// The arrival times (seconds from 0) of requests at RATE per second during
// DURATION seconds: evenly spaced, or a Poisson process (exponential gaps
// of mean 1/RATE) drawn from SEED.
inline std::vector<double> arrival_times(double rate, double duration, Arrival kind, uint64_t seed) {
  std::vector<double> out;
  if (rate <= 0 || duration <= 0) return out;
  if (kind == Arrival::constant) {
    auto n = static_cast<size_t>(std::floor(rate * duration));
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) out.push_back(static_cast<double>(i) / rate);
    return out;
  }
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);
  for (double t = gap(rng); t < duration; t += gap(rng)) out.push_back(t);
  return out;
}

struct LatencyTrend {
  std::vector<double> p99_per_s;  // p99 of the requests issued in each second (0 where none)
  double slope_ms_per_s = 0;      // least-squares slope of p99_per_s over the seconds that had requests
  double p99_first_ms = 0;        // p99 of the requests issued in the first quarter of the run
  double p99_final_ms = 0;        // and in the last quarter
  // the median of p99_per_s over the seconds that had requests: a typical
  // second's p99, which one second's stall of a busy machine does not move
  double p99_typical_ms = 0;
};

inline double p99_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::ceil(0.99 * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

// ISSUE_S[i] is when request i was issued, LATENCY_MS[i] how long it took
// (issue to last byte); DURATION_S the issuing period.
inline LatencyTrend latency_trend(const std::vector<double>& issue_s, const std::vector<double>& latency_ms,
                                  double duration_s) {
  LatencyTrend t;
  size_t secs = static_cast<size_t>(std::ceil(std::max(duration_s, 0.0)));
  std::vector<std::vector<double>> per(secs), first, last;
  std::vector<double> q1, q4;
  for (size_t i = 0; i < issue_s.size() && i < latency_ms.size(); ++i) {
    double s = issue_s[i];
    if (s < 0 || secs == 0) continue;
    per[std::min(static_cast<size_t>(s), secs - 1)].push_back(latency_ms[i]);
    if (s < duration_s / 4) q1.push_back(latency_ms[i]);
    if (s >= duration_s * 3 / 4) q4.push_back(latency_ms[i]);
  }
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t k = 0; k < secs; ++k) {
    double p = p99_of(per[k]);
    t.p99_per_s.push_back(p);
    if (per[k].empty()) continue;
    double x = static_cast<double>(k);
    n += 1, sx += x, sy += p, sxx += x * x, sxy += x * p;
  }
  if (n >= 2 && n * sxx - sx * sx != 0) t.slope_ms_per_s = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  t.p99_first_ms = p99_of(q1);
  t.p99_final_ms = p99_of(q4);
  std::vector<double> seconds;
  for (size_t k = 0; k < secs; ++k)
    if (!per[k].empty()) seconds.push_back(t.p99_per_s[k]);
  if (!seconds.empty()) {
    std::sort(seconds.begin(), seconds.end());
    size_t m = seconds.size() / 2;
    t.p99_typical_ms = seconds.size() % 2 ? seconds[m] : (seconds[m - 1] + seconds[m]) / 2;
  }
  return t;
}

}  // namespace lanes::scenarios
