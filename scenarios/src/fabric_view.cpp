#include "lanes/scenarios/fabric_view.hpp"

#include <fmt/format.h>
#include <sys/socket.h>

#include <optional>

#include "lanes/testbed/netns.hpp"
#include "lanes/hostnet/hostnet.hpp"
#include "lanes/switches/switches.hpp"

namespace lanes::scenarios {

namespace tb = lanes::testbed;
namespace sw = lanes::switches;

tb::Result<std::vector<tb::RouteEntry>> LiveFabric::routes(int node, int family) {
  return run_.tb().netlink(node).route_entries(family);
}

tb::Result<std::vector<tb::NexthopInfo>> LiveFabric::nexthops(int node) { return run_.tb().netlink(node).nexthops(); }

tb::Result<std::map<uint32_t, std::vector<uint32_t>>> LiveFabric::buckets(int node) {
  return run_.tb().netlink(node).all_nexthop_buckets();
}

sw::SpeakerRef LiveFabric::speaker(int node) {
  return sw::speaker_of(run_.registry(), run_.id(), run_.topology().nodes.at(static_cast<size_t>(node)),
                        run_.tb().netns(node).fd());
}

tb::Result<std::vector<sw::BgpRoute>> LiveFabric::rib(int node, int family, const std::string& prefix) {
  return sw::speaker_routes(speaker(node), family, prefix);
}

tb::Result<std::vector<SessionCounts>> LiveFabric::sessions(int node) {
  auto sp = speaker(node);
  auto paths = sw::session_paths(sp, /*count_rib=*/true);
  if (!paths) return tb::os_error(EIO, std::string(sp.name()) + " does not answer: " + paths.error().what());
  std::vector<SessionCounts> out;
  for (const auto& p : paths.value()) out.push_back({p.session.neighbor, p.session.received, p.rejected});
  return out;
}

tb::Result<std::vector<int>> LiveFabric::flow_oifs(int node, const std::vector<tb::FlowKey>& flows) {
  std::vector<int> out;
  for (const auto& f : flows) {
    auto oif = run_.tb().netlink(node).route_oif(f);
    if (!oif) return oif.error();
    out.push_back(oif.value());
  }
  return out;
}

tb::Result<std::vector<tb::NeighborInfo>> LiveFabric::neighbors(int node, bool job) {
  if (!job) return run_.tb().netlink(node).neighbors();
  std::string name = hostnet::job_netns(run_.id(), run_.topology().nodes.at(static_cast<size_t>(node)).name);
  auto ns = tb::Netns::open(name);
  if (!ns) return ns.error();
  auto nl = tb::Netlink::open_in(ns.value().fd(), name);
  if (!nl) return nl.error();
  return nl.value().neighbors();
}

std::string TaskGroups::prefix(const std::string& host) const {
  const auto& job = *topo_.nodes.at(static_cast<size_t>(topo_.find_node(host))).job;
  return family_of(host) == AF_INET6 ? job.task_ip6.to_string() + "/128" : job.task_ip4.to_string() + "/32";
}

int TaskGroups::family_of(const std::string& host) const {
  if (family_) return family_;
  return topo_.nodes.at(static_cast<size_t>(topo_.find_node(host))).job->has4() ? AF_INET : AF_INET6;
}

int TaskGroups::switch_of(const std::string& host) const {
  const auto& n = topo_.nodes.at(static_cast<size_t>(topo_.find_node(host)));
  return topo_.racks.at(static_cast<size_t>(n.rack)).switch_node;
}

tb::Result<std::map<std::string, uint32_t>> TaskGroups::ids(const std::vector<std::string>& hosts) {
  std::map<std::pair<int, int>, std::map<std::string, uint32_t>> group_of;  // (switch, family) → prefix → group
  std::map<std::string, uint32_t> out;
  for (const auto& h : hosts) {
    auto key = std::make_pair(switch_of(h), family_of(h));
    if (!group_of.count(key)) {
      auto routes = fabric_.routes(key.first, key.second);
      if (!routes) return routes.error();
      auto& of = group_of[key];
      for (const auto& r : routes.value()) of[r.dst] = r.nh_id;
    }
    auto it = group_of[key].find(prefix(h));
    out[h] = it == group_of[key].end() ? 0 : it->second;
  }
  return out;
}

std::map<std::string, std::vector<uint32_t>> TaskGroups::members(const std::vector<std::string>& hosts) {
  std::map<std::string, std::vector<uint32_t>> out;
  for (const auto& h : hosts) out[h] = {};
  auto ids_of = ids(hosts);
  if (!ids_of) return out;  // asked again by whoever waits
  std::map<int, std::map<uint32_t, std::vector<uint32_t>>> groups;  // switch → group → members
  std::map<std::pair<int, int>, std::map<std::string, std::vector<int>>> paths;  // (switch, family) → prefix → devices
  for (const auto& [h, g] : ids_of.value()) {
    int sw = switch_of(h);
    if (!g) {
      // a route without a group (zebra's multipath routes)
      auto key = std::make_pair(sw, family_of(h));
      if (!paths.count(key))
        if (auto routes = fabric_.routes(sw, key.second))
          for (const auto& r : routes.value()) paths[key][r.dst] = r.path_oifs;
      for (int oif : paths[key][prefix(h)]) out[h].push_back(static_cast<uint32_t>(oif));
      continue;
    }
    if (!groups.count(sw)) {
      auto& of = groups[sw];
      if (auto nhs = fabric_.nexthops(sw))
        for (const auto& n : nhs.value())
          for (auto [id, w] : n.members) of[n.id].push_back(id);
    }
    out[h] = groups[sw][g];
  }
  return out;
}

namespace {

// Where traffic for a host of switch SW's rack enters the switch from
// outside the rack's host ports: a server's port, else the uplink, else
// another host's port (not HOST's); the device's name at SW and the
// address the traffic comes from in FAMILY.
std::optional<std::pair<std::string, tb::IpAddr>> entry_of(const tb::Topology& t, int sw, int host, int family) {
  auto addr = [&](const tb::Endpoint& e) {
    return family == AF_INET6 ? tb::IpAddr(e.addr6.addr) : tb::IpAddr(e.addr4.addr);
  };
  for (auto kind : {tb::LinkKind::server, tb::LinkKind::fabric, tb::LinkKind::host_nic})
    for (const auto& l : t.links) {
      if (l.kind != kind) continue;
      if (kind == tb::LinkKind::fabric && l.b.node == sw) return std::make_pair(l.b.ifname, addr(l.a));
      if (kind != tb::LinkKind::fabric && l.a.node == sw && l.b.node != host)
        return std::make_pair(l.a.ifname, addr(l.b));
    }
  return std::nullopt;
}

}  // namespace

tb::Result<std::map<std::string, std::vector<uint32_t>>> TaskGroups::flow_ports(const std::vector<std::string>& hosts,
                                                                               int flows) {
  std::map<std::string, std::vector<uint32_t>> out;
  for (const auto& h : hosts) {
    int sw = switch_of(h), family = family_of(h);
    const auto& job = *topo_.nodes.at(static_cast<size_t>(topo_.find_node(h))).job;
    auto entry = entry_of(topo_, sw, topo_.find_node(h), family);
    if (!entry)
      return tb::os_error(ENOENT, fmt::format("{}'s switch has no port that traffic for it enters by", h));
    std::vector<tb::FlowKey> keys;
    // the same flows every time: a before and an after compare flow by flow
    uint32_t x = 2463534242u;
    for (int i = 0; i < flows; ++i) {
      x ^= x << 13, x ^= x >> 17, x ^= x << 5;
      tb::FlowKey k;
      k.iif = entry->first;
      k.src = entry->second;
      k.dst = family == AF_INET6 ? tb::IpAddr(job.task_ip6) : tb::IpAddr(job.task_ip4);
      k.sport = static_cast<uint16_t>(32768 + x % 28232);
      k.dport = static_cast<uint16_t>(5201 + (x >> 16) % 64);
      keys.push_back(k);
    }
    auto oifs = fabric_.flow_oifs(sw, keys);
    if (!oifs) return oifs.error();
    for (int o : oifs.value()) out[h].push_back(static_cast<uint32_t>(o));
  }
  return out;
}

tb::Result<std::map<std::string, std::vector<uint32_t>>> TaskGroups::buckets(const std::vector<std::string>& hosts) {
  auto ids_of = ids(hosts);
  if (!ids_of) return ids_of.error();
  std::map<int, std::map<uint32_t, std::vector<uint32_t>>> all;
  std::map<std::string, std::vector<uint32_t>> out;
  for (const auto& [h, g] : ids_of.value()) {
    int sw = switch_of(h);
    if (!all.count(sw)) {
      auto b = fabric_.buckets(sw);
      if (!b) return b.error();
      all[sw] = std::move(b).value();
    }
    out[h] = all[sw].count(g) ? all[sw].at(g) : std::vector<uint32_t>{};
  }
  return out;
}

bool TaskGroups::all_have(const std::vector<std::string>& hosts, size_t count) {
  for (const auto& [h, m] : members(hosts))
    if (m.size() != count) return false;
  return true;
}

}  // namespace lanes::scenarios
