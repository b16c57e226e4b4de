#pragma once
// The steady part of a transfer: the one rate figure lanes takes ratios of.
// A transfer's rate samples start with TCP's ramp (slow start, connections
// still opening) and end with a tail (the last flows finishing alone, the
// socket buffers draining); neither is what the line carries. The steady
// window runs from the first sample that reaches kSteadyReach of the
// plateau to the last one that does, the plateau being the samples' 90th
// percentile (a spike or two does not move it). What dips in between — a
// failed NIC, a retransmission timeout — stays in: it is part of the rate.

#include <cstddef>
#include <string>
#include <vector>

#include "lanes/testbed/model.hpp"

namespace lanes::scenarios {

inline constexpr double kSteadyReach = 0.9;

struct SteadyWindow {
  size_t first = 0;  // the window's first and last sample
  size_t last = 0;
  double plateau = 0;
  double rate = 0;  // the mean of the samples in the window
  bool found = false;
};

// The steady window of SAMPLES; with fewer than kSteadyMinSamples samples
// (or none above zero) the whole series, found = false.
inline constexpr size_t kSteadyMinSamples = 5;
SteadyWindow steady_window(const std::vector<double>& samples);

// The share of a line of LINE_BPS that a link counter reading COUNTER_BPS of
// TCP traffic fills, 1.0 for a full line. A counter counts a GSO packet's
// headers once, the line every frame's, so a full line's counter reads its
// payload share: 1448 of 1514 bytes a frame over IPv4, 1428 over IPv6.
double line_share(double counter_bps, double line_bps, bool ipv6);

// The line rate of a host's NICs together (0 where they are unshaped).
double host_line_bps(const testbed::Node& host);
// The line the host's job can use in DIRECTION ("tx": what it sends, "rx":
// what it receives): every NIC's, or NIC 0's where its egress mode sends
// through one NIC (single, active-backup) or receives through one
// (active-backup: its task IP announced through one NIC at a time).
double host_line_bps(const testbed::Node& host, const std::string& direction);

// A baseline below this share of its line is not a baseline: it measured
// the machine (CPU, retransmits, a tail), not the NICs.
inline constexpr double kValidBaselineShare = 0.95;

}  // namespace lanes::scenarios
