#pragma once
// Two runs compared as a qualification engineer reads them: a verdict that
// flipped (pass → fail) is a regression, one that went the other way a fix;
// a number that moved more than the drift threshold with the verdict kept
// is drift, worth a look but no regression. The runs' configurations
// (topology, egress, vip mode, NICs, kernel features, versions) are set
// side by side, so a difference in numbers can be told from one in setup.

#include <optional>
#include <string>
#include <vector>

#include "lanes/reports/result.hpp"

namespace lanes::reports {

struct CompareThresholds {
  double drift = 0.05;  // a number that moved by more than this share of the larger
};

enum class Change {
  same,
  flip,    // passed in A, failed in B
  fixed,   // failed in A, passed in B
  drift,   // the same verdict, the number moved beyond the threshold
  only_a,  // in A only
  only_b,  // in B only
};
const char* to_string(Change c);

// What a pair of readings is. A_PASSED / B_PASSED are the verdicts (for a
// figure, which has none, pass both as true); A and B the numbers, none for
// a text that holds none (then a differing TEXT is drift).
Change classify(bool in_a, bool in_b, bool a_passed, bool b_passed, std::optional<double> a, std::optional<double> b,
                bool text_differs, const CompareThresholds& t);

// The first number of a measured text: "0.75 (1.4 Gbit/s ...)" → 0.75,
// "3 of 96 healthy buckets moved" → 3, "after 0.35 s" → 0.35; a digit in
// a word ("h1 tx") is not one; none in "nothing".
std::optional<double> first_number(const std::string& text);

struct CompareRow {
  std::string scenario;
  std::string key;   // "rate-ratio h1 [failover]", "failover/restore throughput_gbps"
  std::string a, b;  // as measured, "—" where absent
  bool a_passed = true, b_passed = true;
  Change change = Change::same;
  std::optional<double> moved;  // (B − A) / max(|A|, |B|), where both are numbers
};

struct ConfigRow {
  std::string field;  // "kernel", "throughput-4x/one-nic egress"
  std::string a, b;
  bool differs = false;
};

struct Comparison {
  CompareThresholds thresholds;
  std::vector<ConfigRow> config;
  std::vector<CompareRow> assertions;
  std::vector<CompareRow> figures;
  int flips = 0, fixes = 0, drifts = 0, unmatched = 0;
};

Comparison compare_runs(const RunResult& a, const RunResult& b, const CompareThresholds& t = {});

}  // namespace lanes::reports
