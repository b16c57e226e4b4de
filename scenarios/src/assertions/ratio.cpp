#include <fmt/format.h>

#include "lanes/scenarios/runner.hpp"
#include "result_assertions.hpp"

namespace lanes::scenarios {

const char* Ratio::type() const { return throughput_ ? "throughput-ratio" : "completion-ratio"; }

const Attrs& Ratio::attrs() const {
  static const Attrs a = {{"workload", Kind::workload, true}, {"phase", Kind::phase}, {"baseline", Kind::phase, true},
                          {"min", Kind::number},              {"max", Kind::number}};
  return a;
}

// throughput: this phase's rate over the baseline's; completion: the
// baseline's time over this phase's (above 1: faster here)
void Ratio::check(const ResultContext& ctx, reports::Assertion& out) const {
  const Step& a = ctx.step;
  const reports::PhaseResult* base = ctx.result.phase(a.str("baseline"));
  const reports::WorkloadResult* bw = base ? base->workload(a.str("workload")) : nullptr;
  const reports::WorkloadResult* w = ctx.workload();
  out.name += " " + out.phase + " vs " + a.str("baseline");
  if (!ctx.phase || !w || !bw) return nothing_measured(out, "the workload did not run in both phases");
  auto fig = ResultContext::figure;
  double ratio;
  if (throughput_) {
    double b = fig(*bw, "throughput_gbps");
    ratio = b > 0 ? fig(*w, "throughput_gbps") / b : 0;
    out.message = fmt::format("{:.3f} Gbit/s against {:.3f} Gbit/s", fig(*w, "throughput_gbps"), b);
  } else {
    double t = fig(*w, "seconds");
    ratio = t > 0 ? fig(*bw, "seconds") / t : 0;
    out.message = fmt::format("{:.2f} s against {:.2f} s", t, fig(*bw, "seconds"));
  }
  out.expected = bounds_text(a);
  out.measured = fmt::format("{:.2f}", ratio);
  out.passed = within_bounds(a, ratio);
}

}  // namespace lanes::scenarios
