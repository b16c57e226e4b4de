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
                          {"expected", Kind::number},       {"tolerance", Kind::number}};
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
  a.expected = fmt::format("each NIC {:.1f}% ± {:.1f} of the rate", expected, tol);
  if (!from || !to) {
    a.measured = "a mark of its window was never set";
    return a;
  }
  a.windows = {{host, *from, *to, "shares"}};
  std::vector<double> means;
  double total = 0;
  for (const auto& s : r.per_nic) total += means.emplace_back(HostRates::mean(s, r.interval_s, *from, *to));
  bool ok = n > 0 && total > 0;
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
