#include <fmt/format.h>

#include "lanes/scenarios/runner.hpp"
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
  std::string host = st.str("host"), dir = st.str("direction", "rx");
  a.name = std::string(type()) + " " + host;
  auto at = [&](const std::string& ref) {
    TimeRef r;
    parse_timeref(ref, r);
    double t = ctx.marks.count(r.mark) ? ctx.marks.at(r.mark) : -1.0;
    return t + static_cast<double>(r.offset.count()) / 1000.0;
  };
  auto series = ctx.series();
  // the sum of the host's NICs in that direction ("h1 nic0 rx", ...)
  auto mean = [&](double from, double to) {
    double sum = 0;
    for (const auto& x : series)
      if (x.name.rfind(host + " nic", 0) == 0 && x.name.size() >= 2 && x.name.substr(x.name.size() - 2) == dir)
        sum += window_mean(x, from, to);
    return sum;
  };
  double cur = mean(at(st.str("from")), at(st.str("to")));
  double base = mean(at(st.str("base-from")), at(st.str("base-to")));
  double ratio = base > 0 ? cur / base : 0;
  a.expected = bounds_text(st);
  a.measured = fmt::format("{:.2f} ({:.3f} Gbit/s against {:.3f})", ratio, cur, base);
  a.passed = base > 0 && within_bounds(st, ratio);
  ctx.figures["rate_ratio_" + host] = ratio;
  return a;
}

}  // namespace lanes::scenarios
