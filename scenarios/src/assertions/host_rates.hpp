#pragma once
// What the rate assertions read of a live run: a time reference's place in
// the phase, and a host's NIC series in one direction.

#include <optional>
#include <string>
#include <vector>

#include "lanes/scenarios/live_assertion.hpp"

namespace lanes::scenarios {

// REF ("mark", "mark+1s", "mark-500ms") in seconds into the phase, or none
// if its mark was never set.
std::optional<double> mark_time(const LiveContext& ctx, const std::string& ref);

struct HostRates {
  double interval_s = 0.1;
  std::vector<std::string> nics;            // "nic0", ... in the sampler's order
  std::vector<std::vector<double>> per_nic;  // Gbit/s per sample, per NIC
  std::vector<double> total;                 // their sum per sample
  // the mean of SERIES over the samples within (FROM, TO]
  static double mean(const std::vector<double>& series, double interval_s, double from, double to);
};

// HOST's NIC series in direction DIR ("rx" or "tx"): "h1 nic0 rx", ...
HostRates host_rates(const std::vector<reports::Series>& series, const std::string& host, const std::string& dir);

}  // namespace lanes::scenarios
