// unit tier: the neighbour plan of a topology, fabric and container links,
// the host agent's config, and what a host's container and routing are in
// the kernel (its plan), without root.

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fstream>
#include <filesystem>
#include <map>
#include <set>

#include "lanes/testbed/neighbors.hpp"
#include "lanes/testbed/fabric.hpp"
#include "lanes/testbed/topology_loader.hpp"
#include "lanes/hostnet/hostnet.hpp"

using namespace lanes::testbed;

namespace {

std::string topology(const std::string& name) { return std::string(LANES_SOURCE_DIR) + "/topologies/" + name; }

}  // namespace

TEST_CASE("every end of every link has a permanent neighbour for the other end, both families", "[unit]") {
  for (const char* file : {"laptop.xml", "two-racks.xml", "rack-64.xml"}) {
    INFO(file);
    auto t = load_topology(topology(file));
    auto plan = link_neighbors(t);
    CHECK(plan.size() == t.links.size() * 4);
    // (node, ifname, ip) -> mac
    std::map<std::tuple<int, std::string, std::string>, MacAddr> have;
    for (const auto& e : plan) CHECK(have.emplace(std::make_tuple(e.node, e.ifname, e.ip.to_string()), e.mac).second);
    std::set<MacAddr> macs;
    for (size_t k = 0; k < t.links.size(); ++k) {
      const Link& l = t.links[k];
      auto at = [&](const Endpoint& here, const std::string& ip) {
        auto it = have.find({here.node, here.ifname, ip});
        return it == have.end() ? MacAddr{} : it->second;
      };
      CHECK(at(l.a, l.b.addr4.addr.to_string()) == link_mac(k, 1));
      CHECK(at(l.a, l.b.addr6.addr.to_string()) == link_mac(k, 1));
      CHECK(at(l.b, l.a.addr4.addr.to_string()) == link_mac(k, 0));
      CHECK(at(l.b, l.a.addr6.addr.to_string()) == link_mac(k, 0));
      CHECK(macs.insert(link_mac(k, 0)).second);
      CHECK(macs.insert(link_mac(k, 1)).second);
    }
    for (const auto& m : macs) {
      CHECK((m[0] & 0x02) == 0x02);  // locally administered
      CHECK((m[0] & 0x01) == 0);     // unicast
    }
  }
}

TEST_CASE("the links between a host and its job container have permanent neighbours both ways", "[unit]") {
  auto t = load_topology(topology("laptop.xml"));
  std::set<MacAddr> macs;
  for (size_t h = 0; h < t.nodes.size(); ++h) {
    const Node& n = t.nodes[h];
    if (!n.job) continue;
    for (const auto& nic : n.nics) {
      auto plan = lanes::hostnet::container_neighbors(t, static_cast<int>(h), nic.index);
      REQUIRE(plan.size() == 4);
      MacAddr host_mac = container_link_mac(static_cast<int>(h), nic.index, 0);
      MacAddr cont_mac = container_link_mac(static_cast<int>(h), nic.index, 1);
      CHECK(macs.insert(host_mac).second);
      CHECK(macs.insert(cont_mac).second);
      std::map<std::pair<bool, std::string>, MacAddr> by;
      for (const auto& e : plan) by[{e.in_container, e.ip.to_string()}] = e.mac;
      CHECK(by[{false, nic.cont_side4.addr.to_string()}] == cont_mac);
      CHECK(by[{false, nic.cont_side6.addr.to_string()}] == cont_mac);
      CHECK(by[{true, nic.host_side4.addr.to_string()}] == host_mac);
      CHECK(by[{true, nic.host_side6.addr.to_string()}] == host_mac);
      for (const auto& e : plan)
        CHECK(e.ifname == (e.in_container ? lanes::hostnet::container_ifname(nic.index)
                                          : lanes::hostnet::host_side_ifname(nic.index)));
    }
  }
  // the container links' MACs never equal a fabric link's
  for (size_t k = 0; k < t.links.size(); ++k) {
    CHECK_FALSE(macs.count(link_mac(k, 0)));
    CHECK_FALSE(macs.count(link_mac(k, 1)));
  }
}

TEST_CASE("the host agent's config is written and read back as the same struct", "[unit]") {
  auto t = load_topology(topology("two-racks.xml"));
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    if (t.nodes[i].kind != NodeKind::host || !t.nodes[i].job) continue;
    auto c = lanes::hostnet::host_agent_config(t, static_cast<int>(i), "ab12", EgressMode::bpf);
    REQUIRE(c.nics.size() == t.nodes[i].nics.size());
    CHECK(c.container_netns == "lanes-ab12-" + t.nodes[i].name + ".job");
    CHECK(c.mode == "bpf");
    CHECK(lanes::hostnet::HostAgentConfig::from_json(nlohmann::json::parse(c.to_json().dump())) == c);
  }
  lanes::testbed::RunLayout run("/run/lanes/ab12");
  auto f = lanes::hostnet::host_agent_files(run, "h1");
  CHECK(f.config == "/run/lanes/ab12/hosts/h1/host-agent.json");
  CHECK(f.state == "/run/lanes/ab12/hosts/h1/host-agent-state.json");
}

TEST_CASE("the host agent's state is published and read back as the same struct, by its own reader", "[unit]") {
  using lanes::hostnet::HostAgentState;
  HostAgentState ecmp{"h1", "ecmp", {{0, "nic0", true, true, true, 0, std::nullopt, std::nullopt},
                                     {1, "nic1", false, false, true, 1, std::nullopt, std::nullopt}}, std::nullopt};
  HostAgentState bpf = ecmp;
  bpf.mode = "bpf";
  bpf.nics[0].bpf = HostAgentState::Counters{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  bpf.nics[0].flows = 5;
  bpf.flows = std::vector<HostAgentState::Flow>{{0, 1000, 10, false, 6, 4, 40000, 5201, 1, 0, 125000}, {1, 10, 1, true, 6, 6, 40001, 179, 0, 0, 0}};
  for (const auto& st : {ecmp, bpf}) CHECK(HostAgentState::from_json(nlohmann::json::parse(st.to_json().dump())) == st);
  // lanes status and the runner see the keys they always did
  auto j = bpf.to_json();
  CHECK(j["nics"][0]["bpf"]["moved"] == 7);
  CHECK(j["nics"][1].contains("bpf") == false);
  CHECK(j["flows"][1]["dport"] == 179);
  CHECK(ecmp.to_json().contains("flows") == false);
  std::set<std::string> keys, nic_keys;
  for (const auto& [k, v] : j.items()) keys.insert(k);
  for (const auto& [k, v] : j["nics"][0].items()) nic_keys.insert(k);
  CHECK(keys == std::set<std::string>{"ready", "host", "mode", "nics", "flows"});
  CHECK(nic_keys == std::set<std::string>{"index", "ifname", "up", "carrier", "bfd_ok", "numa", "bpf", "flows"});

  auto dir = std::filesystem::temp_directory_path() / ("lanes-agent-state-" + std::to_string(::getpid()));
  lanes::testbed::RunLayout run(dir.string());
  CHECK_FALSE(lanes::hostnet::read_host_agent_state(run, "h1"));  // none published yet
  auto f = lanes::hostnet::host_agent_files(run, "h1");
  std::filesystem::create_directories(std::filesystem::path(f.state).parent_path());
  std::ofstream(f.state) << bpf.to_json().dump();
  auto back = lanes::hostnet::read_host_agent_state(run, "h1");
  REQUIRE(back);
  CHECK(*back == bpf);
  std::ofstream(f.state, std::ios::trunc) << "{\"nics\": [";  // torn: nothing, not a half
  CHECK_FALSE(lanes::hostnet::read_host_agent_state(run, "h1"));
  std::filesystem::remove_all(dir);
}

namespace {

struct HostPlanRig {
  Topology t = load_topology(topology("laptop.xml"));
  int h1 = t.find_node("h1");
  const Node& h = t.nodes[static_cast<size_t>(h1)];
  FabricPlan fabric = fabric_plan(t, "t1");
  std::string hns = RunRegistry::netns_name("t1", "h1"), jns = lanes::hostnet::job_netns("t1", "h1");
  std::vector<int> nic_ifindex() const {
    std::vector<int> out;
    for (const auto& nic : h.nics) out.push_back(fabric.ifindex.at({h1, t.links[nic.link].b.ifname}));
    return out;
  }
  KernelPlan plan(EgressMode mode, bool netkit) const {
    return lanes::hostnet::host_plan(t, h1, mode, netkit, hns, jns, nic_ifindex());
  }
};

}  // namespace

TEST_CASE("host plan of laptop.xml's h1: a link per NIC, per-NIC tables both sides, a resilient default", "[unit]") {
  HostPlanRig r;
  auto p = r.plan(EgressMode::ecmp, false);
  for (const auto& c : p.changes()) CHECK((c.ns == r.hns || c.ns == r.jns));
  auto veths = p.all<change::Veth>();
  REQUIRE(veths.size() == r.h.nics.size());
  for (const auto& [where, v] : veths) {
    CHECK(where == r.hns);
    CHECK(v.peer_ns == r.jns);
  }
  CHECK(p.all<change::Netkit>().empty());
  CHECK(p.all<change::Neighbor>().size() == r.h.nics.size() * 4);
  // the task IP on the container's lo
  bool task4 = false;
  for (const auto& [where, a] : p.all<change::Address>())
    if (where == r.jns && a.ifname == "lo" && std::holds_alternative<IfAddr4>(a.addr))
      task4 = std::get<IfAddr4>(a.addr).addr == r.h.job->task_ip4;
  CHECK(task4);
  // per NIC and family a table and a source rule in the container, and an
  // iif rule with a table out of the NIC on the host
  auto rules = p.all<change::AddRule>();
  CHECK(rules.size() == r.h.nics.size() * 4);
  // the container's default: a resilient group over every NIC, per family
  auto groups = p.all<change::Group>();
  REQUIRE(groups.size() == 2);
  for (const auto& [where, g] : groups) {
    CHECK(where == r.jns);
    CHECK(g.members.size() == r.h.nics.size());
    REQUIRE(g.resilient);
    CHECK(g.resilient->buckets == 64);
  }
  std::map<std::string, std::vector<Route>> routes;  // ns → routes
  for (const auto& [where, x] : p.all<change::AddRoute>()) routes[where].push_back(x.route);
  int container_defaults = 0;
  for (const auto& rt : routes[r.jns])
    if (rt.dst.is_default() && rt.table == 254) {
      ++container_defaults;
      CHECK(std::holds_alternative<NhId>(rt.to));
      REQUIRE(rt.prefsrc);
      CHECK(*rt.prefsrc == (rt.family() == AF_INET ? IpAddr(r.h.job->task_ip4) : IpAddr(r.h.job->task_ip6)));
    }
  CHECK(container_defaults == 2);
  // the host: the task IP behind every container link, NIC k's table out of NIC k
  auto nic_idx = r.nic_ifindex();
  int task_routes = 0, host_defaults = 0;
  for (const auto& rt : routes[r.hns]) {
    if (rt.dst == IpNet::host(IpAddr(r.h.job->task_ip4))) {
      ++task_routes;
      CHECK(std::get<std::vector<Via>>(rt.to).size() == r.h.nics.size());
    }
    if (rt.dst.is_default() && rt.table != 254) {
      const auto& via = std::get<std::vector<Via>>(rt.to);
      REQUIRE(via.size() == 1);
      CHECK(via[0].ifindex == nic_idx.at(rt.table - 100));
    }
    if (rt.dst.is_default() && rt.table == 254) {
      ++host_defaults;
      CHECK(rt.replace);
      CHECK(std::get<std::vector<Via>>(rt.to).size() == r.h.nics.size());
    }
  }
  CHECK(task_routes == 1);
  CHECK(host_defaults == 2);
}

TEST_CASE("host plan: single egress leaves through NIC 0, netkit links need no neighbours", "[unit]") {
  HostPlanRig r;
  auto single = r.plan(EgressMode::single, false);
  CHECK(single.all<change::Group>().empty());
  CHECK(single.all<change::Nexthop>().empty());
  for (const auto& [where, x] : single.all<change::AddRoute>())
    if (where == r.jns && x.route.dst.is_default() && x.route.table == 254) {
      const auto& via = std::get<std::vector<Via>>(x.route.to);
      REQUIRE(via.size() == 1);
      CHECK(via[0].ifindex == 200 + 100);  // eth0 of the container
    }
  auto nk = r.plan(EgressMode::bpf, true);
  CHECK(nk.all<change::Veth>().empty());
  CHECK(nk.all<change::Netkit>().size() == r.h.nics.size());
  CHECK(nk.all<change::Neighbor>().empty());
  CHECK(nk.all<change::Group>().size() == 2);
}

TEST_CASE("host plan: bind leaves unbound traffic by NIC 0, active-backup has a default by each NIC in turn",
          "[unit]") {
  HostPlanRig r;
  auto bind = r.plan(EgressMode::bind, false);
  CHECK(bind.all<change::Group>().empty());
  CHECK(bind.all<change::AddRule>().size() == r.h.nics.size() * 4);  // the NICs' addresses keep their tables
  int bind_defaults = 0;
  for (const auto& [where, x] : bind.all<change::AddRoute>())
    if (where == r.jns && x.route.dst.is_default() && x.route.table == 254) {
      ++bind_defaults;
      CHECK(std::get<std::vector<Via>>(x.route.to).at(0).ifindex == 200 + 100);
    }
  CHECK(bind_defaults == 2);
  auto ab = r.plan(EgressMode::active_backup, false);
  CHECK(ab.all<change::Group>().empty());
  CHECK(ab.all<change::Nexthop>().empty());
  std::map<int, std::map<uint32_t, int>> by_family;  // family → metric → container link
  for (const auto& [where, x] : ab.all<change::AddRoute>())
    if (where == r.jns && x.route.dst.is_default() && x.route.table == 254) {
      const auto& via = std::get<std::vector<Via>>(x.route.to);
      REQUIRE(via.size() == 1);
      REQUIRE(x.route.prefsrc);
      by_family[x.route.family()][x.route.metric] = via[0].ifindex;
    }
  REQUIRE(by_family.size() == 2);
  for (const auto& [fam, metrics] : by_family) {
    REQUIRE(metrics.size() == r.h.nics.size());
    int k = 0;
    for (const auto& [metric, ifindex] : metrics) {  // in metric order: NIC 0, 1, 2, 3
      CHECK(metric == lanes::hostnet::active_backup_metric(k));
      CHECK(ifindex == 200 + 100 + k);
      ++k;
    }
  }
}

TEST_CASE("host plan of an IPv6-only job: no IPv4 task IP, NIC address, route or group in the container", "[unit]") {
  auto t = load_topology_text(R"(<topology><rack name="r"><host name="h" nics="2"><job family="ipv6" egress="ecmp"/></host>
    </rack></topology>)", "v6.xml");
  int h = t.find_node("h");
  auto fabric = fabric_plan(t, "t1");
  std::vector<int> idx;
  for (const auto& nic : t.nodes[static_cast<size_t>(h)].nics) idx.push_back(fabric.ifindex.at({h, t.links[nic.link].b.ifname}));
  std::string jns = lanes::hostnet::job_netns("t1", "h");
  auto p = lanes::hostnet::host_plan(t, h, EgressMode::ecmp, false, RunRegistry::netns_name("t1", "h"), jns, idx);
  const auto& job = *t.nodes[static_cast<size_t>(h)].job;
  for (const auto& [where, a] : p.all<change::Address>()) {
    if (!std::holds_alternative<IfAddr4>(a.addr)) continue;
    auto v4 = std::get<IfAddr4>(a.addr).addr;
    CHECK_FALSE(v4 == job.task_ip4);
    for (const auto& nic : t.nodes[static_cast<size_t>(h)].nics) CHECK_FALSE(v4 == nic.job_addr4.addr);
  }
  REQUIRE(p.all<change::Group>().size() == 1);
  CHECK(p.all<change::Group>()[0].second.id == 1001);  // the IPv6 group alone
  for (const auto& [where, r] : p.all<change::AddRoute>())
    if (where == jns) CHECK(r.route.dst.family() == AF_INET6);
  auto cfg = lanes::hostnet::host_agent_config(t, h, "t1", EgressMode::ecmp);
  CHECK(cfg.task4.empty());
  CHECK(cfg.task6 == job.task_ip6.to_string());
  CHECK(cfg.nics[0].job4.empty());
}

TEST_CASE("host plan: mptcp has a subflow endpoint on every NIC but the first, a default by each NIC in turn, "
          "and the most subflows the kernel allows", "[unit]") {
  HostPlanRig r;
  auto mp = r.plan(EgressMode::mptcp, false);
  CHECK(mp.all<change::Group>().empty());
  CHECK(mp.all<change::Nexthop>().empty());
  auto limits = mp.all<change::MptcpLimitsSet>();
  REQUIRE(limits.size() == 1);
  CHECK(limits[0].first == r.jns);
  CHECK(limits[0].second.limits == lanes::testbed::MptcpLimits{lanes::testbed::kMptcpMaxSubflows, 0});
  // both families: NICs 1..3, each its own id, its NIC's address, bound to its container link, "subflow" only
  auto eps = mp.all<change::MptcpEndpointAdd>();
  REQUIRE(eps.size() == 2 * (r.h.nics.size() - 1));
  std::set<int> ids;
  for (const auto& [where, e] : eps) {
    CHECK(where == r.jns);
    CHECK(e.endpoint.subflow);
    CHECK_FALSE(e.endpoint.signal);
    ids.insert(e.endpoint.id);
    const auto& nic = r.h.nics.at(static_cast<size_t>(e.endpoint.ifindex - 200 - 100));
    CHECK(nic.index >= 1);
    CHECK((e.endpoint.addr == IpAddr(nic.job_addr4.addr) || e.endpoint.addr == IpAddr(nic.job_addr6.addr)));
    CHECK(e.endpoint.id == lanes::hostnet::mptcp_endpoint_id(nic.index, e.endpoint.addr.is_v6()));
    CHECK(e.ifname == lanes::hostnet::container_ifname(nic.index));
  }
  CHECK(ids.size() == eps.size());
  // the first subflow's route: by NIC 0, then NIC 1, ... (as active-backup)
  std::map<int, std::map<uint32_t, int>> by_family;
  for (const auto& [where, x] : mp.all<change::AddRoute>())
    if (where == r.jns && x.route.dst.is_default() && x.route.table == 254)
      by_family[x.route.family()][x.route.metric] = std::get<std::vector<Via>>(x.route.to).at(0).ifindex;
  REQUIRE(by_family.size() == 2);
  for (const auto& [fam, metrics] : by_family) CHECK(metrics.begin()->second == 200 + 100);
  // the servers accept as many subflows; without an MPTCP job they are left alone
  auto with = [](const char* egress) {
    return load_topology_text(fmt::format(R"(<topology><rack name="r"><host name="h" nics="2"><job egress="{}"/></host>
      <server name="s" role="storage"/></rack></topology>)", egress), "t.xml");
  };
  auto t = with("mptcp");
  auto servers = fabric_plan(t, "t1").routes.all<change::MptcpLimitsSet>();
  REQUIRE(servers.size() == 1);
  CHECK(servers[0].first == RunRegistry::netns_name("t1", "s"));
  CHECK(servers[0].second.limits.subflows == lanes::testbed::kMptcpMaxSubflows);
  CHECK(fabric_plan(with("ecmp"), "t1").routes.all<change::MptcpLimitsSet>().empty());
  // the kernel holds 8 endpoints a namespace: 8 NICs of both families get
  // them on NICs 1..4 of each, of one family on all 7 others
  for (auto [family, want] : {std::pair{"dual", 8u}, std::pair{"ipv6", 7u}}) {
    auto wide = load_topology_text(fmt::format(R"(<topology><rack name="r"><host name="h" nics="8"><job egress="mptcp"
      family="{}"/></host><server name="s" role="storage"/></rack></topology>)", family), "w.xml");
    int h = wide.find_node("h");
    auto fp = fabric_plan(wide, "t1");
    std::vector<int> idx;
    for (const auto& nic : wide.nodes[static_cast<size_t>(h)].nics)
      idx.push_back(fp.ifindex.at({h, wide.links[nic.link].b.ifname}));
    auto plan = lanes::hostnet::host_plan(wide, h, EgressMode::mptcp, false, "hns", "jns", idx);
    CHECK(plan.all<change::MptcpEndpointAdd>().size() == want);
  }
}
