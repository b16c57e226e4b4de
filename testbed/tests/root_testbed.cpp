#include <linux/rtnetlink.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <set>

#include "lanes/testbed/delay_line.hpp"
#include "lanes/testbed/netlink.hpp"
#include "root_support.hpp"

using namespace lanes::testbed;
using lanes::test::eventually;
using lanes::test::ScopedRun;
using lanes::test::topology;

namespace {

size_t members_of(Netlink& nl, uint32_t group) {
  auto nhs = nl.nexthops();
  if (!nhs) return 0;
  for (const auto& n : nhs.value())
    if (n.id == group) return n.members.size();
  return 0;
}

bool has_nexthop(Netlink& nl, uint32_t id) {
  auto nhs = nl.nexthops();
  if (!nhs) return false;
  return std::any_of(nhs.value().begin(), nhs.value().end(), [&](auto& n) { return n.id == id; });
}

void check_built(ScopedRun& run) {
  const auto& t = run.topo();
  auto names = list_netns(RunRegistry::netns_prefix(run.id()));
  CHECK(names.size() == t.nodes.size());
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    auto links = run.tb().netlink(static_cast<int>(i)).links();
    REQUIRE(links.ok());
    // a delayed end's delay line has its tap pair beside it (lanes' own, not the topology's)
    std::set<std::string> taps;
    for (const auto& l : links.value()) taps.insert({delay_tap_name(l.index, 'a'), delay_tap_name(l.index, 'b')});
    size_t veths = 0;
    for (const auto& l : links.value()) {
      if (l.name == "lo" || taps.count(l.name)) continue;
      ++veths;
      INFO(t.nodes[i].name << " " << l.name);
      CHECK(l.admin_up);
      CHECK(l.carrier);
    }
    CHECK(veths == t.links_of(static_cast<int>(i)).size());
  }
}

}  // namespace

TEST_CASE("each shipped topology comes up with every namespace and link and carrier", "[root]") {
  // every file in topologies/, found there: a new one is covered at once
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(topology("laptop.xml")).parent_path()))
    if (e.path().extension() == ".xml") files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  CHECK(files.size() >= 6);
  for (const auto& f : files) {
    INFO(f);
    // a link's delay by lanes' delay line is a daemon's (lanes-delay): such
    // a topology comes up with its switches' daemons, as lanes up brings it
    auto t = load_topology(topology(f));
    bool daemons = delay_by_lanes(t) && std::any_of(t.links.begin(), t.links.end(),
                                                    [](const Link& l) { return l.impair.netem(); });
    ScopedRun run(topology(f), daemons);
    check_built(run);
  }
}

TEST_CASE("a host NIC reaches its switch port over IPv4 and IPv6", "[root]") {
  ScopedRun run(topology("laptop.xml"));
  const auto& t = run.topo();
  int h1 = run.node("h1");
  for (int li : t.links_of(h1)) {
    const Link& l = t.links[li];
    INFO(l.b.ifname);
    CHECK(run.run_in("h1", {"ping", "-c", "1", "-W", "2", l.a.addr4.addr.to_string()}) == 0);
    CHECK(run.run_in("h1", {"ping", "-c", "1", "-W", "2", l.a.addr6.addr.to_string()}) == 0);
  }
  // and nothing else is reachable: no routes beyond the connected /31s yet
  CHECK(run.run_in("h1", {"ping", "-c", "1", "-W", "1", "198.18.128.17"}) != 0);
}

TEST_CASE("TBF line rate is installed on both ends of every host NIC", "[root]") {
  ScopedRun run(topology("laptop.xml"));
  auto check = [&](const std::string& node, const std::string& ifname, uint64_t rate) {
    INFO(node << ":" << ifname);
    int n = run.node(node);
    auto idx = run.tb().ifindex(n, ifname);
    REQUIRE(idx.ok());
    auto qd = run.tb().netlink(n).qdiscs();
    REQUIRE(qd.ok());
    uint64_t found = 0;
    for (const auto& q : qd.value())
      if (q.index == idx.value() && q.kind == "tbf") found = q.rate_bps;
    CHECK(found == rate);
  };
  for (int i = 0; i < 4; ++i) check("h1", "nic" + std::to_string(i), 500'000'000);
  for (int i = 1; i <= 8; ++i) check("r1-tor", "swp" + std::to_string(i), 500'000'000);
  check("r1-tor", "swp9", 0);  // the storage server's link is unshaped
  check("storage", "eth0", 0);
}

TEST_CASE("multipath routes spread over the NICs and reach the storage server", "[root]") {
  ScopedRun run(topology("laptop.xml"));
  const auto& t = run.topo();
  int h1 = run.node("h1"), storage = run.node("storage");
  std::vector<Via> vias;
  for (int li : t.links_of(h1))
    vias.push_back({IpAddr(t.links[li].a.addr4.addr), run.tb().ifindex(h1, t.links[li].b.ifname).value(), 1});
  Route mp{*IpNet::parse("198.18.128.16/31"), vias};
  REQUIRE(run.tb().netlink(h1).add_route(mp).ok());
  Route back{*IpNet::parse("198.18.128.0/28"),
             std::vector<Via>{{*parse_ip("198.18.128.16"), run.tb().ifindex(storage, "eth0").value(), 1}}};
  REQUIRE(run.tb().netlink(storage).add_route(back).ok());
  auto routes = run.tb().netlink(h1).route_entries(AF_INET);
  REQUIRE(routes.ok());
  int paths = 0;
  for (const auto& r : routes.value())
    if (r.dst == "198.18.128.16/31") paths = r.paths;
  CHECK(paths == static_cast<int>(t.links_of(h1).size()));
  CHECK(run.run_in("h1", {"ping", "-c", "1", "-W", "2", "198.18.128.17"}) == 0);
}

TEST_CASE("a resilient nexthop group shrinks when a link loses carrier", "[root]") {
  ScopedRun run(topology("laptop.xml"));
  const auto& t = run.topo();
  int sw = run.node("r1-tor"), h1 = run.node("h1");
  auto& nl = run.tb().netlink(sw);
  std::vector<std::pair<uint32_t, uint16_t>> members;
  auto add_nh = [&](int nic) {
    const Link& l = t.links[t.nodes[h1].nics[nic].link];
    return nl.add_nexthop(static_cast<uint32_t>(nic + 1), run.tb().ifindex(sw, l.a.ifname).value(),
                          IpAddr(l.b.addr4.addr));
  };
  for (int nic = 0; nic < 4; ++nic) {
    REQUIRE(add_nh(nic).ok());
    members.emplace_back(nic + 1, 1);
  }
  ResilientParams rp;
  rp.buckets = 32;
  REQUIRE(nl.add_nexthop_group(100, members, rp).ok());
  Route r{*IpNet::parse("198.19.0.1/32"), NhId{100}};
  REQUIRE(nl.add_route(r).ok());
  auto nhs = nl.nexthops();
  REQUIRE(nhs.ok());
  bool resilient = false;
  for (const auto& n : nhs.value())
    if (n.id == 100) resilient = n.resilient && n.buckets == 32;
  CHECK(resilient);
  CHECK(members_of(nl, 100) == 4);

  // the host takes NIC 2 down: the switch port loses carrier and the kernel
  // deletes the next hop behind it
  auto mon = LinkMonitor::open_in(run.tb().netns(sw).fd(), "switch");
  REQUIRE(mon.ok());
  REQUIRE(run.tb().netlink(h1).set_link_up(run.tb().ifindex(h1, "nic2").value(), false, "nic2").ok());
  CHECK(eventually([&] { return members_of(nl, 100) == 3; }));
  CHECK_FALSE(has_nexthop(nl, 3));
  // the link monitor saw swp3 lose carrier
  bool saw = false;
  CHECK(eventually([&] {
    auto ev = mon.value().read_events();
    if (ev)
      for (const auto& e : ev.value())
        if (e.name == "swp3" && !e.carrier) saw = true;
    return saw;
  }));

  // carrier returns; the next hop is the control plane's to re-add
  REQUIRE(run.tb().netlink(h1).set_link_up(run.tb().ifindex(h1, "nic2").value(), true, "nic2").ok());
  CHECK(eventually([&] {
    auto l = nl.link("swp3");
    return l.ok() && l.value() && l.value()->carrier;
  }));
  CHECK_FALSE(has_nexthop(nl, 3));
  REQUIRE(add_nh(2).ok());
  REQUIRE(nl.add_nexthop_group(100, members, rp, /*replace=*/true).ok());
  CHECK(members_of(nl, 100) == 4);
}

TEST_CASE("a link monitor that overran its socket buffer still sees every link's state", "[root]") {
  ScopedRun run(topology("laptop.xml"));
  int sv = run.tb().topology().find_node("storage");
  auto& nl = run.tb().netlink(sv);
  auto mon = LinkMonitor::open_in(run.tb().netns(sv).fd(), "storage");
  REQUIRE(mon.ok());
  // the socket's buffer set here, whatever net.core.rmem_default this
  // machine has: 64 KiB (the kernel doubles the 32 KiB asked for), which
  // 800 events of over a KiB each overrun and a dump of the links' state
  // still passes through (the kernel sends a dump as the reader drains it)
  int small = 32 * 1024;
  REQUIRE(::setsockopt(mon.value().fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small) == 0);
  // 400 new links (200 veth pairs, both ends here) and 400 state changes
  // unread: far more than the socket buffer holds, so the kernel drops events
  for (int i = 0; i < 400; i += 2)
    REQUIRE(nl.create_veth(fmt::format("lt{}", i), 0, fmt::format("lt{}", i + 1), 0, -1, "storage", false).ok());
  for (int i = 0; i < 400; ++i) {
    auto idx = nl.ifindex(fmt::format("lt{}", i));
    REQUIRE(idx.ok());
    REQUIRE(nl.set_link_up(idx.value(), true, fmt::format("lt{}", i)).ok());
  }
  std::map<std::string, bool> up;
  bool drained = eventually([&] {
    auto ev = mon.value().read_events();
    REQUIRE(ev.ok());
    for (const auto& e : ev.value()) up[e.name] = e.admin_up;
    return ev.value().empty() && up.size() >= 400;
  });
  CHECK(drained);
  CHECK(mon.value().overruns() > 0);
  int seen_up = 0;
  for (int i = 0; i < 400; ++i) seen_up += up[fmt::format("lt{}", i)];
  CHECK(seen_up == 400);  // the last state of every link, dropped events or not
}

TEST_CASE("two runs side by side do not collide", "[root]") {
  ScopedRun a(topology("laptop.xml"));
  CHECK(a.run_in("h1", {"ping", "-c", "1", "-W", "2", "198.18.128.0"}) == 0);
  std::string b_id;
  {
    ScopedRun b(topology("laptop.xml"));
    b_id = b.id();
    CHECK(a.id() != b.id());
    CHECK(list_netns(RunRegistry::netns_prefix(b.id())).size() == 4);
    CHECK(b.run_in("h1", {"ping", "-c", "1", "-W", "2", "198.18.128.0"}) == 0);
  }
  // b is gone, a is whole and still works
  CHECK(list_netns(RunRegistry::netns_prefix(b_id)).empty());
  CHECK(list_netns(RunRegistry::netns_prefix(a.id())).size() == 4);
  check_built(a);
  CHECK(a.run_in("h1", {"ping", "-c", "1", "-W", "2", "198.18.128.0"}) == 0);
}

TEST_CASE("teardown stops processes left inside the run's namespaces", "[root]") {
  std::string id;
  pid_t pid = 0;
  {
    ScopedRun run(topology("laptop.xml"));
    id = run.id();
    ProcessSpec spec{"sleeper", {"sleep", "600"}};
    spec.netns_fd = run.tb().netns(run.node("storage")).fd();
    auto d = Daemon::start(spec);
    REQUIRE(d.ok());
    pid = d.value().pid();
    d.value().detach();
    CHECK(pids_in_netns(run.tb().netns(run.node("storage")).inode()) == std::vector<pid_t>{pid});
  }
  CHECK(eventually([&] { ::waitpid(pid, nullptr, WNOHANG); return process_start_time(pid) == 0; }));
  CHECK(list_netns(RunRegistry::netns_prefix(id)).empty());
}
