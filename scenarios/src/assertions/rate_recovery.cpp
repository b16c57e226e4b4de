#include <fmt/format.h>

#include "host_rates.hpp"
#include "lanes/scenarios/runner.hpp"
#include "live_assertions.hpp"

namespace lanes::scenarios {

const char* RateRecovery::type() const { return "rate-recovery"; }

const Attrs& RateRecovery::attrs() const {
  static const Attrs a = {{"host", Kind::host, true},         {"direction", Kind::choice, false, "rx|tx"},
                          {"after", Kind::timeref, true},     {"base-from", Kind::timeref, true},
                          {"base-to", Kind::timeref, true},   {"fraction", Kind::number},
                          {"window", Kind::duration},         {"max", Kind::duration, true}};
  return a;
}

std::optional<double> recovery_time(const std::vector<double>& total, double interval_s, double after_s,
                                    double target, double window_s) {
  if (interval_s <= 0) return std::nullopt;
  auto first = static_cast<size_t>(std::max(0.0, after_s / interval_s));
  auto span = static_cast<size_t>(std::max(1.0, window_s / interval_s + 0.5));
  // sample i covers (i·interval, (i+1)·interval]: the window starting at
  // sample i is its first SPAN samples
  for (size_t i = first; i + span <= total.size(); ++i) {
    double sum = 0;
    for (size_t k = i; k < i + span; ++k) sum += total[k];
    if (sum / static_cast<double>(span) >= target)
      return std::max(0.0, static_cast<double>(i) * interval_s - after_s);
  }
  return std::nullopt;
}

reports::Assertion RateRecovery::check(const Step& st, LiveContext& ctx) const {
  reports::Assertion a;
  std::string host = st.str("host");
  double fraction = st.num("fraction", 0.95);
  double window = static_cast<double>(st.duration("window", std::chrono::milliseconds(500)).count()) / 1000.0;
  double max = static_cast<double>(st.duration("max", std::chrono::milliseconds(2000)).count()) / 1000.0;
  a.name = std::string(type()) + " " + host;
  a.expected = fmt::format("≥ {:.0f}% of the base rate within {:.1f} s of {}", fraction * 100, max, st.str("after"));
  auto after = mark_time(ctx, st.str("after"));
  auto bfrom = mark_time(ctx, st.str("base-from")), bto = mark_time(ctx, st.str("base-to"));
  if (!after || !bfrom || !bto) {
    a.measured = "a mark it reads was never set";
    return a;
  }
  a.windows = {{host, *bfrom, *bto, "base"}, {host, *after, *after + max, "recovery"}};
  auto r = host_rates(ctx.series(), host, st.str("direction", "rx"));
  double base = HostRates::mean(r.total, r.interval_s, *bfrom, *bto);
  auto t = recovery_time(r.total, r.interval_s, *after, fraction * base, window);
  if (!t) {
    a.measured = fmt::format("never back at {:.3f} Gbit/s (base {:.3f}) before the samples end", fraction * base, base);
    return a;
  }
  a.measured = fmt::format("{:.2f} s (base {:.3f} Gbit/s, {:.0f} ms windows)", *t, base, window * 1000);
  a.passed = base > 0 && *t <= max;
  ctx.figures["rate_recovery_s_" + host] = *t;
  return a;
}

}  // namespace lanes::scenarios
