#include "lanes/scenarios/steady.hpp"

#include <algorithm>

namespace lanes::scenarios {

SteadyWindow steady_window(const std::vector<double>& samples) {
  SteadyWindow w;
  if (samples.empty()) return w;
  auto mean = [&](size_t a, size_t b) {
    double s = 0;
    for (size_t i = a; i <= b; ++i) s += samples[i];
    return s / static_cast<double>(b - a + 1);
  };
  w.last = samples.size() - 1;
  std::vector<double> sorted = samples;
  size_t p90 = (sorted.size() - 1) * 9 / 10;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(p90), sorted.end());
  w.plateau = sorted[p90];
  if (samples.size() < kSteadyMinSamples || w.plateau <= 0) {
    w.rate = mean(0, w.last);
    return w;
  }
  double reach = kSteadyReach * w.plateau;
  while (samples[w.first] < reach) ++w.first;  // the plateau itself reaches it
  while (samples[w.last] < reach) --w.last;
  w.rate = mean(w.first, w.last);
  w.found = true;
  return w;
}

double host_line_bps(const testbed::Node& host) {
  double sum = 0;
  for (const auto& nic : host.nics) sum += static_cast<double>(nic.rate_bps);
  return sum;
}

double host_line_bps(const testbed::Node& host, const std::string& direction) {
  using testbed::EgressMode;
  if (!host.job || host.nics.empty()) return host_line_bps(host);
  EgressMode m = host.job->egress;
  bool one = m == EgressMode::active_backup || (direction == "tx" && m == EgressMode::single);
  return one ? static_cast<double>(host.nics.front().rate_bps) : host_line_bps(host);
}

double line_share(double counter_bps, double line_bps, bool ipv6) {
  if (line_bps <= 0) return 0;
  double payload = (ipv6 ? 1428.0 : 1448.0) / 1514.0;
  return counter_bps / (line_bps * payload);
}

}  // namespace lanes::scenarios
