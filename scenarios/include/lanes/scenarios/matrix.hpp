#pragma once
// The combination matrix: every workload type against every address
// family, egress mode, VIP mode and NIC count, covered pairwise (every pair
// of values of two dimensions in at least one case) rather than in full
// (with the 9 workload types registered today, 9 x 3 x 4 x 2 x 4 = 864
// cases; the workload types are the registry's). A covering array built greedily
// (AETG's way: of several random candidates for the next case, the one
// that covers the most pairs not yet covered), from a seed, so the list is
// the same every time for the same seed.

#include <cstdint>
#include <string>
#include <vector>

namespace lanes::scenarios::matrix {

// Rows of value indexes, one per case, covering every pair of values of
// every two dimensions (LEVELS[i] values in dimension i).
std::vector<std::vector<size_t>> covering_array(const std::vector<size_t>& levels, uint64_t seed);

// Pairs of values of two dimensions that ROWS leave uncovered.
size_t uncovered_pairs(const std::vector<size_t>& levels, const std::vector<std::vector<size_t>>& rows);

struct Dimension {
  std::string name;
  std::vector<std::string> values;
};
// workload, family, egress, vip, nics
const std::vector<Dimension>& dimensions();

struct Case {
  std::string name;  // c01, c02, ...
  std::string workload, family, egress, vip;
  int nics = 1;
};
std::vector<Case> cases(uint64_t seed);

// One case as a scenario of its own (the topology's job and NICs
// overridden as the case says), asserting no connection error and every
// byte verified (a probe: no gap over 500 ms); TOPOLOGY_FILE is the
// topology it names (topology_xml() written beside it). Each case apart:
// one that fails does not keep the others from running.
std::string scenario_xml(const Case& c, const std::string& topology_file);
// The suite of the cases' scenarios (FILE_OF(case) names each one's file).
std::string suite_xml(const std::vector<Case>& cases, uint64_t seed);
// One rack of two job hosts and a storage server.
std::string topology_xml();
// The list, one line per case, for a person to read.
std::string describe(const std::vector<Case>& cases);

}  // namespace lanes::scenarios::matrix
