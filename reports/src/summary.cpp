#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>

#include "lanes/reports/writers.hpp"

namespace lanes::reports {

void terminal_summary(const RunResult& r, const std::string& dir, std::ostream& out) {
  out << "\n";
  for (const auto& s : r.scenarios) {
    int failed = 0;
    for (const auto& a : s.assertions) failed += !a.passed;
    out << fmt::format("{} {}  ({} of {} assertions, {:.1f} s)\n", s.passed ? "PASS" : "FAIL", s.name,
                       s.assertions.size() - static_cast<size_t>(failed), s.assertions.size(), s.duration_s);
    for (const auto& a : s.assertions)
      out << fmt::format("  {} {}{}: {} (expected {}){}\n", a.passed ? "✓" : "✗", a.name,
                         a.phase.empty() ? "" : " [" + a.phase + "]", a.measured, a.expected,
                         a.message.empty() || a.passed ? "" : " — " + a.message);
    if (!s.error.empty()) out << "  ✗ could not run: " << s.error << "\n";
  }
  out << fmt::format("\n{}: {} scenarios, {} of {} assertions passed in {:.1f} s\n",
                     r.passed() ? "PASSED" : "FAILED", r.scenarios.size(), r.assertions_total() - r.assertions_failed(),
                     r.assertions_total(), r.duration_s);
  if (!dir.empty()) out << "report: " << dir << "/report.html (results.json, junit.xml beside it)\n";
}

void compare_text(const RunResult& a, const std::string& an, const RunResult& b, const std::string& bn,
                  std::ostream& out) {
  out << fmt::format("A: {} ({})\nB: {} ({})\n\n", an, a.started, bn, b.started);
  std::map<std::string, std::pair<const ScenarioResult*, const ScenarioResult*>> both;
  for (const auto& s : a.scenarios) both[s.name].first = &s;
  for (const auto& s : b.scenarios) both[s.name].second = &s;
  int differ = 0;
  for (const auto& [name, p] : both) {
    out << name << "\n";
    std::map<std::string, std::pair<const Assertion*, const Assertion*>> as;
    std::vector<std::string> order;
    for (int side = 0; side < 2; ++side) {
      const auto* s = side ? p.second : p.first;
      if (!s) continue;
      for (const auto& x : s->assertions) {
        std::string k = x.name + (x.phase.empty() ? "" : " [" + x.phase + "]");
        if (!as.count(k)) order.push_back(k);
        (side ? as[k].second : as[k].first) = &x;
      }
    }
    for (const auto& k : order) {
      auto [x, y] = as[k];
      bool diff = !x || !y || x->passed != y->passed || x->measured != y->measured;
      differ += diff;
      auto v = [](const Assertion* z) { return z ? fmt::format("{} {}", z->passed ? "✓" : "✗", z->measured) : std::string("—"); };
      out << fmt::format("  {} {:<44} A: {:<30} B: {}\n", diff ? "≠" : " ", k, v(x), v(y));
    }
    // the workloads' key figures
    std::map<std::string, std::pair<const WorkloadResult*, const WorkloadResult*>> ws;
    std::vector<std::string> worder;
    for (int side = 0; side < 2; ++side) {
      const auto* s = side ? p.second : p.first;
      if (!s) continue;
      for (const auto& ph : s->phases)
        for (const auto& w : ph.workloads) {
          std::string k = ph.name + "/" + w.name;
          if (!ws.count(k)) worder.push_back(k);
          (side ? ws[k].second : ws[k].first) = &w;
        }
    }
    auto fig = [](const WorkloadResult* w) -> std::string {
      if (!w) return "—";
      const auto& f = w->figures;
      if (f.contains("throughput_gbps"))
        return fmt::format("{:.3f} Gbit/s, {:.2f} s", f.value("throughput_gbps", 0.0), f.value("seconds", 0.0));
      if (f.contains("blackout_ms")) return fmt::format("blackout {:.0f} ms", f.value("blackout_ms", 0.0));
      return fmt::format("p99 {:.1f} ms, {:.2f} s", f.value("p99_ms", 0.0), f.value("seconds", 0.0));
    };
    for (const auto& k : worder) {
      auto [x, y] = ws[k];
      std::string fx = fig(x), fy = fig(y);
      out << fmt::format("  {} {:<44} A: {:<30} B: {}\n", fx == fy ? " " : "~", k, fx, fy);
    }
  }
  out << fmt::format("\n{} assertions differ (≠); ~ marks workload figures that differ\n", differ);
}

void write_all(const RunResult& r, const std::string& dir) {
  std::filesystem::create_directories(dir);
  write_results_json(r, dir + "/results.json");
  auto put = [&](const std::string& name, const std::string& text) {
    std::ofstream o(dir + "/" + name, std::ios::trunc);
    o << text;
    if (!o) throw std::runtime_error("writing " + dir + "/" + name + " failed");
  };
  put("junit.xml", junit_xml(r));
  put("report.html", html_report(r));
}

}  // namespace lanes::reports
