#include "lanes/switches/switch_config.hpp"

#include <fmt/format.h>

#include "lanes/testbed/neighbors.hpp"

namespace lanes::switches {

using namespace lanes::testbed;
namespace {

std::string q(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string list(const std::vector<std::string>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + q(v[i]);
  return s + "]";
}

// A neighbor set's list: GoBGP matches a session against it entry by entry,
// for every path it weighs for every peer, so a rack's 256 sessions are
// written as the prefixes that hold exactly them (a /24, a host's /30)
std::string neighbor_list(const std::vector<std::string>& addresses) {
  std::vector<IpAddr> ips;
  std::vector<std::string> out;
  for (const auto& a : addresses)
    if (auto ip = parse_ip(a))
      ips.push_back(*ip);
    else
      out.push_back(a);  // not an address: kept as it is, for gobgpd to refuse, never dropped from the set
  for (const auto& n : collapse(ips)) {
    std::string a = n.address().to_string();
    bool host = n.prefix_length() == (n.is_v6() ? 128 : 32);
    out.push_back(host ? a : a + "/" + std::to_string(n.prefix_length()));
  }
  return list(out);
}

void afi_safis(std::string& s, uint32_t max_prefixes) {
  for (const char* afi : {"ipv4-unicast", "ipv6-unicast"}) {
    s += "  [[neighbors.afi-safis]]\n    [neighbors.afi-safis.config]\n";
    s += fmt::format("      afi-safi-name = {}\n", q(afi));
    if (max_prefixes) {
      s += "    [neighbors.afi-safis.prefix-limit.config]\n";
      s += fmt::format("      max-prefixes = {}\n", max_prefixes);
    }
  }
}

}  // namespace

const Rack* rack_of_switch(const Topology& t, int node) {
  for (const auto& r : t.racks)
    if (r.switch_node == node) return &r;
  return nullptr;
}

// Prefixes of the servers hanging off NODE (their link /31 and /127):
// announced so that other racks reach them.
std::vector<std::string> server_prefixes(const Topology& t, int node) {
  std::vector<std::string> out;
  for (const auto& l : t.links) {
    if (l.kind != LinkKind::server || l.a.node != node) continue;
    out.push_back(Net4(l.a.addr4.addr, 31).canonical().to_string());
    out.push_back(Net6(l.a.addr6.addr, 127).canonical().to_string());
  }
  return out;
}

std::vector<SwitchNeighbor> switch_neighbors(const Topology& t, int node) {
  std::vector<SwitchNeighbor> out;
  for (const auto& l : t.links) {
    if (l.kind == LinkKind::fabric && (l.a.node == node || l.b.node == node)) {
      const Endpoint& me = l.a.node == node ? l.a : l.b;
      const Endpoint& peer = l.a.node == node ? l.b : l.a;
      out.push_back({peer.addr4.addr.to_string(), me.addr4.addr.to_string(), t.nodes[peer.node].asn,
                     t.nodes[peer.node].name + " " + peer.ifname, false, -1, peer.addr6.addr.to_string()});
    }
    if (l.kind == LinkKind::host_nic && l.a.node == node) {
      const Node& host = t.nodes[l.b.node];
      if (!has_injector_session(host, l.nic)) continue;
      out.push_back({injector_session_address(host, l.nic), injector_session_peer(t, host, l.nic), host.asn,
                     fmt::format("{} nic{}", host.name, l.nic), true, l.b.node});
    }
  }
  return out;
}

uint32_t session_prefix_limit(const Topology& t, int node, const SwitchNeighbor& nb) {
  const Rack* rack = rack_of_switch(t, node);
  if (!nb.host || !rack) return 0;
  uint32_t limit = rack->sw.max_prefixes;
  const Node& host = t.nodes[static_cast<size_t>(nb.host_node)];
  // the speakers count paths against the limit, and an ADD-PATH session
  // carries each prefix once per NIC (8 NICs on the default 4: "prefix
  // limit reached", the session torn down, no next hop)
  if (host.job && host.job->vip == VipMode::add_path)
    limit *= static_cast<uint32_t>(std::max<size_t>(1, host.nics.size()));
  return limit;
}

std::string render_gobgp_config(const Topology& t, int node) {
  const Node& n = t.nodes.at(static_cast<size_t>(node));
  const Rack* rack = rack_of_switch(t, node);
  auto neighbors = switch_neighbors(t, node);
  std::string s = fmt::format("# gobgpd configuration for {} ({}), rendered by lanes\n", n.name, to_string(n.kind));
  s += "[global.config]\n";
  s += fmt::format("  as = {}\n  router-id = {}\n  port = 179\n", n.asn, q(n.router_id.to_string()));
  s += "[global.use-multiple-paths.config]\n  enabled = true\n";

  if (rack) {
    // ownership on import, containment on export
    s += "[global.apply-policy.config]\n";
    s += "  import-policy-list = [\"lanes-ownership\"]\n  default-import-policy = \"accept-route\"\n";
    s += "  export-policy-list = [\"lanes-containment\"]\n  default-export-policy = \"accept-route\"\n";
    std::vector<std::string> all_hosts, fabric;
    for (const auto& nb : neighbors) (nb.host ? all_hosts : fabric).push_back(nb.address);
    for (int h : rack->hosts) {
      const Node& host = t.nodes[h];
      // a GoBGP prefix set holds one address family; a job owns only the
      // families it has (any other announcement from it is rejected below)
      if (host.job->has4()) {
        s += "[[defined-sets.prefix-sets]]\n";
        s += fmt::format("  prefix-set-name = {}\n", q("task4-" + host.name));
        s += "  [[defined-sets.prefix-sets.prefix-list]]\n";
        s += fmt::format("    ip-prefix = {}\n", q(host.job->task_ip4.to_string() + "/32"));
      }
      if (host.job->has6()) {
        s += "[[defined-sets.prefix-sets]]\n";
        s += fmt::format("  prefix-set-name = {}\n", q("task6-" + host.name));
        s += "  [[defined-sets.prefix-sets.prefix-list]]\n";
        s += fmt::format("    ip-prefix = {}\n", q(host.job->task_ip6.to_string() + "/128"));
      }
      std::vector<std::string> sessions;
      for (const auto& nb : neighbors)
        if (nb.host_node == h) sessions.push_back(nb.address);
      s += "[[defined-sets.neighbor-sets]]\n";
      s += fmt::format("  neighbor-set-name = {}\n  neighbor-info-list = {}\n", q("host-" + host.name),
                       neighbor_list(sessions));
    }
    s += "[[defined-sets.prefix-sets]]\n  prefix-set-name = \"rack-more-specifics4\"\n";
    s += "  [[defined-sets.prefix-sets.prefix-list]]\n";
    s += fmt::format("    ip-prefix = {}\n    masklength-range = \"{}..32\"\n", q(rack->block4.to_string()),
                     rack->block4.prefix_length() + 1);
    s += "[[defined-sets.prefix-sets]]\n  prefix-set-name = \"rack-more-specifics6\"\n";
    s += "  [[defined-sets.prefix-sets.prefix-list]]\n";
    s += fmt::format("    ip-prefix = {}\n    masklength-range = \"{}..128\"\n", q(rack->block6.to_string()),
                     rack->block6.prefix_length() + 1);
    if (!all_hosts.empty())
      s += fmt::format("[[defined-sets.neighbor-sets]]\n  neighbor-set-name = \"hosts\"\n  neighbor-info-list = {}\n",
                       neighbor_list(all_hosts));
    if (!fabric.empty())
      s += fmt::format("[[defined-sets.neighbor-sets]]\n  neighbor-set-name = \"fabric\"\n  neighbor-info-list = {}\n",
                       neighbor_list(fabric));

    s += "[[policy-definitions]]\n  name = \"lanes-ownership\"\n";
    for (int h : rack->hosts) {
      const Node& host = t.nodes[h];
      for (const char* fam : {"4", "6"}) {
        if (!(fam[0] == '4' ? host.job->has4() : host.job->has6())) continue;
        s += "  [[policy-definitions.statements]]\n";
        s += fmt::format("    name = {}\n", q(fmt::format("own{}-{}", fam, host.name)));
        s += "    [policy-definitions.statements.conditions.match-prefix-set]\n";
        s += fmt::format("      prefix-set = {}\n", q(fmt::format("task{}-{}", fam, host.name)));
        s += "    [policy-definitions.statements.conditions.match-neighbor-set]\n";
        s += fmt::format("      neighbor-set = {}\n", q("host-" + host.name));
        s += "    [policy-definitions.statements.actions]\n      route-disposition = \"accept-route\"\n";
      }
    }
    if (!all_hosts.empty()) {
      s += "  [[policy-definitions.statements]]\n    name = \"reject-other-host-routes\"\n";
      s += "    [policy-definitions.statements.conditions.match-neighbor-set]\n      neighbor-set = \"hosts\"\n";
      s += "    [policy-definitions.statements.actions]\n      route-disposition = \"reject-route\"\n";
    }
    s += "[[policy-definitions]]\n  name = \"lanes-containment\"\n";
    // the injectors first: every path is weighed for each of a rack's
    // hundreds of host sessions, and for them the first statement decides
    // (the statements' neighbor sets do not overlap: the order means nothing else)
    if (!all_hosts.empty()) {
      s += "  [[policy-definitions.statements]]\n    name = \"nothing-to-injectors\"\n";
      s += "    [policy-definitions.statements.conditions.match-neighbor-set]\n      neighbor-set = \"hosts\"\n";
      s += "    [policy-definitions.statements.actions]\n      route-disposition = \"reject-route\"\n";
    }
    if (!fabric.empty()) {
      for (const char* fam : {"4", "6"}) {
        s += fmt::format("  [[policy-definitions.statements]]\n    name = \"no-task-routes-beyond-the-rack{}\"\n", fam);
        s += fmt::format(
            "    [policy-definitions.statements.conditions.match-prefix-set]\n      prefix-set = \"rack-more-specifics{}\"\n",
            fam);
        s += "    [policy-definitions.statements.conditions.match-neighbor-set]\n      neighbor-set = \"fabric\"\n";
        s += "    [policy-definitions.statements.actions]\n      route-disposition = \"reject-route\"\n";
      }
    }
  }

  uint32_t hold = rack ? rack->sw.hold_time_s : 9;
  for (const auto& nb : neighbors) {
    s += "[[neighbors]]\n  [neighbors.config]\n";
    s += fmt::format("    neighbor-address = {}\n    peer-as = {}\n    description = {}\n", q(nb.address),
                     nb.peer_as, q(nb.description));
    s += "  [neighbors.transport.config]\n";
    s += fmt::format("    local-address = {}\n", q(nb.local));
    if (nb.host) s += "    passive-mode = true\n";
    s += "  [neighbors.timers.config]\n";
    // (no idle-hold-time-after-reset: GoBGP 3.10 drops it from the file;
    // the FIB agent remakes a host's peer instead of resetting it)
    s += fmt::format("    hold-time = {}\n    keepalive-interval = {}\n    connect-retry = 1\n", hold,
                     std::max<uint32_t>(1, hold / 3));
    if (nb.host) {
      s += "  [neighbors.ebgp-multihop.config]\n    enabled = true\n    multihop-ttl = 3\n";
      const Node& host = t.nodes[nb.host_node];
      if (host.job && host.job->vip == VipMode::add_path) s += "  [neighbors.add-paths.config]\n    receive = true\n";
    }
    afi_safis(s, session_prefix_limit(t, node, nb));
  }
  return s;
}

AgentConfig render_agent_config(const Topology& t, int node) {
  const Node& n = t.nodes.at(static_cast<size_t>(node));
  const Rack* rack = rack_of_switch(t, node);
  AgentConfig c;
  c.node = n.name;
  c.api = kGobgpApi;
  SwitchParams sw = rack ? rack->sw : SwitchParams{};
  c.resilient = {sw.buckets, sw.idle_timer_s, sw.unbalanced_timer_s};
  if (rack) {
    c.originate = {rack->block4.to_string(), rack->block6.to_string()};
    c.blackhole = {rack->block4.to_string(), rack->block6.to_string()};
  }
  for (const auto& p : server_prefixes(t, node)) c.originate.push_back(p);
  // every port: which BGP next hops it stands for, and the gateway per family
  for (size_t k = 0; k < t.links.size(); ++k) {
    const Link& l = t.links[k];
    if (l.a.node != node && l.b.node != node) continue;
    const Endpoint& me = l.a.node == node ? l.a : l.b;
    const Endpoint& peer = l.a.node == node ? l.b : l.a;
    AgentPort port{me.ifname,
                   t.nodes[peer.node].name,
                   {peer.addr4.addr.to_string(), peer.addr6.addr.to_string()},
                   peer.addr4.addr.to_string(),
                   peer.addr6.addr.to_string(),
                   to_string(link_mac(k, l.a.node == node ? 1 : 0)),
                   {}};
    if (l.kind == LinkKind::host_nic) {
      const Nic& nic = t.nodes[l.b.node].nics[l.nic];
      port.match.push_back(nic.job_addr4.addr.to_string());
      port.match.push_back(nic.job_addr6.addr.to_string());
      // the job's per-NIC addresses live behind this port
      const auto& job = *t.nodes[l.b.node].job;
      if (job.has4()) c.statics.push_back({nic.job_addr4.str(), me.ifname, peer.addr4.addr.to_string()});
      if (job.has6()) c.statics.push_back({nic.job_addr6.str(), me.ifname, peer.addr6.addr.to_string()});
      // the injector session riding this port: reset when it loses carrier
      if (has_injector_session(t.nodes[l.b.node], l.nic))
        port.sessions.push_back(injector_session_address(t.nodes[l.b.node], l.nic));
    }
    c.ports.push_back(std::move(port));
  }
  return c;
}

}  // namespace lanes::switches
