#pragma once
// The permanent neighbour plan. ARP and ND entries of every network
// namespace count against one kernel-wide limit (gc_thresh3, 1024 by
// default, settable only in the root namespace, which lanes never changes);
// a rack of 64 four-NIC hosts alone reaches it, and past it the kernel drops
// packets. Entries added as NUD_PERMANENT do not count. lanes creates both
// ends of every point-to-point link and chooses their MACs, so it installs
// each end's neighbour for the other end's addresses (IPv4 and IPv6) at
// bring-up: no ARP or ND on any link, nothing counted.

#include <cstddef>
#include <string>
#include <vector>

#include "lanes/testbed/model.hpp"
#include "lanes/testbed/netlink.hpp"

namespace lanes::testbed {

// The MAC lanes gives end SIDE (0 = a, 1 = b) of topology link LINK:
// locally administered, unicast, unique among the run's links.
MacAddr link_mac(size_t link, int side);

// The MAC of end SIDE (0 = host, 1 = job container) of the link between
// host node HOST and its job container for NIC NIC.
MacAddr container_link_mac(int host, int nic, int side);

struct NeighborEntry {
  int node = -1;       // the node whose namespace holds the entry
  std::string ifname;  // on this interface of it
  IpAddr ip;           // the other end's address
  MacAddr mac{};       // the other end's MAC
};

// Both ends of every topology link, both families: 4 entries per link.
std::vector<NeighborEntry> link_neighbors(const Topology& topo);

}  // namespace lanes::testbed
