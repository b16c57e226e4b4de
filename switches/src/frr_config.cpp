#include <fmt/format.h>

#include <set>

#include "lanes/switches/frr.hpp"
#include "lanes/switches/switch_config.hpp"

namespace lanes::switches {

using namespace lanes::testbed;

namespace {

// "OWN-h1": route-map and prefix-list names carry node names, which are
// letters, digits, '-' and '_' (the loader's rule), so they need no quoting
std::string own(const Node& host) { return "OWN-" + host.name; }

// The statics behind NODE's host ports: each job's per-NIC address through
// the NIC's link (the next hops its injector announces), and the rack's
// blocks as blackholes.
std::string staticd_config(const Topology& t, int node, const Rack* rack) {
  std::string s = fmt::format("hostname {}\n", t.nodes[static_cast<size_t>(node)].name);
  if (rack) {
    s += fmt::format("ip route {} blackhole\n", rack->block4.to_string());
    s += fmt::format("ipv6 route {} blackhole\n", rack->block6.to_string());
  }
  for (const auto& l : t.links) {
    if (l.kind != LinkKind::host_nic || l.a.node != node) continue;
    const Node& host = t.nodes[static_cast<size_t>(l.b.node)];
    if (!host.job) continue;
    const Nic& nic = host.nics[static_cast<size_t>(l.nic)];
    if (host.job->has4())
      s += fmt::format("ip route {}/32 {} {}\n", nic.job_addr4.addr.to_string(), l.b.addr4.addr.to_string(),
                       l.a.ifname);
    if (host.job->has6())
      s += fmt::format("ipv6 route {}/128 {} {}\n", nic.job_addr6.addr.to_string(), l.b.addr6.addr.to_string(),
                       l.a.ifname);
  }
  return s;
}

// Ownership (a task IP only from its host's sessions), containment (no
// more-specific of the rack's blocks towards the spines), nothing to the
// injectors.
std::string policies(const Topology& t, const Rack& rack) {
  std::string s;
  for (int h : rack.hosts) {
    const Node& host = t.nodes[static_cast<size_t>(h)];
    if (!host.job) continue;
    int seq = 10;
    if (host.job->has4()) {
      s += fmt::format("ip prefix-list {}-4 seq 5 permit {}/32\n", own(host), host.job->task_ip4.to_string());
      s += fmt::format("route-map {} permit {}\n match ip address prefix-list {}-4\nexit\n", own(host), seq, own(host));
      seq += 10;
    }
    if (host.job->has6()) {
      s += fmt::format("ipv6 prefix-list {}-6 seq 5 permit {}/128\n", own(host), host.job->task_ip6.to_string());
      s += fmt::format("route-map {} permit {}\n match ipv6 address prefix-list {}-6\nexit\n", own(host), seq,
                       own(host));
    }
  }
  s += fmt::format("ip prefix-list RACK-MORE-4 seq 5 permit {} ge {}\n", rack.block4.to_string(),
                   rack.block4.prefix_length() + 1);
  s += fmt::format("ipv6 prefix-list RACK-MORE-6 seq 5 permit {} ge {}\n", rack.block6.to_string(),
                   rack.block6.prefix_length() + 1);
  s += "route-map CONTAIN deny 10\n match ip address prefix-list RACK-MORE-4\nexit\n";
  s += "route-map CONTAIN deny 20\n match ipv6 address prefix-list RACK-MORE-6\nexit\n";
  s += "route-map CONTAIN permit 30\nexit\n";
  s += "route-map NOTHING deny 10\nexit\n";
  return s;
}

}  // namespace

FrrConfig render_frr_config(const Topology& t, int node) {
  const Node& n = t.nodes.at(static_cast<size_t>(node));
  const Rack* rack = rack_of_switch(t, node);
  auto neighbors = switch_neighbors(t, node);
  std::string head = fmt::format("! FRR configuration for {} ({}), rendered by lanes\nhostname {}\n", n.name,
                                 to_string(n.kind), n.name);
  FrrConfig c;
  c.zebra = head;
  // bgpd's next hops resolve through a link (/31, /127) or a NIC's host
  // route (/32, /128) only: when a NIC's port goes down its host route
  // goes, and the next hop must become unreachable (the path leaves the
  // group) rather than resolve through the rack block's blackhole, which
  // the kernel refuses in a multipath group (zebra then keeps the old group)
  c.zebra += "ip prefix-list NHT-4 seq 5 permit 0.0.0.0/0 ge 31\n";
  c.zebra += "ipv6 prefix-list NHT-6 seq 5 permit ::/0 ge 127\n";
  c.zebra += "route-map NHT permit 10\n match ip address prefix-list NHT-4\nexit\n";
  c.zebra += "route-map NHT permit 20\n match ipv6 address prefix-list NHT-6\nexit\n";
  c.zebra += "ip nht bgp route-map NHT\nipv6 nht bgp route-map NHT\n";
  // multipath routes, not kernel nexthop objects: the kernel takes a
  // nexthop out of its groups when the device goes down, behind zebra's
  // back, and FRR 8.4 then kept a group of three after the NIC came back
  c.zebra += "no zebra nexthop kernel enable\n";
  c.staticd = "! " + head.substr(2) + staticd_config(t, node, rack);

  std::string& s = c.bgpd;
  s = head;
  if (rack) s += policies(t, *rack);
  s += fmt::format("router bgp {}\n bgp router-id {}\n", n.asn, n.router_id.to_string());
  // lanes' policies are explicit; every address family is activated by name
  s += " no bgp ebgp-requires-policy\n no bgp default ipv4-unicast\n";
  s += " bgp bestpath as-path multipath-relax\n";
  // the rack's blocks are announced unconditionally, as GoBGP does: their
  // blackholes are in zebra, but the NHT filter above (next hops only
  // through links and NIC host routes) hides them from bgpd's import check
  s += " no bgp network import-check\n";
  // bgpd killed: zebra keeps its routes as stale until it is back and has
  // installed them again, so the kernel forwards throughout
  s += " bgp graceful-restart\n";
  uint32_t hold = rack ? rack->sw.hold_time_s : 9;
  // IPv6 rides the fabric's IPv4 sessions; GoBGP gives such routes the
  // IPv4-mapped next hop (::ffff:a.b.c.d), which zebra cannot resolve: the
  // fabric peer's IPv6 address on the link is set in its place
  int fabric_k = 0;
  std::string fabric_maps;
  for (const auto& nb : neighbors)
    if (!nb.host && !nb.address6.empty())
      fabric_maps += fmt::format("route-map FABRIC-{} permit 10\n set ipv6 next-hop global {}\nexit\n", fabric_k++,
                                 nb.address6);
  s.insert(s.find("router bgp "), fabric_maps);
  for (const auto& nb : neighbors) {
    const std::string& a = nb.address;
    s += fmt::format(" neighbor {} remote-as {}\n neighbor {} description {}\n", a, nb.peer_as, a, nb.description);
    s += fmt::format(" neighbor {} update-source {}\n", a, nb.local);
    s += fmt::format(" neighbor {} timers {} {}\n neighbor {} timers connect 1\n", a, std::max<uint32_t>(1, hold / 3),
                     hold, a);
    if (nb.host) s += fmt::format(" neighbor {} passive\n neighbor {} ebgp-multihop 3\n", a, a);
  }
  for (int family : {4, 6}) {
    s += fmt::format(" address-family ipv{} unicast\n", family);
    s += "  maximum-paths 64\n";
    if (rack) s += fmt::format("  network {}\n", family == 4 ? rack->block4.to_string() : rack->block6.to_string());
    for (const auto& p : server_prefixes(t, node))
      if ((p.find(':') == std::string::npos) == (family == 4)) s += fmt::format("  network {}\n", p);
    fabric_k = 0;
    for (const auto& nb : neighbors) {
      const std::string& a = nb.address;
      s += fmt::format("  neighbor {} activate\n", a);
      // what the neighbor sent is kept before policy: received and
      // rejected are counted as with GoBGP
      s += fmt::format("  neighbor {} soft-reconfiguration inbound\n", a);
      if (!nb.host) {
        if (rack) s += fmt::format("  neighbor {} route-map CONTAIN out\n", a);
        if (!nb.address6.empty() && family == 6) s += fmt::format("  neighbor {} route-map FABRIC-{} in\n", a, fabric_k);
        if (!nb.address6.empty()) ++fabric_k;
        continue;
      }
      const Node& host = t.nodes[static_cast<size_t>(nb.host_node)];
      s += fmt::format("  neighbor {} route-map {} in\n  neighbor {} route-map NOTHING out\n", a, own(host), a);
      // the limit counts accepted prefixes: with FRR 8.4's `force` (count
      // what was received) bgpd counted 5 and 9 prefixes on sessions that
      // had sent one, and tore them down
      if (uint32_t limit = session_prefix_limit(t, node, nb))
        s += fmt::format("  neighbor {} maximum-prefix {}\n", a, limit);
    }
    s += " exit-address-family\n";
  }
  s += "exit\n";
  return c;
}

}  // namespace lanes::switches
