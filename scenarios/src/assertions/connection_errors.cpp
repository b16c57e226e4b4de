#include <fmt/format.h>

#include "result_assertions.hpp"

namespace lanes::scenarios {

const char* ConnectionErrors::type() const { return "connection-errors"; }

const Attrs& ConnectionErrors::attrs() const {
  static const Attrs a = {{"workload", Kind::workload}, {"phase", Kind::phase}, {"max", Kind::integer}};
  return a;
}

void ConnectionErrors::check(const ResultContext& ctx, reports::Assertion& out) const {
  if (ctx.workloads.empty()) return nothing_measured(out, "no workload ran");
  int64_t errors = 0;
  for (const auto* x : ctx.workloads) errors += static_cast<int64_t>(ResultContext::figure(*x, "connection_errors"));
  int max = ctx.step.integer("max", 0);
  out.expected = fmt::format("≤ {}", max);
  out.measured = std::to_string(errors);
  out.passed = errors <= max;
  if (!ctx.step.has("workload")) out.name += " (" + std::to_string(ctx.workloads.size()) + " workloads)";
}

}  // namespace lanes::scenarios
