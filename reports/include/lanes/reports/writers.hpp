#pragma once
// Writers of the result model: JUnit XML for CI test reporters, the
// self-contained HTML report, the side-by-side comparison of two runs, and
// the terminal summary.

#include <iosfwd>
#include <string>

#include "lanes/reports/compare.hpp"
#include "lanes/reports/result.hpp"

namespace lanes::reports {

// One <testsuite> per scenario, one <testcase> per assertion; a failed
// assertion is a <failure> with expected and measured, a scenario that
// could not run an <error>; <system-out> holds the scenario's log tail.
std::string junit_xml(const RunResult& r);

// One HTML file with inline CSS and SVG: summary table, per-NIC throughput
// charts with fault markers, single versus multi-NIC comparison, blackout
// per path, the topology drawing. Works offline.
std::string html_report(const RunResult& r);

// Two runs side by side (compare.hpp): the configurations, every verdict,
// the workload figures; a flipped verdict in red, drift in yellow.
std::string html_compare(const Comparison& c, const std::string& a_name, const std::string& a_started,
                         const std::string& b_name, const std::string& b_started);

// The comparison for the terminal: the settings that differ, every
// assertion of A and B marked flip / fixed / drift, the figures that moved.
void compare_text(const Comparison& c, const std::string& a_name, const std::string& a_started,
                  const std::string& b_name, const std::string& b_started, std::ostream& out);

// A line per assertion, the key figures, where the report is.
void terminal_summary(const RunResult& r, const std::string& out_dir, std::ostream& out);

// Writes results.json, junit.xml and report.html into DIR.
void write_all(const RunResult& r, const std::string& dir);

}  // namespace lanes::reports
