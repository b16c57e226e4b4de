#include <fmt/format.h>

#include <cmath>

#include "lanes/testbed/impair.hpp"
#include "live_assertions.hpp"

namespace lanes::scenarios {

const char* ImpairmentLoss::type() const { return "impairment-loss"; }

const Attrs& ImpairmentLoss::attrs() const {
  static const Attrs a = {{"fault", Kind::mark, true}, {"loss", Kind::percent, true}, {"min-packets", Kind::integer}};
  return a;
}

// The clear-impair marked fault= recorded what lanes' program saw and
// dropped on each side while the impairment lasted (faults/impair.cpp).
// Each side must have seen min-packets= (1000) and lost the configured
// share of them within four standard deviations of the binomial count
// (sqrt(n p (1 - p)), plus one packet): an impairment that dropped
// nothing, or dropped at another rate, fails; chance does not.
reports::Assertion ImpairmentLoss::check(const Step& st, LiveContext& ctx) const {
  reports::Assertion a;
  std::string f = st.str("fault");
  a.name = std::string(type()) + " " + f;
  std::string why;
  double p = static_cast<double>(testbed::parse_probability(st.str("loss"), why).value_or(0)) / 1e6;
  int min_packets = st.integer("min-packets", 1000);
  a.expected = fmt::format("{} of each side's packets lost (± 4 σ), at least {} packets a side", st.str("loss"),
                           min_packets);
  auto it = ctx.faults.find(f);
  if (it == ctx.faults.end() || !it->second.contains("impairment") || it->second["impairment"].empty()) {
    a.measured = fmt::format("{} recorded no impairment counters (is it a clear-impair of an impair with loss=?)", f);
    return a;
  }
  bool ok = true;
  std::string m;
  for (const auto& [side, c] : it->second["impairment"].items()) {
    if (c.contains("error") || !c.contains("packets")) {
      ok = false;
      m += (m.empty() ? "" : "; ") + fmt::format("{} counters not read ({})", side, c.value("error", "none recorded"));
      continue;
    }
    double n = c.value("packets", 0.0), lost = c.value("lost", 0.0);
    double sigma = std::sqrt(n * p * (1 - p));
    bool side_ok = n >= min_packets && std::fabs(lost - p * n) <= 4 * sigma + 1;
    ok = ok && side_ok;
    m += (m.empty() ? "" : "; ") + fmt::format("{} {:.0f} of {:.0f} packets ({:.2f}%, expected {:.0f} ± {:.0f})", side,
                                               lost, n, n > 0 ? 100 * lost / n : 0.0, p * n, 4 * sigma + 1);
    ctx.figures[fmt::format("impairment_{}_{}_lost_pct", f, side)] = n > 0 ? 100 * lost / n : 0.0;
  }
  a.measured = m;
  a.passed = ok;
  return a;
}

}  // namespace lanes::scenarios
