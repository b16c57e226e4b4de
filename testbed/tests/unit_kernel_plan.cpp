// unit tier: what a topology becomes, without root — the address plan as a
// step of its own, the fabric's kernel plan for laptop.xml (links,
// addresses, neighbours, qdiscs, servers' routes), and the typed routes
// plans are made of.

#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "lanes/testbed/address_plan.hpp"
#include "lanes/testbed/neighbors.hpp"
#include "lanes/testbed/fabric.hpp"
#include "lanes/testbed/topology_loader.hpp"
#include "support.hpp"

using namespace lanes::testbed;

TEST_CASE("fabric plan of laptop.xml: a veth pair, addresses and neighbours per link, TBF where shaped", "[unit]") {
  auto t = load_topology(lanes::test::topology("laptop.xml"));
  auto p = fabric_plan(t, "t1");
  auto ns = [&](int node) { return RunRegistry::netns_name("t1", t.nodes[static_cast<size_t>(node)].name); };
  // links: one veth per topology link, made on side A, side B brought up in its namespace
  auto veths = p.links.all<change::Veth>();
  auto ups = p.links.all<change::LinkUp>();
  REQUIRE(veths.size() == t.links.size());
  REQUIRE(ups.size() == t.links.size());
  for (size_t k = 0; k < t.links.size(); ++k) {
    const Link& l = t.links[k];
    CHECK(veths[k].first == ns(l.a.node));
    CHECK(veths[k].second.name == l.a.ifname);
    CHECK(veths[k].second.peer == l.b.ifname);
    CHECK(veths[k].second.peer_ns == ns(l.b.node));
    CHECK(veths[k].second.mac == link_mac(k, 0));
    CHECK(ups[k].first == ns(l.b.node));
    CHECK(ups[k].second.index == p.ifindex.at({l.b.node, l.b.ifname}));
  }
  // interface indexes: from 100 up, unique on each node, and never the
  // index of the link's other end (the kernel would batch its carrier changes)
  std::map<int, std::set<int>> used;
  for (const auto& [where, idx] : p.ifindex) {
    CHECK(idx >= 100);
    CHECK(used[where.first].insert(idx).second);
  }
  for (const auto& l : t.links) CHECK(p.ifindex.at({l.a.node, l.a.ifname}) != p.ifindex.at({l.b.node, l.b.ifname}));
  // addresses: /31 and /127 on both ends; a permanent neighbour per end and family
  CHECK(p.addresses.all<change::Address>().size() == t.links.size() * 4);
  CHECK(p.addresses.all<change::Neighbor>().size() == t.links.size() * 4);
  // TBF on both ends of every shaped link, at its rate
  size_t shaped = 0;
  for (const auto& l : t.links) shaped += l.rate_bps > 0;
  REQUIRE(shaped > 0);
  auto tbfs = p.qdiscs.all<change::Tbf>();
  CHECK(tbfs.size() == shaped * 2);
  for (const auto& [where, tbf] : tbfs) CHECK(tbf.rate_bps > 0);
  // each server: a default route per family through the switch end of its link
  int storage = t.find_node("storage");
  auto routes = p.routes.all<change::AddRoute>();
  REQUIRE(routes.size() == 2);
  for (const auto& [where, r] : routes) {
    CHECK(where == ns(storage));
    CHECK(r.route.dst.is_default());
    const auto& via = std::get<std::vector<Via>>(r.route.to);
    REQUIRE(via.size() == 1);
    REQUIRE(via[0].gateway);
    CHECK(family_of(*via[0].gateway) == r.route.family());
  }
  // one line per change, naming its namespace
  auto lines = p.routes.lines();
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].rfind(ns(storage) + ": route default via ", 0) == 0);
}

TEST_CASE("typed routes: a prefix of either family, a target, and a line that says both", "[unit]") {
  auto p4 = IpNet::parse("198.19.0.0/22");
  REQUIRE(p4);
  CHECK(p4->family() == AF_INET);
  CHECK(p4->prefix_length() == 22);
  CHECK(p4->str() == "198.19.0.0/22");
  auto p6 = IpNet::parse("2001:2::1");  // a bare address: its host prefix
  REQUIRE(p6);
  CHECK(p6->family() == AF_INET6);
  CHECK(p6->str() == "2001:2::1/128");
  CHECK(IpNet::parse("default", AF_INET6)->str() == "default");
  CHECK(IpNet::parse("default", AF_INET6)->family() == AF_INET6);
  CHECK_FALSE(IpNet::parse("198.19.0.1/22"));  // host bits set
  CHECK_FALSE(IpNet::parse("198.19.0.0/33"));
  CHECK_FALSE(IpNet::parse("nowhere"));
  Route multipath{*p4, std::vector<Via>{{*parse_ip("198.18.0.1"), 101, 1}, {*parse_ip("198.18.0.3"), 102, 2}}};
  multipath.table = 201;
  multipath.prefsrc = parse_ip("198.19.1.2");
  CHECK(multipath.describe() ==
        "198.19.0.0/22 table 201 via 198.18.0.1 dev 101 via 198.18.0.3 dev 102 weight 2 src 198.19.1.2");
  CHECK(Route{*p6, NhId{1001}}.describe() == "2001:2::1/128 nhid 1001");
  CHECK(Route{*p4, Blackhole{}}.describe() == "198.19.0.0/22 blackhole");
  Rule rule;
  rule.family = AF_INET6;
  rule.src = p6;
  rule.table = 100;
  rule.priority = 100;
  CHECK(rule.describe() == "-6 from 2001:2::1/128 table 100 pref 100");
  // the MPTCP path manager's changes, as `ip mptcp` would say them
  CHECK(describe(change::MptcpLimitsSet{{8, 0}}) == "mptcp limits subflows 8 add_addr_accepted 0");
  CHECK(describe(change::MptcpEndpointAdd{{2, *parse_ip("198.18.0.9"), 302, true, false}, "eth2"}) ==
        "mptcp endpoint 198.18.0.9 id 2 subflow dev eth2");
}

TEST_CASE("an error in context keeps its code and says where it happened once", "[unit]") {
  auto e = in_context("lanes-t1-h1: route default", os_error(EEXIST, "adding route default in lanes-t1-h1"));
  CHECK(e.code().value() == EEXIST);
  CHECK(std::string(e.what()) == "lanes-t1-h1: route default: adding route default in lanes-t1-h1: File exists");
}

TEST_CASE("address plan: a pure step over the loaded model, giving the same plan again", "[unit]") {
  auto t = load_topology(lanes::test::topology("two-racks.xml"));
  Topology again = t;
  for (auto& l : again.links) l.a.addr4 = l.b.addr4 = {};
  for (auto& n : again.nodes)
    if (n.job) n.job->task_ip4 = Ip4();
  CHECK(plan_addresses(again, {}, "two-racks.xml").empty());
  for (size_t k = 0; k < t.links.size(); ++k) {
    CHECK(again.links[k].a.addr4 == t.links[k].a.addr4);
    CHECK(again.links[k].b.ifname == t.links[k].b.ifname);
  }
  for (size_t i = 0; i < t.nodes.size(); ++i)
    if (t.nodes[i].job) CHECK(again.nodes[i].job->task_ip4 == t.nodes[i].job->task_ip4);
  // pools too small for the fabric: said, with the file
  Topology tight = t;
  tight.pools.infra4 = *parse_net4("198.18.128.0/30");
  auto problems = plan_addresses(tight, {}, "tight.xml");
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].rfind("tight.xml:1: ", 0) == 0);
  CHECK(problems[0].find("infra4 198.18.128.0/30 is too small") != std::string::npos);
}

TEST_CASE("impairments in a topology: a NIC's and a fabric link's, on both ends of the link, checked at their line", "[unit]") {
  auto t = load_topology_text(R"(<topology name="x">
  <spine name="s"/>
  <rack name="r">
    <host name="h" nics="4">
      <nic index="2" loss="1%" duplicate="0.1%"/>
      <nic index="3" delay="5ms" jitter="1ms" distribution="normal"/>
      <job/>
    </host>
  </rack>
  <link a="s" b="r-tor" loss="0.5%"/>
</topology>)",
                              "x.xml");
  const Node& h = t.nodes[static_cast<size_t>(t.find_node("h"))];
  CHECK(h.nics[2].impair == Impairment{10000, 1000});
  CHECK_FALSE(h.nics[2].impair.netem());
  CHECK(h.nics[2].impair_loc.line == 5);
  CHECK_FALSE(h.nics[1].impair.any());
  const Impairment& d = h.nics[3].impair;
  CHECK((d.delay_us == 5000 && d.jitter_us == 1000 && d.distribution == "normal"));
  CHECK((d.netem() && !d.bpf()));
  CHECK(d.describe() == "delay 5ms ± 1ms normal");
  CHECK(d.netem_parts() == "delay, jitter");
  CHECK(h.nics[3].impair_loc.line == 6);
  CHECK(h.nics[3].impair_loc.file == "x.xml");
  auto p = fabric_plan(t, "t1");
  auto ns = [&](int node) { return RunRegistry::netns_name("t1", t.nodes[static_cast<size_t>(node)].name); };
  std::set<std::pair<std::string, std::string>> impaired;
  for (const auto& [where, c] : p.qdiscs.all<change::Impair>()) {
    impaired.insert({where, c.ifname});
    CHECK(c.impairment.any());
  }
  const Link& nic = t.links[static_cast<size_t>(h.nics[2].link)];
  CHECK(impaired.count({ns(nic.a.node), nic.a.ifname}));  // the switch port: what h receives
  CHECK(impaired.count({ns(nic.b.node), nic.b.ifname}));  // the NIC: what h sends
  int fabric = 0;
  for (const auto& l : t.links)
    if (l.kind == LinkKind::fabric) {
      CHECK(l.impair == Impairment{5000, 0});
      CHECK(impaired.count({ns(l.a.node), l.a.ifname}));
      CHECK(impaired.count({ns(l.b.node), l.b.ifname}));
      ++fabric;
    }
  CHECK(fabric == 1);
  const Link& slow = t.links[static_cast<size_t>(h.nics[3].link)];
  CHECK(impaired.count({ns(slow.a.node), slow.a.ifname}));
  CHECK(impaired.count({ns(slow.b.node), slow.b.ifname}));
  CHECK(impaired.size() == 6);  // nothing else

  auto problems = [](const std::string& xml) {
    try {
      (void)load_topology_text(xml, "bad.xml");
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  std::string e = problems(R"(<topology name="x">
  <spine name="s"/>
  <rack name="r">
    <host name="h" nics="4"><nic index="0" loss="2"/><nic index="1" delay="5 ms"/>
      <nic index="2" jitter="1ms"/><nic index="3" delay="1ms" jitter="2ms"/></host>
    <host name="g" nics="3"><nic index="0" delay="1ms" distribution="normal"/><nic index="1" reorder="25%"/>
      <nic index="2" delay="2ms" jitter="1ms" distribution="gaussian"/></host>
  </rack>
  <link a="s" b="r-tor" duplicate="0%" delay="11s"/>
</topology>)");
  INFO(e);
  for (const char* want : {
           "bad.xml:4: <nic> loss=\"2\": expected a percentage like 1% or 0.05%",
           "bad.xml:4: <nic> delay=\"5 ms\": expected a delay like 5ms, 250us or 0.5ms",
           "bad.xml:5: <nic> jitter=\"1ms\": a jitter needs a delay=\"...\" it varies",
           "bad.xml:5: <nic> jitter=\"2ms\": at most the delay (1ms)",
           "bad.xml:6: <nic> distribution=\"normal\": a distribution is the jitter's",
           "bad.xml:6: <nic> reorder=\"25%\": netem reorders by sending some packets at once",
           "bad.xml:7: <nic> distribution=\"gaussian\": expected one of uniform, normal, pareto, paretonormal",
           "bad.xml:9: <link> delay=\"11s\": expected a delay of at most 10s",
       }) {
    INFO(want);
    CHECK(e.find(want) != std::string::npos);
  }
}

TEST_CASE("fabric plan of one machine's shard: its nodes, and a VXLAN end for each link to another machine",
          "[unit]") {
  auto t = load_topology(lanes::test::topology("two-racks.xml"));
  auto placement = place(t, 2);  // r1 with spine1 on machine 0, r2 on machine 1
  REQUIRE(placement.cross.size() == 1);
  const CrossLink& c = placement.cross.front();
  const Link& crossing = t.links[static_cast<size_t>(c.link)];
  auto whole = fabric_plan(t, "t1");
  std::vector<IpAddr> underlay{*parse_ip("198.18.9.1"), *parse_ip("198.18.9.2")};
  size_t veths = 0, addresses = 0, neighbours = 0, tbfs = 0;
  std::vector<change::Vxlan> ends;
  for (int m = 0; m < 2; ++m) {
    Shard shard{&placement, m, underlay};
    auto p = fabric_plan(t, "t1", &shard);
    for (const auto& [ns, v] : p.links.all<change::Veth>()) {
      // a veth only between two nodes of this machine
      CHECK(v.peer_ns.find("t1") != std::string::npos);
      ++veths;
    }
    for (const auto& [ns, a] : p.addresses.all<change::Address>()) {
      INFO(ns);
      bool mine = false;
      for (int n : placement.share[static_cast<size_t>(m)].nodes)
        mine = mine || ns == RunRegistry::netns_name("t1", t.nodes[static_cast<size_t>(n)].name);
      CHECK(mine);
      ++addresses;
    }
    neighbours += p.addresses.all<change::Neighbor>().size();
    tbfs += p.qdiscs.all<change::Tbf>().size();
    auto vx = p.links.all<change::Vxlan>();
    REQUIRE(vx.size() == 1);
    const auto& [ns, v] = vx.front();
    int node = m == c.machine_a ? crossing.a.node : crossing.b.node;
    CHECK(ns == RunRegistry::netns_name("t1", t.nodes[static_cast<size_t>(node)].name));
    CHECK(v.name == (m == c.machine_a ? crossing.a.ifname : crossing.b.ifname));
    CHECK(v.vni == c.vni + vni_offset("t1"));  // the link's VNI in the run's own slot
    CHECK(v.local == underlay[static_cast<size_t>(m)]);
    CHECK(v.remote == underlay[static_cast<size_t>(1 - m)]);
    CHECK(v.dstport == kVxlanPort);
    CHECK(v.mtu == 1450);  // a 1500-byte underlay leaves 1450 for an IPv4 underlay's VXLAN
    CHECK(p.ifindex.at({node, v.name}) == v.index);
    ends.push_back(v);
  }
  // the two shards make, together, what one machine would: every veth but
  // the crossing link's, every address, neighbour and TBF
  CHECK(veths == whole.links.all<change::Veth>().size() - 1);
  CHECK(addresses == whole.addresses.all<change::Address>().size());
  CHECK(neighbours == whole.addresses.all<change::Neighbor>().size());
  CHECK(tbfs == whole.qdiscs.all<change::Tbf>().size());
  // the ends' MACs are the veth's, so the permanent neighbours still hold
  auto v = whole.links.all<change::Veth>().at(static_cast<size_t>(c.link)).second;
  CHECK(ends[0].mac == v.mac);
  CHECK(ends[1].mac == v.peer_mac);
  CHECK(ends[0].mtu == ends[1].mtu);
  // underlay headroom: a jumbo underlay keeps 1500, an IPv6 one costs 70
  Shard jumbo{&placement, 0, underlay, kVxlanPort, 9000};
  CHECK(jumbo.tunnel_mtu() == 1500);
  Shard v6{&placement, 0, {*parse_ip("2001:2:ff::1"), *parse_ip("2001:2:ff::2")}};
  CHECK(v6.tunnel_mtu() == 1430);
}
