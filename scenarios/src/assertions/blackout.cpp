#include <fmt/format.h>

#include "result_assertions.hpp"

namespace lanes::scenarios {

const char* Blackout::type() const { return "blackout"; }

const Attrs& Blackout::attrs() const {
  static const Attrs a = {{"workload", Kind::workload, true}, {"phase", Kind::phase}, {"max", Kind::duration},
                          {"min", Kind::duration}};
  return a;
}

void Blackout::check(const ResultContext& ctx, reports::Assertion& out) const {
  const auto* w = ctx.workload();
  if (!w) return nothing_measured(out, "the probe did not run");
  double worst = ResultContext::figure(*w, "blackout_ms");
  auto lo = ctx.step.duration("min", std::chrono::milliseconds(-1)), hi = ctx.step.duration("max", std::chrono::milliseconds(-1));
  out.expected = (lo.count() >= 0 ? fmt::format("≥ {} ms ", lo.count()) : "") +
                 (hi.count() >= 0 ? fmt::format("≤ {} ms", hi.count()) : "");
  out.measured = fmt::format("{:.0f} ms (worst path {}, {} probes lost)", worst,
                             w->figures.value("worst_path", std::string("-")), w->figures.value("lost", uint64_t{0}));
  out.passed = (lo.count() < 0 || worst >= static_cast<double>(lo.count())) &&
               (hi.count() < 0 || worst <= static_cast<double>(hi.count()));
}

}  // namespace lanes::scenarios
