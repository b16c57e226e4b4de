#pragma once
// Has BGP converged? Read from the kernel of the emulated switches, not from
// any daemon's word: every job's task IP (IPv4 and IPv6) has a nexthop
// group with one member per NIC at its rack switch, every rack switch routes
// to every other rack's blocks, and every spine routes to every rack's
// blocks. One route and one nexthop dump per switch and family, however
// many hosts a rack holds.

#include <functional>
#include <string>

#include "lanes/testbed/model.hpp"
#include "lanes/testbed/netlink.hpp"

namespace lanes::switches {

using testbed::Netlink;
using testbed::Topology;

struct Convergence {
  size_t task_ips = 0;       // (job host, family) pairs that must be announced
  size_t task_ips_full = 0;  // of them, with one next hop per NIC at their rack switch
  size_t aggregates = 0;     // (switch, other rack's block, family) routes the fabric must carry
  size_t aggregates_present = 0;
  std::string first_missing;  // for people: the first thing missing, "" when done
  bool done() const { return task_ips_full == task_ips && aggregates_present == aggregates; }
};

// NETLINK gives the netlink socket of a node (Fabric::netlink). HERE, when
// given, limits the check to the switches it says yes to (a shard of a run
// over several machines reads its own machine's switches; the first rank
// adds up every shard's count).
Convergence check_convergence(const Topology& topo, const std::function<Netlink&(int node)>& netlink,
                              const std::function<bool(int node)>& here = {});

}  // namespace lanes::switches
