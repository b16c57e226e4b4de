#include <fmt/format.h>

#include "result_assertions.hpp"

namespace lanes::scenarios {

const char* CompletionTime::type() const { return "completion-time"; }

const Attrs& CompletionTime::attrs() const {
  static const Attrs a = {{"workload", Kind::workload, true}, {"phase", Kind::phase}, {"max", Kind::duration, true}};
  return a;
}

void CompletionTime::check(const ResultContext& ctx, reports::Assertion& out) const {
  const auto* w = ctx.workload();
  if (!w) return nothing_measured(out, "the workload did not run");
  double s = ResultContext::figure(*w, "seconds");
  auto limit = ctx.step.duration("max");
  out.expected = fmt::format("≤ {:.1f} s", static_cast<double>(limit.count()) / 1000.0);
  out.measured = fmt::format("{:.2f} s", s);
  out.passed = s > 0 && s * 1000 <= static_cast<double>(limit.count());
}

}  // namespace lanes::scenarios
