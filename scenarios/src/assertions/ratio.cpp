#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "lanes/scenarios/runner.hpp"
#include "lanes/scenarios/steady.hpp"
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
  // latency-ratio's also: the p99 compared (the last quarter's, or a typical second's)
  static const Attrs latency = [] {
    Attrs l = a;
    l.push_back({"figure", Kind::choice, false, "p99_final_ms|p99_typical_ms"});
    return l;
  }();
  return of_ == Of::latency ? latency : a;
}

namespace {

// Why BASE (the workload in the baseline phase) is no baseline, if it is
// not: its steady rate filled less than kValidBaselineShare of its line.
std::optional<std::string> invalid_baseline(const reports::WorkloadResult& base, const std::string& phase) {
  auto share = base.figures.find("line_share");
  if (share == base.figures.end() || !share->is_number() || share->get<double>() >= kValidBaselineShare)
    return std::nullopt;
  auto fig = ResultContext::figure;
  std::string causes;
  if (fig(base, "retransmits") > 0) causes += fmt::format(", {:.0f} retransmitted segments", fig(base, "retransmits"));
  if (base.figures.contains("steady_to_s")) {
    double ramp = fig(base, "steady_from_s") - base.start_s, tail = base.end_s - fig(base, "steady_to_s");
    causes += fmt::format(", {:.1f} s of ramp and {:.1f} s of tail left out", std::max(0.0, ramp), std::max(0.0, tail));
  }
  if (!base.figures.value("steady_found", true)) causes += ", too short for a steady window";
  return fmt::format("invalid baseline: {} in {} filled {:.0f}% of its line ({:.3f} of {:.3f} Gbit/s at the steady rate; "
                     "a baseline must fill {:.0f}%){}",
                     base.name, phase, 100 * share->get<double>(), fig(base, "throughput_gbps"), fig(base, "line_gbps"),
                     100 * kValidBaselineShare, causes);
}

}  // namespace

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
    if (auto invalid = invalid_baseline(*bw, a.str("baseline"))) {
      out.expected = bounds_text(a);
      out.measured = fmt::format("{:.2f}, invalid baseline", ratio);
      out.message = *invalid;
      out.passed = false;
      return;
    }
  } else if (of_ == Of::busbw) {
    double b = fig(*bw, "busbw_gbps");
    ratio = b > 0 ? fig(*w, "busbw_gbps") / b : 0;
    out.message = fmt::format("busbw {:.3f} Gbit/s against {:.3f} Gbit/s", fig(*w, "busbw_gbps"), b);
  } else if (of_ == Of::latency) {
    std::string key = a.str("figure", "p99_final_ms");
    double here = fig(*w, key.c_str());
    ratio = here > 0 ? fig(*bw, key.c_str()) / here : 0;
    out.message = fmt::format("{} p99 {:.1f} ms against {:.1f} ms", key == "p99_final_ms" ? "final" : "typical second's",
                              here, fig(*bw, key.c_str()));
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
