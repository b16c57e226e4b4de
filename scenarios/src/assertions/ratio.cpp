#include <fmt/format.h>

#include "lanes/scenarios/runner.hpp"
#include "result_assertions.hpp"

namespace lanes::scenarios {

const char* Ratio::type() const {
  switch (of_) {
    case Of::throughput: return "throughput-ratio";
    case Of::completion: return "completion-ratio";
    case Of::busbw: return "busbw-ratio";
    case Of::latency: break;
  }
  return "latency-ratio";
}

const Attrs& Ratio::attrs() const {
  static const Attrs a = {{"workload", Kind::workload, true}, {"phase", Kind::phase}, {"baseline", Kind::phase, true},
                          {"min", Kind::number},              {"max", Kind::number}};
  return a;
}

void Ratio::check(const ResultContext& ctx, reports::Assertion& out) const {
  const Step& a = ctx.step;
  const reports::PhaseResult* base = ctx.result.phase(a.str("baseline"));
  const reports::WorkloadResult* bw = base ? base->workload(a.str("workload")) : nullptr;
  const reports::WorkloadResult* w = ctx.workload();
  out.name += " " + out.phase + " vs " + a.str("baseline");
  if (!ctx.phase || !w || !bw) return nothing_measured(out, "the workload did not run in both phases");
  auto fig = ResultContext::figure;
  double ratio;
  if (of_ == Of::throughput) {
    double b = fig(*bw, "throughput_gbps");
    ratio = b > 0 ? fig(*w, "throughput_gbps") / b : 0;
    out.message = fmt::format("{:.3f} Gbit/s against {:.3f} Gbit/s", fig(*w, "throughput_gbps"), b);
  } else if (of_ == Of::busbw) {
    double b = fig(*bw, "busbw_gbps");
    ratio = b > 0 ? fig(*w, "busbw_gbps") / b : 0;
    out.message = fmt::format("busbw {:.3f} Gbit/s against {:.3f} Gbit/s", fig(*w, "busbw_gbps"), b);
  } else if (of_ == Of::latency) {
    double here = fig(*w, "p99_final_ms");
    ratio = here > 0 ? fig(*bw, "p99_final_ms") / here : 0;
    out.message = fmt::format("final p99 {:.0f} ms against {:.0f} ms", here, fig(*bw, "p99_final_ms"));
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
