#include "lanes/switches/convergence.hpp"

#include <sys/socket.h>

#include <fmt/format.h>

#include <map>
#include <set>

namespace lanes::switches {

using namespace lanes::testbed;

namespace {

// One switch's view: destination → members of its nexthop group (1 for a
// plain route, its path count for a multipath one), per family.
struct SwitchView {
  std::map<std::string, size_t> members;
  bool read = false;
};

SwitchView read_switch(Netlink& nl) {
  SwitchView v;
  auto groups = nl.nexthops();
  if (!groups) return v;
  std::map<uint32_t, size_t> size_of_group;
  for (const auto& n : groups.value()) size_of_group[n.id] = n.is_group ? n.members.size() : 1;
  for (int family : {AF_INET, AF_INET6}) {
    auto routes = nl.route_entries(family);
    if (!routes) return v;
    for (const auto& r : routes.value()) {
      size_t m = r.nh_id ? (size_of_group.count(r.nh_id) ? size_of_group[r.nh_id] : 0) : std::max(r.paths, 1);
      v.members[r.dst] = m;
    }
  }
  v.read = true;
  return v;
}

}  // namespace

Convergence check_convergence(const Topology& topo, const std::function<Netlink&(int node)>& netlink,
                              const std::function<bool(int node)>& here) {
  auto ours = [&](int node) { return !here || here(node); };
  Convergence c;
  std::map<int, SwitchView> views;
  auto view = [&](int node) -> const SwitchView& {
    auto it = views.find(node);
    if (it == views.end()) it = views.emplace(node, read_switch(netlink(node))).first;
    return it->second;
  };
  auto missing = [&](std::string what) {
    if (c.first_missing.empty()) c.first_missing = std::move(what);
  };
  for (const auto& n : topo.nodes) {
    if (n.kind != NodeKind::host || !n.job || n.rack < 0) continue;
    int sw = topo.racks[static_cast<size_t>(n.rack)].switch_node;
    if (!ours(sw)) continue;
    const SwitchView& v = view(sw);
    std::vector<std::string> prefixes;
    if (n.job->has4()) prefixes.push_back(n.job->task_ip4.to_string() + "/32");
    if (n.job->has6()) prefixes.push_back(n.job->task_ip6.to_string() + "/128");
    for (const std::string& prefix : prefixes) {
      ++c.task_ips;
      auto it = v.members.find(prefix);
      size_t have = it == v.members.end() ? 0 : it->second;
      // active-backup: one NIC announced at a time, the others waiting
      size_t want = n.job->egress == EgressMode::active_backup ? 1 : n.nics.size();
      if (have == want) {
        ++c.task_ips_full;
      } else {
        missing(fmt::format("{}'s task IP {} has {} of {} next hops at {}", n.name, prefix, have, want,
                            topo.nodes[static_cast<size_t>(sw)].name));
      }
    }
  }
  if (topo.racks.size() > 1 || topo.count(NodeKind::spine) > 0) {
    for (size_t i = 0; i < topo.nodes.size(); ++i) {
      const Node& s = topo.nodes[i];
      bool spine = s.kind == NodeKind::spine;
      if (!spine && s.kind != NodeKind::rack_switch) continue;
      if (!ours(static_cast<int>(i))) continue;
      for (const auto& r : topo.racks) {
        if (!spine && r.switch_node == static_cast<int>(i)) continue;  // its own block: per-task routes
        if (r.hosts.empty()) continue;
        for (const std::string& block : {r.block4.to_string(), r.block6.to_string()}) {
          ++c.aggregates;
          if (view(static_cast<int>(i)).members.count(block))
            ++c.aggregates_present;
          else
            missing(fmt::format("{} has no route to rack {}'s block {}", s.name, r.name, block));
        }
      }
    }
  }
  for (const auto& [node, v] : views)
    if (!v.read) missing("the routes of " + topo.nodes[static_cast<size_t>(node)].name + " could not be read");
  return c;
}

}  // namespace lanes::switches
