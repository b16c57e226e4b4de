// Assertions on measured results (the ones that need no live testbed).

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

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

namespace {

std::string num(double v) { return fmt::format("{:.2f}", v); }

double fig(const WorkloadResult& w, const char* k) {
  auto it = w.figures.find(k);
  return it != w.figures.end() && it->is_number() ? it->get<double>() : 0.0;
}

}  // namespace

Assertion evaluate(const Step& a, const ScenarioResult& r, const std::string& current_phase) {
  Assertion out;
  out.line = a.line;
  out.phase = a.has("phase") ? a.str("phase") : current_phase;
  out.name = a.type + (a.has("workload") ? " " + a.str("workload") : "");
  const PhaseResult* ph = r.phase(out.phase);
  auto missing = [&](const std::string& what) {
    out.passed = false;
    out.measured = "nothing";
    out.message = what;
    return out;
  };
  // the workloads it looks at: one, or every workload of the phase (or of all phases)
  std::vector<const WorkloadResult*> ws;
  for (const auto& p : r.phases) {
    if (!out.phase.empty() && p.name != out.phase) continue;
    for (const auto& w : p.workloads)
      if (!a.has("workload") || w.name == a.str("workload")) ws.push_back(&w);
  }
  const WorkloadResult* w = ws.empty() ? nullptr : ws.front();

  if (a.type == "throughput-ratio" || a.type == "completion-ratio") {
    const PhaseResult* base = r.phase(a.str("baseline"));
    const WorkloadResult* bw = base ? base->workload(a.str("workload")) : nullptr;
    out.name += " " + out.phase + " vs " + a.str("baseline");
    if (!ph || !w || !bw) return missing("the workload did not run in both phases");
    double ratio;
    if (a.type == "throughput-ratio") {
      double b = fig(*bw, "throughput_gbps");
      ratio = b > 0 ? fig(*w, "throughput_gbps") / b : 0;
      out.message = fmt::format("{:.3f} Gbit/s against {:.3f} Gbit/s", fig(*w, "throughput_gbps"), b);
    } else {
      double t = fig(*w, "seconds");
      ratio = t > 0 ? fig(*bw, "seconds") / t : 0;
      out.message = fmt::format("{:.2f} s against {:.2f} s", t, fig(*bw, "seconds"));
    }
    out.expected = bounds_text(a);
    out.measured = num(ratio);
    out.passed = within_bounds(a, ratio);
    return out;
  }
  if (a.type == "nic-share") {
    if (!w) return missing("the workload did not run");
    size_t n = w->nic_share.size();
    double expected = a.num("expected", n ? 100.0 / static_cast<double>(n) : 0);
    double tol = a.num("tolerance", 2.5);
    out.expected = fmt::format("each NIC {:.1f}% ± {:.1f}", expected, tol);
    std::string m;
    bool ok = n > 0;
    for (double s : w->nic_share) {
      m += (m.empty() ? "" : " ") + fmt::format("{:.1f}%", s);
      ok = ok && std::fabs(s - expected) <= tol;
    }
    out.measured = m.empty() ? "no NIC counters" : m;
    out.passed = ok;
    return out;
  }
  if (a.type == "connection-errors") {
    if (ws.empty()) return missing("no workload ran");
    int64_t errors = 0;
    for (const auto* x : ws) errors += static_cast<int64_t>(fig(*x, "connection_errors"));
    out.expected = fmt::format("≤ {}", a.integer("max", 0));
    out.measured = std::to_string(errors);
    out.passed = errors <= a.integer("max", 0);
    if (!a.has("workload")) out.name += " (" + std::to_string(ws.size()) + " workloads)";
    return out;
  }
  if (a.type == "bytes-verified") {
    std::string bad;
    int n = 0;
    uint64_t total = 0;
    for (const auto* x : ws) {
      if (!x->figures.contains("bytes_verified")) continue;  // probes carry no stream
      ++n;
      total += x->figures.value("verified_bytes", uint64_t{0});
      if (!x->figures.value("bytes_verified", false))
        bad += (bad.empty() ? "" : ", ") + x->name + " (" + x->figures.value("verify_note", std::string("?")) + ")";
    }
    if (n == 0) return missing("no workload with a verified stream ran");
    if (!a.has("workload")) out.name += " (" + std::to_string(n) + " workloads)";
    out.expected = "every byte sent arrived and matched the pattern";
    out.measured = bad.empty() ? fmt::format("{} bytes verified", total) : "not verified: " + bad;
    out.passed = bad.empty();
    return out;
  }
  if (a.type == "blackout") {
    if (!w) return missing("the probe did not run");
    double worst = fig(*w, "blackout_ms");
    auto lo = a.duration("min", std::chrono::milliseconds(-1)), hi = a.duration("max", std::chrono::milliseconds(-1));
    out.expected = (lo.count() >= 0 ? fmt::format("≥ {} ms ", lo.count()) : "") +
                   (hi.count() >= 0 ? fmt::format("≤ {} ms", hi.count()) : "");
    out.measured = fmt::format("{:.0f} ms (worst path {}, {} probes lost)", worst,
                               w->figures.value("worst_path", std::string("-")),
                               w->figures.value("lost", uint64_t{0}));
    out.passed = (lo.count() < 0 || worst >= static_cast<double>(lo.count())) &&
                 (hi.count() < 0 || worst <= static_cast<double>(hi.count()));
    return out;
  }
  if (a.type == "latency") {
    if (!w) return missing("the workload did not run");
    double p99 = fig(*w, "p99_ms");
    out.expected = fmt::format("p99 ≤ {} ms", a.duration("p99-max").count());
    out.measured = fmt::format("p50 {:.2f} ms, p99 {:.2f} ms", fig(*w, "p50_ms"), p99);
    out.passed = p99 <= static_cast<double>(a.duration("p99-max").count()) && fig(*w, "requests") > 0;
    return out;
  }
  if (a.type == "completion-time") {
    if (!w) return missing("the workload did not run");
    double s = fig(*w, "seconds");
    out.expected = fmt::format("≤ {:.1f} s", a.duration("max").count() / 1000.0);
    out.measured = fmt::format("{:.2f} s", s);
    out.passed = s > 0 && s * 1000 <= static_cast<double>(a.duration("max").count());
    return out;
  }
  out.passed = false;
  out.message = "assert type '" + a.type + "' needs the running testbed";
  return out;
}

}  // namespace lanes::scenarios
