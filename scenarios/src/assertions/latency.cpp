#include <fmt/format.h>

#include "result_assertions.hpp"

namespace lanes::scenarios {

const char* Latency::type() const { return "latency"; }

const Attrs& Latency::attrs() const {
  static const Attrs a = {{"workload", Kind::workload, true}, {"phase", Kind::phase}, {"p99-max", Kind::duration, true}};
  return a;
}

void Latency::check(const ResultContext& ctx, reports::Assertion& out) const {
  const auto* w = ctx.workload();
  if (!w) return nothing_measured(out, "the workload did not run");
  double p99 = ResultContext::figure(*w, "p99_ms");
  auto limit = ctx.step.duration("p99-max");
  out.expected = fmt::format("p99 ≤ {} ms", limit.count());
  out.measured = fmt::format("p50 {:.2f} ms, p99 {:.2f} ms", ResultContext::figure(*w, "p50_ms"), p99);
  out.passed = p99 <= static_cast<double>(limit.count()) && ResultContext::figure(*w, "requests") > 0;
}

}  // namespace lanes::scenarios
