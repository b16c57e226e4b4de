#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>

#include "lanes/reports/compare.hpp"
#include "lanes/reports/writers.hpp"

namespace lanes::reports {

void terminal_summary(const RunResult& r, const std::string& dir, std::ostream& out) {
  out << "\n";
  for (const auto& s : r.scenarios) {
    if (!s.not_run.empty()) {
      out << fmt::format("NOT RUN {}: {}\n", s.name, s.not_run);
      continue;
    }
    int failed = 0;
    for (const auto& a : s.assertions) failed += !a.passed;
    out << fmt::format("{} {}  ({} of {} assertions, {:.1f} s)\n", s.passed ? "PASS" : "FAIL", s.name,
                       s.assertions.size() - static_cast<size_t>(failed), s.assertions.size(), s.duration_s);
    // the failed ones last, next to the verdict: a log cut to its head and
    // tail (CI's) still shows what failed
    for (bool passed : {true, false})
      for (const auto& a : s.assertions)
        if (a.passed == passed)
          out << fmt::format("  {} {}{}: {} (expected {}){}\n", a.passed ? "✓" : "✗", a.name,
                             a.phase.empty() ? "" : " [" + a.phase + "]", a.measured, a.expected,
                             a.message.empty() || a.passed ? "" : " — " + a.message);
    if (!s.error.empty()) out << "  ✗ could not run: " << s.error << "\n";
  }
  int skipped = r.not_run();
  bool none_ran = skipped == static_cast<int>(r.scenarios.size()) && skipped > 0;
  out << fmt::format("\n{}: {} scenarios{}, {} of {} assertions passed in {:.1f} s\n",
                     none_ran ? "NOT RUN" : r.passed() ? "PASSED" : "FAILED", r.scenarios.size(),
                     skipped ? fmt::format(" ({} not run here)", skipped) : "", r.assertions_total() - r.assertions_failed(),
                     r.assertions_total(), r.duration_s);
  // and once more, each on a line, after the verdict: a log that keeps
  // only its last lines (CI's) still says what failed
  for (const auto& s : r.scenarios) {
    for (const auto& a : s.assertions)
      if (!a.passed)
        out << fmt::format("  ✗ {}: {}{}: {} (expected {})\n", s.name, a.name,
                           a.phase.empty() ? "" : " [" + a.phase + "]", a.measured, a.expected);
    if (!s.error.empty() && s.not_run.empty()) out << fmt::format("  ✗ {}: {}\n", s.name, s.error);
  }
  if (!dir.empty()) out << "report: " << dir << "/report.html (results.json, junit.xml beside it)\n";
}

namespace {

// the mark and the word of a change, for the terminal
std::string mark(Change c) {
  switch (c) {
    case Change::flip: return "✗ FLIP ";
    case Change::fixed: return "✓ FIXED";
    case Change::drift: return "~ drift";
    case Change::only_a:
    case Change::only_b: return "? once ";
    case Change::same: break;
  }
  return "       ";
}

std::string moved_text(const CompareRow& r) {
  return r.moved && *r.moved != 0 ? fmt::format(" ({:+.1f}%)", 100 * *r.moved) : "";
}

}  // namespace

void compare_text(const Comparison& c, const std::string& an, const std::string& a_started, const std::string& bn,
                  const std::string& b_started, std::ostream& out) {
  out << fmt::format("A: {} ({})\nB: {} ({})\n\nconfiguration (≠ where they differ)\n", an, a_started, bn, b_started);
  int same = 0;
  for (const auto& r : c.config) {
    bool always = r.field == "lanes" || r.field == "kernel" || r.field == "gobgpd";
    if (!r.differs && !always) {
      ++same;
      continue;
    }
    out << fmt::format("  {} {:<46} A: {:<28} B: {}\n", r.differs ? "≠" : " ", r.field, r.a, r.b);
  }
  if (same) out << fmt::format("  and {} more settings, the same in both\n", same);
  std::string scenario;
  for (const auto& r : c.assertions) {
    if (r.scenario != scenario) out << "\n" << (scenario = r.scenario) << "\n";
    auto v = [](const std::string& m, bool passed, bool present) {
      return present ? fmt::format("{} {}", passed ? "✓" : "✗", m) : std::string("—");
    };
    out << fmt::format("  {} {:<44} A: {:<30} B: {}{}\n", mark(r.change), r.key,
                       v(r.a, r.a_passed, r.change != Change::only_b), v(r.b, r.b_passed, r.change != Change::only_a),
                       moved_text(r));
  }
  bool header = false;
  for (const auto& r : c.figures) {
    if (r.change == Change::same) continue;
    if (!header) out << fmt::format("\nworkload figures that moved beyond {:.0f}%\n", 100 * c.thresholds.drift);
    header = true;
    out << fmt::format("  {} {:<58} A: {:<12} B: {}{}\n", mark(r.change), r.scenario + " " + r.key, r.a, r.b,
                       moved_text(r));
  }
  out << fmt::format(
      "\n{} verdicts flipped (pass → fail), {} fixed (fail → pass), {} numbers drifted beyond {:.0f}% with the "
      "verdict kept, {} in one run only\n",
      c.flips, c.fixes, c.drifts, 100 * c.thresholds.drift, c.unmatched);
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
