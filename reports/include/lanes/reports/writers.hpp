#pragma once
// Writers of the result model: JUnit XML for CI test reporters, the
// self-contained HTML report, the side-by-side comparison of two runs, and
// the terminal summary.

#include <iosfwd>
#include <string>

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

// Two runs side by side, differences highlighted.
std::string html_compare(const RunResult& a, const std::string& a_name, const RunResult& b, const std::string& b_name);

// The comparison for the terminal: figures and verdicts of A and B per
// scenario and assertion, differences marked.
void compare_text(const RunResult& a, const std::string& a_name, const RunResult& b, const std::string& b_name,
                  std::ostream& out);

// A line per assertion, the key figures, where the report is.
void terminal_summary(const RunResult& r, const std::string& out_dir, std::ostream& out);

// Writes results.json, junit.xml and report.html into DIR.
void write_all(const RunResult& r, const std::string& dir);

}  // namespace lanes::reports
