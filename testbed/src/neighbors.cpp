#include "lanes/testbed/neighbors.hpp"

namespace lanes::testbed {

MacAddr link_mac(size_t link, int side) {
  return {0x02, 0x1a, static_cast<uint8_t>(link >> 16), static_cast<uint8_t>(link >> 8), static_cast<uint8_t>(link),
          static_cast<uint8_t>(side)};
}

MacAddr container_link_mac(int host, int nic, int side) {
  return {0x02, 0x1b, static_cast<uint8_t>(host >> 8), static_cast<uint8_t>(host), static_cast<uint8_t>(nic),
          static_cast<uint8_t>(side)};
}

std::vector<NeighborEntry> link_neighbors(const Topology& topo) {
  std::vector<NeighborEntry> out;
  out.reserve(topo.links.size() * 4);
  for (size_t k = 0; k < topo.links.size(); ++k) {
    const Link& l = topo.links[k];
    // on A, B's addresses at B's MAC; on B, A's at A's
    out.push_back({l.a.node, l.a.ifname, IpAddr(l.b.addr4.addr), link_mac(k, 1)});
    out.push_back({l.a.node, l.a.ifname, IpAddr(l.b.addr6.addr), link_mac(k, 1)});
    out.push_back({l.b.node, l.b.ifname, IpAddr(l.a.addr4.addr), link_mac(k, 0)});
    out.push_back({l.b.node, l.b.ifname, IpAddr(l.a.addr6.addr), link_mac(k, 0)});
  }
  return out;
}

}  // namespace lanes::testbed
