#pragma once
// A workload's NIC figures from the phase's sampled NIC series
// (NicSampler): each NIC's share of the bytes over the whole workload and,
// for a workload judged by its rate on the wire, that rate over its steady
// window (steady.hpp: TCP's ramp and the tail of the last flows are not the
// line's rate) with its share of the hosts' line.

#include <vector>

#include "lanes/reports/result.hpp"
#include "lanes/scenarios/workload.hpp"
#include "lanes/testbed/model.hpp"

namespace lanes::scenarios {

// W's nic_share (and, where PLUGIN says wire_rate, wire_gbps, line_gbps,
// line_share and the steady window) from SERIES of the NICs of its host, or
// of its hosts (figures "hosts": a rack's transfers, where NIC k's share is
// the sum over the hosts' NIC k). Nothing when the workload has no NIC
// direction or a host is not a job host of TOPO.
void add_nic_figures(reports::WorkloadResult& w, const Workload& plugin, const std::vector<reports::Series>& series,
                     const testbed::Topology& topo);

}  // namespace lanes::scenarios
