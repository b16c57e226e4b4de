#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <vector>

#include "result_assertions.hpp"

namespace lanes::scenarios {

const char* Latency::type() const { return "latency"; }

const Attrs& Latency::attrs() const {
  static const Attrs a = {{"workload", Kind::workload, true}, {"phase", Kind::phase}, {"p99-max", Kind::duration},
                          {"slope-min", Kind::number},        {"slope-max", Kind::number}};
  return a;
}

// p99-max: the p99 of every request; slope-min, slope-max: the trend of the
// p99 through the run (ms per second, first quarter to last), which tells a
// queue that grows without bound (large and positive) from a flat one
// (near 0). At least one of them.
void Latency::check(const ResultContext& ctx, reports::Assertion& out) const {
  const auto& st = ctx.step;
  std::vector<std::string> want;
  if (st.has("p99-max")) want.push_back(fmt::format("p99 ≤ {} ms", st.duration("p99-max").count()));
  if (st.has("slope-min")) want.push_back(fmt::format("p99 slope ≥ {} ms/s", st.num("slope-min")));
  if (st.has("slope-max")) want.push_back(fmt::format("p99 slope ≤ {} ms/s", st.num("slope-max")));
  out.expected = want.empty() ? std::string("p99-max=, slope-min= or slope-max=") : fmt::format("{}", fmt::join(want, ", "));
  const auto* w = ctx.workload();
  if (!w) return nothing_measured(out, "the workload did not run");
  if (want.empty()) {
    out.measured = "nothing to check";
    out.message = "the latency assertion names none of p99-max, slope-min, slope-max";
    return;
  }
  double p99 = ResultContext::figure(*w, "p99_ms"), slope = ResultContext::figure(*w, "p99_slope_ms_per_s");
  out.measured = fmt::format("p50 {:.2f} ms, p99 {:.2f} ms, p99 slope {:.1f} ms/s", ResultContext::figure(*w, "p50_ms"),
                             p99, slope);
  bool ok = ResultContext::figure(*w, "requests") > 0;
  if (st.has("p99-max")) ok = ok && p99 <= static_cast<double>(st.duration("p99-max").count());
  if (st.has("slope-min")) ok = ok && slope >= st.num("slope-min");
  if (st.has("slope-max")) ok = ok && slope <= st.num("slope-max");
  out.passed = ok;
}

}  // namespace lanes::scenarios
