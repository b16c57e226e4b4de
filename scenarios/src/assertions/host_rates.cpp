#include "host_rates.hpp"

#include "lanes/scenarios/runner.hpp"

namespace lanes::scenarios {

std::optional<double> mark_time(const LiveContext& ctx, const std::string& ref) {
  TimeRef r;
  if (!parse_timeref(ref, r)) return std::nullopt;
  auto it = ctx.marks.find(r.mark);
  if (it == ctx.marks.end()) return std::nullopt;
  return it->second + static_cast<double>(r.offset.count()) / 1000.0;
}

double HostRates::mean(const std::vector<double>& series, double interval_s, double from, double to) {
  reports::Series s;
  s.interval_s = interval_s;
  s.values = series;
  return window_mean(s, from, to);
}

HostRates host_rates(const std::vector<reports::Series>& series, const std::string& host, const std::string& dir) {
  HostRates out;
  for (const auto& x : series) {
    if (x.host != host || x.direction != dir) continue;
    out.interval_s = x.interval_s;
    out.nics.push_back("nic" + std::to_string(x.nic));
    out.per_nic.push_back(x.values);
    if (out.total.size() < x.values.size()) out.total.resize(x.values.size(), 0.0);
    for (size_t i = 0; i < x.values.size(); ++i) out.total[i] += x.values[i];
  }
  return out;
}

}  // namespace lanes::scenarios
