#include <fmt/format.h>

#include "host_rates.hpp"
#include "lanes/scenarios/runner.hpp"
#include "lanes/scenarios/steady.hpp"
#include "live_assertions.hpp"

namespace lanes::scenarios {

const char* RateRatio::type() const { return "rate-ratio"; }

const Attrs& RateRatio::attrs() const {
  static const Attrs a = {{"host", Kind::host, true},     {"direction", Kind::choice, false, "rx|tx"},
                          {"from", Kind::timeref, true},  {"to", Kind::timeref, true},
                          {"base-from", Kind::timeref, true}, {"base-to", Kind::timeref, true},
                          {"min", Kind::number},          {"max", Kind::number}};
  return a;
}

reports::Assertion RateRatio::check(const Step& st, LiveContext& ctx) const {
  reports::Assertion a;
  std::string host = st.str("host");
  a.name = std::string(type()) + " " + host;
  a.expected = bounds_text(st);
  auto from = mark_time(ctx, st.str("from")), to = mark_time(ctx, st.str("to"));
  auto bfrom = mark_time(ctx, st.str("base-from")), bto = mark_time(ctx, st.str("base-to"));
  if (!from || !to || !bfrom || !bto) {
    a.measured = "a mark of its windows was never set";
    return a;
  }
  a.windows = {{host, *bfrom, *bto, "base"}, {host, *from, *to, "measured"}};
  auto r = host_rates(ctx.series(), host, st.str("direction", "rx"));
  double cur = HostRates::mean(r.total, r.interval_s, *from, *to);
  double base = HostRates::mean(r.total, r.interval_s, *bfrom, *bto);
  double ratio = base > 0 ? cur / base : 0;
  a.measured = fmt::format("{:.2f} ({:.3f} Gbit/s against {:.3f})", ratio, cur, base);
  a.passed = base > 0 && within_bounds(st, ratio);
  ctx.figures["rate_ratio_" + host] = ratio;
  // the base window must fill the host's line, or the ratio measured the
  // machine (a counter's full line: steady.hpp)
  double line = 0;
  if (int n = ctx.topo.find_node(host); n >= 0) line = host_line_bps(ctx.topo.nodes[static_cast<size_t>(n)]);
  double share = line_share(base * 1e9, line, false);
  if (line > 0 && share < kValidBaselineShare) {
    a.passed = false;
    a.measured += ", invalid baseline";
    a.message = fmt::format("invalid baseline: {} {} filled {:.0f}% of its line ({:.3f} of {:.3f} Gbit/s) from {} to {}; "
                            "a baseline must fill {:.0f}%",
                            host, st.str("direction", "rx"), 100 * share, base, line / 1e9, st.str("base-from"),
                            st.str("base-to"), 100 * kValidBaselineShare);
  }
  return a;
}

}  // namespace lanes::scenarios
