#include <catch2/catch.hpp>
#include <filesystem>
#include <set>
#include <fstream>
#include <map>

#include "fake_fib.hpp"
#include "lanes/testbed/topology_loader.hpp"
#include "lanes/testbed/rejoin.hpp"
#include "lanes/testbed/neighbors.hpp"
#include "lanes/switches/fib_agent.hpp"
#include "lanes/switches/switch_config.hpp"
#include "support.hpp"

using namespace lanes::testbed;
using namespace lanes::switches;
using lanes::test::run_command;
using lanes::test::topology;
using lanes::test::FakeFib;
using lanes::test::four_nic_config;
using lanes::test::kH1;


TEST_CASE("switch config renders ownership and containment policies and per-NIC sessions", "[unit]") {
  auto t = load_topology(topology("two-racks.xml"));
  std::string r1 = render_gobgp_config(t, t.find_node("r1-tor"));
  // a host's four sessions are one prefix; the rack's eight, another
  CHECK(r1.find("neighbor-set-name = \"host-r1h1\"\n  neighbor-info-list = [\"198.19.1.0/30\"]") != std::string::npos);
  CHECK(r1.find("neighbor-set-name = \"hosts\"\n  neighbor-info-list = [\"198.19.1.0/29\"]") != std::string::npos);
  CHECK(r1.find("name = \"nothing-to-injectors\"") < r1.find("name = \"no-task-routes-beyond-the-rack4\""));
  CHECK(r1.find("ip-prefix = \"198.19.0.1/32\"") != std::string::npos);
  CHECK(r1.find("masklength-range = \"23..32\"") != std::string::npos);
  CHECK(r1.find("masklength-range = \"65..128\"") != std::string::npos);
  CHECK(r1.find("name = \"no-task-routes-beyond-the-rack4\"") != std::string::npos);
  CHECK(r1.find("name = \"no-task-routes-beyond-the-rack6\"") != std::string::npos);
  CHECK(r1.find("max-prefixes = 4") != std::string::npos);
  CHECK(r1.find("passive-mode = true") != std::string::npos);
  auto nbs = switch_neighbors(t, t.find_node("r1-tor"));
  CHECK(nbs.size() == 9);  // 2 hosts x 4 NICs + the spine
  auto spine = switch_neighbors(t, t.find_node("spine1"));
  CHECK(spine.size() == 2);
  std::string s = render_gobgp_config(t, t.find_node("spine1"));
  CHECK(s.find("lanes-ownership") == std::string::npos);  // spines carry no host policy

  auto ap = load_topology_text(R"(<topology><rack name="r" max-prefixes="2" buckets="32" unbalanced-timer="3">
    <host name="h"><job vip="add-path"/></host></rack></topology>)", "ap.xml");
  auto nb = switch_neighbors(ap, ap.find_node("r-tor"));
  REQUIRE(nb.size() == 2);  // ADD-PATH: two sessions per host, on NICs 0 and 1
  const Node& aph = ap.nodes[ap.find_node("h")];
  CHECK(nb[0].address == aph.nics[0].job_addr4.addr.to_string());
  CHECK(nb[1].address == aph.nics[1].job_addr4.addr.to_string());
  auto apa = render_agent_config(ap, ap.find_node("r-tor"));
  // the port of each session resets it on carrier loss; NICs 2 and 3 carry none
  CHECK(apa.ports[0].sessions == std::vector<std::string>{nb[0].address});
  CHECK(apa.ports[1].sessions == std::vector<std::string>{nb[1].address});
  CHECK(apa.ports[2].sessions.empty());
  std::string cfg = render_gobgp_config(ap, ap.find_node("r-tor"));
  CHECK(cfg.find("[neighbors.add-paths.config]\n    receive = true") != std::string::npos);
  // each of the host's 4 NICs' paths counts: 2 prefixes a session, 4 paths each
  CHECK(cfg.find("max-prefixes = 8") != std::string::npos);
  CHECK(cfg.find("max-prefixes = 2") == std::string::npos);
  CHECK(apa.resilient.buckets == 32);
  // the peer's MAC on every port, for its permanent neighbours after a flap
  CHECK(apa.ports[0].peer_mac == to_string(link_mac(0, 1)));
  CHECK(apa.resilient.unbalanced_timer_s == 3);
  // the file the agent reads is the config the switch role wrote, whole
  CHECK(AgentConfig::from_json(apa.to_json()) == apa);
  // the file's keys as lanes-fib-agent has always read them
  std::set<std::string> keys, port_keys;
  const nlohmann::json apa_file = apa.to_json();
  for (const auto& [k, v] : apa_file.items()) keys.insert(k);
  for (const auto& [k, v] : apa_file["ports"][0].items()) port_keys.insert(k);
  CHECK(keys == std::set<std::string>{"node", "api", "resilient", "originate", "blackhole", "ports", "static",
                                      "stale_timeout_s"});  // bfd_socket only where deploy_switches starts a bfdd
  CHECK(port_keys == std::set<std::string>{"ifname", "peer", "match", "gw4", "gw6", "peer_mac", "sessions"});
  CHECK(apa.to_json()["resilient"]["unbalanced_timer_s"] == 3);
  CHECK(four_nic_config().resilient.unbalanced_timer_s == 1);  // the default

  // an IPv6-only job: its sessions over IPv6, it owns its /128 only
  auto v6 = load_topology_text(R"(<topology><rack name="r"><host name="h" nics="2"><job family="ipv6"/></host>
    </rack></topology>)", "v6.xml");
  auto nb6 = switch_neighbors(v6, v6.find_node("r-tor"));
  REQUIRE(nb6.size() == 2);
  const Node& h6 = v6.nodes[v6.find_node("h")];
  CHECK(nb6[0].address == h6.nics[0].job_addr6.addr.to_string());
  CHECK(nb6[0].local == v6.links[h6.nics[0].link].a.addr6.addr.to_string());
  std::string c6 = render_gobgp_config(v6, v6.find_node("r-tor"));
  CHECK(c6.find("task6-h") != std::string::npos);
  CHECK(c6.find("task4-h") == std::string::npos);
  CHECK(c6.find(h6.job->task_ip4.to_string()) == std::string::npos);
  auto a6 = render_agent_config(v6, v6.find_node("r-tor"));
  CHECK(a6.statics.size() == 2);  // the job's IPv6 NIC addresses only
}

TEST_CASE("FIB agent makes a four-member group from four paths and a withdrawal shrinks it in place", "[unit]") {
  FakeFib k;
  FibAgent a(four_nic_config(), k);
  REQUIRE(a.start().ok());
  a.update("198.19.0.1/32", kH1);
  REQUIRE(k.routes_.count("198.19.0.1/32"));
  uint32_t g = k.routes_["198.19.0.1/32"];
  CHECK(k.groups[g].size() == 4);
  CHECK(a.members("198.19.0.1/32") == std::vector<std::string>{"swp1", "swp2", "swp3", "swp4"});
  a.update("198.19.0.1/32", {"198.19.1.0", "198.19.1.1", "198.19.1.3"});
  CHECK(k.routes_["198.19.0.1/32"] == g);  // same group, replaced in place
  CHECK(k.groups[g].size() == 3);
  a.update("198.19.0.1/32", {});
  CHECK_FALSE(k.routes_.count("198.19.0.1/32"));
  CHECK_FALSE(k.groups.count(g));
  // a locally originated path (no port) installs nothing
  a.update("198.19.0.0/22", {"0.0.0.0"});
  CHECK_FALSE(k.routes_.count("198.19.0.0/22"));
}

TEST_CASE("FIB agent restores a next hop when carrier returns", "[unit]") {
  FakeFib k;
  FibAgent a(four_nic_config(), k);
  REQUIRE(a.start().ok());
  a.update("198.19.0.1/32", kH1);
  a.update("2001:2:0:100::1/128", kH1);
  uint32_t g = k.routes_["198.19.0.1/32"];
  int swp3 = k.ifindexes["swp3"];
  k.lose_carrier(swp3);
  // the injector session riding the port is to be reset (once, on the loss)
  CHECK(a.link_changed("swp3", false) == std::vector<std::string>{"198.19.1.2"});  // h1 nic2
  CHECK(a.link_changed("swp3", false).empty());
  CHECK(k.groups[g].size() == 3);
  CHECK(a.members("198.19.0.1/32").size() == 3);
  // BGP still has the path: when carrier returns, the next hop returns
  k.down.erase(swp3);
  CHECK(a.link_changed("swp3", true).empty());
  CHECK(k.groups[g].size() == 4);
  CHECK(k.routes_["198.19.0.1/32"] == g);
  CHECK(a.members("2001:2:0:100::1/128").size() == 4);
}

TEST_CASE("FIB agent takes a port whose BFD path failed out of every group at once and back when it works", "[unit]") {
  FakeFib k;
  FibAgent a(four_nic_config(), k);
  REQUIRE(a.start().ok());
  a.update("198.19.0.1/32", kH1);
  a.update("2001:2:0:100::1/128", kH1);
  uint32_t g = k.routes_["198.19.0.1/32"];
  // carrier stays: only BFD knows; the session riding the port is reset, once
  CHECK(a.bfd_changed("swp3", false) == std::vector<std::string>{"198.19.1.2"});
  CHECK(a.bfd_changed("swp3", false).empty());
  CHECK(k.routes_["198.19.0.1/32"] == g);  // the same group, replaced in place
  CHECK(k.groups[g].size() == 3);
  CHECK(a.members("198.19.0.1/32") == std::vector<std::string>{"swp1", "swp2", "swp4"});
  CHECK(a.members("2001:2:0:100::1/128").size() == 3);
  CHECK(a.state()["bfd_failed"] == nlohmann::json::array({"swp3"}));
  // BGP re-announcing the path does not bring the failed port back
  a.update("198.19.0.1/32", kH1);
  CHECK(k.groups[g].size() == 3);
  // a verdict on a port the agent has not is nothing
  CHECK(a.bfd_changed("nosuch0", false).empty());
  CHECK(a.bfd_changed("swp3", true).empty());
  CHECK(k.groups[g].size() == 4);
  CHECK(a.members("2001:2:0:100::1/128").size() == 4);
  CHECK(a.state()["bfd_failed"].empty());
  // every port of a prefix failed: its route goes, and comes back
  a.update("198.19.0.9/32", {"198.19.1.2"});
  (void)a.bfd_changed("swp3", false);
  CHECK_FALSE(k.routes_.count("198.19.0.9/32"));
  (void)a.bfd_changed("swp3", true);
  CHECK(k.routes_.count("198.19.0.9/32"));
}

TEST_CASE("FIB agent rebuilds a group emptied by carrier loss", "[unit]") {
  FakeFib k;
  FibAgent a(four_nic_config(), k);
  REQUIRE(a.start().ok());
  a.update("198.19.0.1/32", {"198.19.1.2"});
  int swp3 = k.ifindexes["swp3"];
  k.lose_carrier(swp3);
  a.link_changed("swp3", false);
  CHECK_FALSE(k.routes_.count("198.19.0.1/32"));
  k.down.erase(swp3);
  a.link_changed("swp3", true);
  REQUIRE(k.routes_.count("198.19.0.1/32"));
  CHECK(k.groups[k.routes_["198.19.0.1/32"]].size() == 1);
}

TEST_CASE("FIB agent keeps stale routes while gobgpd is gone and reconcile drops only what is gone", "[unit]") {
  FakeFib k;
  FibAgent a(four_nic_config(), k);
  REQUIRE(a.start().ok());
  a.update("198.19.0.1/32", kH1);
  a.update("198.19.0.2/32", {"198.19.1.4", "198.19.1.5"});
  uint32_t g1 = k.routes_["198.19.0.1/32"];
  a.set_stale(true);
  // sessions come back one at a time: the group must not shrink meanwhile
  a.update("198.19.0.1/32", {"198.19.1.0"});
  CHECK(k.groups[g1].size() == 4);
  int writes = k.group_writes;
  a.reconcile({{"198.19.0.1/32", kH1}});
  CHECK(k.groups[g1].size() == 4);
  CHECK(k.group_writes == writes);       // unchanged group: no kernel write
  CHECK_FALSE(k.routes_.count("198.19.0.2/32"));  // no longer in the RIB
}

TEST_CASE("FIB agent restarted adopts valid routes without touching them", "[unit]") {
  FakeFib k;
  {
    FibAgent a(four_nic_config(), k);
    REQUIRE(a.start().ok());
    a.update("198.19.0.1/32", kH1);
    a.update("198.19.0.2/32", {"198.19.1.4"});
  }
  uint32_t g1 = k.routes_["198.19.0.1/32"];
  int group_writes = k.group_writes, route_writes = k.route_writes;
  FibAgent b(four_nic_config(), k);
  REQUIRE(b.start().ok());
  CHECK(b.members("198.19.0.1/32").size() == 4);
  b.reconcile({{"198.19.0.1/32", kH1}});
  CHECK(k.routes_["198.19.0.1/32"] == g1);
  CHECK(k.group_writes == group_writes);
  CHECK(k.route_writes == route_writes);
  CHECK_FALSE(k.routes_.count("198.19.0.2/32"));
  // new prefixes get fresh group ids that do not collide with adopted ones
  b.update("198.19.0.3/32", {"198.19.1.1"});
  CHECK(k.routes_["198.19.0.3/32"] != g1);
}

TEST_CASE("FIB agent pulls a share of the busy buckets onto a returned next hop, then evens the weights", "[unit]") {
  FakeFib k;
  FibAgent a(four_nic_config(), k);  // unbalanced timer 1 s, the default
  auto clock = std::chrono::steady_clock::now();
  a.set_clock([&] { return clock; });
  REQUIRE(a.start().ok());
  a.update("198.19.0.1/32", kH1);
  clock += std::chrono::seconds(5);
  uint32_t g = k.routes_["198.19.0.1/32"];
  int swp3 = k.ifindexes["swp3"];
  k.lose_carrier(swp3);
  (void)a.link_changed("swp3", false);
  REQUIRE(k.groups[g].size() == 3);
  // 128 buckets, 32 of them carrying flows
  std::vector<BucketInfo> b(128);
  for (size_t i = 0; i < b.size(); ++i) b[i] = {k.groups[g][i % 3], i % 4 == 0 ? 0u : 500u};
  k.bucket_activity[g] = b;
  k.down.erase(swp3);
  // back within a second of the group's last change: idle times say
  // nothing yet, so a plain replace
  (void)a.link_changed("swp3", true);
  CHECK(k.weights[g][1000 + 2 * 2] == 1);
  CHECK_FALSE(a.next_deadline());
  k.lose_carrier(swp3);
  (void)a.link_changed("swp3", false);
  clock += std::chrono::seconds(10);
  k.down.erase(swp3);
  auto before = clock;
  (void)a.link_changed("swp3", true);
  REQUIRE(k.groups[g].size() == 4);
  // the others want N / (n - 1 + w) = 128 / 16 = 8 buckets each: their busy share
  uint32_t back = 1000 + 2 * 2;  // swp3 is port 2: h1 nic2's IPv4 next hop
  CHECK(k.weights[g][back] == 13);
  for (auto [m, w] : k.weights[g])
    if (m != back) CHECK(w == 1);
  auto due = a.next_deadline();
  REQUIRE(due);
  CHECK(*due - before >= std::chrono::milliseconds(1500));  // unbalanced timer and the kernel's upkeep interval
  a.tick(*due - std::chrono::milliseconds(1));
  CHECK(k.weights[g][back] == 13);  // not yet
  // the kernel has handed over the idle buckets but not yet forced the busy
  // ones: the others hold 10 each, more than the 8 they want
  auto held = [&](std::vector<std::pair<uint32_t, size_t>> counts) {
    std::vector<BucketInfo> t;
    for (auto [nh, n] : counts) t.insert(t.end(), n, BucketInfo{nh, 0});
    k.bucket_activity[g] = t;
  };
  held({{1000, 10}, {1002, 10}, {back, 98}, {1006, 10}});
  a.tick(*due);
  CHECK(k.weights[g][back] == 13);  // waits on
  auto again = a.next_deadline();
  REQUIRE(again);
  CHECK(*again - *due == kRejoinRecheck);
  held({{1000, 8}, {1002, 8}, {back, 104}, {1006, 8}});
  a.tick(*again);
  CHECK(k.weights[g][back] == 1);
  CHECK_FALSE(a.next_deadline());
  CHECK(a.members("198.19.0.1/32").size() == 4);

  // no flow at all, or a group without an unbalanced timer: a plain replace
  k.lose_carrier(swp3);
  (void)a.link_changed("swp3", false);
  clock += std::chrono::seconds(10);
  for (auto& x : k.bucket_activity[g]) x.idle_cs = 500;
  k.down.erase(swp3);
  (void)a.link_changed("swp3", true);
  CHECK(k.weights[g][back] == 1);
  CHECK_FALSE(a.next_deadline());

  // a kernel that never settles: the weights go back to even at the limit
  k.lose_carrier(swp3);
  (void)a.link_changed("swp3", false);
  clock += std::chrono::seconds(10);
  for (size_t i = 0; i < k.bucket_activity[g].size(); ++i)
    k.bucket_activity[g][i] = {k.groups[g][i % 3], i % 4 == 0 ? 0u : 500u};
  k.down.erase(swp3);
  before = clock;
  (void)a.link_changed("swp3", true);
  REQUIRE(k.weights[g][back] == 13);
  while (auto d = a.next_deadline()) {
    REQUIRE(*d - before <= std::chrono::seconds(7));
    a.tick(*d);
  }
  CHECK(k.weights[g][back] == 1);
}

TEST_CASE("holds_share: a returned member holds its even share of the buckets, one short allowed", "[unit]") {
  auto group = [](std::vector<std::pair<uint32_t, size_t>> held) {
    std::vector<BucketInfo> b;
    for (auto [nh, n] : held) b.insert(b.end(), n, BucketInfo{nh, 0});
    return b;
  };
  CHECK_FALSE(holds_share(group({{1, 43}, {2, 43}, {4, 42}}), 3, 4));  // not moved yet
  CHECK_FALSE(holds_share(group({{1, 40}, {2, 40}, {3, 8}, {4, 40}}), 3, 4));  // moving
  CHECK(holds_share(group({{1, 32}, {2, 32}, {3, 32}, {4, 32}}), 3, 4));
  CHECK(holds_share(group({{1, 33}, {2, 33}, {3, 31}, {4, 31}}), 3, 4));  // one short of 32
  CHECK(holds_share(group({{1, 20}, {2, 20}, {3, 68}, {4, 20}}), 3, 4));  // weighted: more than its share
  CHECK(holds_share({}, 3, 4));  // no group to read
}

TEST_CASE("balanced: every member of a resilient group holds its share of the buckets", "[unit]") {
  auto group = [](std::vector<std::pair<uint32_t, size_t>> held) {
    std::vector<BucketInfo> b;
    for (auto [nh, n] : held) b.insert(b.end(), n, BucketInfo{nh, 0});
    return b;
  };
  CHECK(balanced(group({{1, 16}, {2, 16}, {3, 16}, {4, 16}}), {1, 2, 3, 4}));
  CHECK(balanced(group({{1, 17}, {2, 16}, {3, 16}, {4, 15}}), {1, 2, 3, 4}));   // one short of 16
  CHECK_FALSE(balanced(group({{1, 22}, {2, 21}, {4, 21}}), {1, 2, 3, 4}));      // 3 back, no bucket yet
  CHECK_FALSE(balanced(group({{1, 1}, {2, 1}, {3, 61}, {4, 1}}), {1, 2, 3, 4}));  // weighted toward 3
  CHECK_FALSE(balanced(group({{1, 2}, {2, 2}, {3, 58}, {4, 2}}), {1, 2, 3, 4}));  // evening, not yet moved back
  CHECK(balanced(group({{1, 22}, {2, 21}, {4, 21}}), {1, 2, 4}));
  CHECK_FALSE(balanced({}, {1, 2, 3, 4}));  // no group read
}

TEST_CASE("rejoin_weight: a returned member's weight is its share of the busy buckets", "[unit]") {
  auto buckets = [](size_t n, size_t busy) {
    std::vector<BucketInfo> b(n, BucketInfo{1, 500});
    for (size_t i = 0; i < busy; ++i) b[i].idle_cs = 0;
    return b;
  };
  CHECK(rejoin_weight(buckets(128, 32), 4, 1, 100) == 13);  // others want 128 / 16 = 8: a quarter of 32
  CHECK(rejoin_weight(buckets(128, 32), 4, 2, 100) == 7);   // others want 128 / 16 = 8 again
  CHECK(rejoin_weight(buckets(64, 16), 4, 1, 100) == 13);
  CHECK(rejoin_weight(buckets(128, 128), 4, 1, 100) == 1);  // every bucket busy: the kernel moves busy ones anyway
  CHECK(rejoin_weight(buckets(128, 0), 4, 1, 100) == 1);    // nothing to move
  CHECK(rejoin_weight(buckets(128, 32), 4, 4, 100) == 1);   // all returning: nothing to take from
  CHECK(rejoin_weight(buckets(128, 1), 16, 1, 100) == 255); // bounded by the kernel's weights
  CHECK(rejoin_weight({}, 4, 1, 100) == 1);
  // busy by the kernel's own idle timer: idle for 5 s is busy under a
  // 120 s timer, and with every bucket busy the weights would only scatter
  CHECK(rejoin_weight(buckets(128, 32), 4, 1, 12000) == 1);
  CHECK(rejoin_weight(buckets(128, 32), 4, 1, 600) == 1);
  CHECK(rejoin_weight(buckets(128, 32), 4, 1, 500) == 13);
}
