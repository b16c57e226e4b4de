// Assertions on measured results: the step's plug-in (assertions/), over the
// phase and workloads the step names; and the helpers the plug-ins share.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "lanes/scenarios/result_assertion.hpp"
#include "lanes/scenarios/runner.hpp"

namespace lanes::scenarios {

using reports::Assertion;
using reports::PhaseResult;
using reports::ScenarioResult;
using reports::WorkloadResult;

double window_mean(const reports::Series& s, double from_s, double to_s) {
  if (s.values.empty() || s.interval_s <= 0 || to_s <= from_s) return 0;
  double sum = 0;
  int n = 0;
  for (size_t i = 0; i < s.values.size(); ++i) {
    double t = static_cast<double>(i + 1) * s.interval_s;  // sample i covers (t - interval, t]
    if (t > from_s && t <= to_s) sum += s.values[i], ++n;
  }
  return n ? sum / n : 0;
}

std::string bounds_text(const Step& a) {
  std::string lo = a.has("min") ? "≥ " + a.str("min") : "";
  std::string hi = a.has("max") ? "≤ " + a.str("max") : "";
  if (!lo.empty() && !hi.empty()) return lo + " and " + hi;
  return lo.empty() ? hi : lo;
}

bool within_bounds(const Step& a, double v) {
  if (a.has("min") && v < a.num("min")) return false;
  if (a.has("max") && v > a.num("max")) return false;
  return true;
}

double ResultContext::figure(const WorkloadResult& w, const char* key) {
  auto it = w.figures.find(key);
  return it != w.figures.end() && it->is_number() ? it->get<double>() : 0.0;
}

void nothing_measured(Assertion& out, const std::string& why) {
  out.passed = false;
  out.measured = "nothing";
  out.message = why;
}

Assertion evaluate(const Step& a, const ScenarioResult& r, const std::string& current_phase) {
  Assertion out;
  out.line = a.line;
  out.phase = a.has("phase") ? a.str("phase") : current_phase;
  out.name = a.type + (a.has("workload") ? " " + a.str("workload") : "");
  const ResultAssertion* plugin = find_result_assertion(a.type);
  if (!plugin) {
    out.passed = false;
    out.message = "assert type '" + a.type + "' needs the running testbed";
    return out;
  }
  // the workloads it looks at: one, or every workload of the phase (or of all phases)
  ResultContext ctx{a, r, r.phase(out.phase), {}};
  for (const auto& p : r.phases) {
    if (!out.phase.empty() && p.name != out.phase) continue;
    for (const auto& w : p.workloads)
      if (!a.has("workload") || w.name == a.str("workload")) ctx.workloads.push_back(&w);
  }
  plugin->check(ctx, out);
  return out;
}

}  // namespace lanes::scenarios
