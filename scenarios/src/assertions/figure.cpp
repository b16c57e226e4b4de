#include <fmt/format.h>

#include <cmath>

#include "result_assertions.hpp"

namespace lanes::scenarios {

const char* FigureBound::type() const { return "figure"; }

const Attrs& FigureBound::attrs() const {
  static const Attrs a = {{"workload", Kind::workload, true}, {"phase", Kind::phase}, {"figure", Kind::name, true},
                          {"min", Kind::number},              {"max", Kind::number}};
  return a;
}

// A workload's figure (a number its plug-in reports, as results.json has
// it) within min= and max=; a figure the workload does not have measured
// nothing, and fails.
void FigureBound::check(const ResultContext& ctx, reports::Assertion& out) const {
  const auto* w = ctx.workload();
  if (!w) return nothing_measured(out, "the workload did not run");
  std::string key = ctx.step.str("figure");
  auto it = w->figures.find(key);
  bool lo = ctx.step.has("min"), hi = ctx.step.has("max");
  double min = ctx.step.num("min"), max = ctx.step.num("max");
  out.expected = lo && hi ? fmt::format("{} in {:g}..{:g}", key, min, max)
                 : lo     ? fmt::format("{} ≥ {:g}", key, min)
                 : hi     ? fmt::format("{} ≤ {:g}", key, max)
                          : fmt::format("{} measured", key);
  if (it == w->figures.end() || !(it->is_number() || it->is_boolean()))
    return nothing_measured(out, fmt::format("the workload has no figure {}", key));
  double v = it->is_boolean() ? (it->get<bool>() ? 1.0 : 0.0) : it->get<double>();
  out.measured = fmt::format("{:g}", v);
  out.passed = std::isfinite(v) && (!lo || v >= min) && (!hi || v <= max);
}

}  // namespace lanes::scenarios
