#include <fmt/format.h>

#include <cmath>

#include "host_rates.hpp"
#include "lanes/scenarios/runner.hpp"
#include "live_assertions.hpp"

namespace lanes::scenarios {

const char* RateShare::type() const { return "rate-share"; }

const Attrs& RateShare::attrs() const {
  static const Attrs a = {{"host", Kind::host, true},       {"direction", Kind::choice, false, "rx|tx"},
                          {"from", Kind::timeref, true},    {"to", Kind::timeref, true},
                          {"expected", Kind::number},       {"tolerance", Kind::number},
                          {"min-gbps", Kind::number}};
  return a;
}

reports::Assertion RateShare::check(const Step& st, LiveContext& ctx) const {
  reports::Assertion a;
  std::string host = st.str("host");
  a.name = std::string(type()) + " " + host;
  auto from = mark_time(ctx, st.str("from")), to = mark_time(ctx, st.str("to"));
  auto r = host_rates(ctx.series(), host, st.str("direction", "rx"));
  size_t n = r.per_nic.size();
  double expected = st.num("expected", n ? 100.0 / static_cast<double>(n) : 0);
  double tol = st.num("tolerance", 3);
  a.expected = fmt::format("each NIC {:.1f}% ± {:.1f} of the rate, at least {} Gbit/s", expected, tol,
                           st.num("min-gbps", 0.01));
  if (!from || !to) {
    a.measured = "a mark of its window was never set";
    return a;
  }
  a.windows = {{host, *from, *to, "shares"}};
  std::vector<double> means;
  double total = 0;
  for (const auto& s : r.per_nic) total += means.emplace_back(HostRates::mean(s, r.interval_s, *from, *to));
  // the shares must be of a workload's traffic: BFD and BGP alone (tens of
  // kbit/s) would pass them, e.g. in a window after the transfer ended
  double min_gbps = st.num("min-gbps", 0.01);
  bool ok = n > 0 && total >= min_gbps;
  if (n > 0 && total < min_gbps)
    a.message = fmt::format("{:.4f} Gbit/s in the window, under min-gbps {}: no workload's traffic to share", total,
                            min_gbps);
  std::string m;
  for (size_t i = 0; i < n; ++i) {
    double share = total > 0 ? 100.0 * means[i] / total : 0;
    m += (m.empty() ? "" : " ") + fmt::format("{} {:.1f}%", r.nics[i], share);
    ok = ok && std::fabs(share - expected) <= tol;
    ctx.figures[fmt::format("rate_share_{}_{}", host, r.nics[i])] = share;
  }
  a.measured = m.empty() ? "no NIC counters" : m;
  a.passed = ok;
  return a;
}

}  // namespace lanes::scenarios
