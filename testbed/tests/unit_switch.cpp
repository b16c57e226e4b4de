#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>

#include "lanes/testbed/fib_agent.hpp"
#include "lanes/testbed/switch_config.hpp"
#include "lanes/testbed/topology_loader.hpp"
#include "support.hpp"

using namespace lanes::testbed;
using lanes::test::run_command;
using lanes::test::topology;

namespace {

// A kernel that keeps nexthops, groups and routes in maps, and drops a
// port's next hops when told its carrier went (as the kernel does).
class FakeFib : public KernelFib {
 public:
  std::map<std::string, int> ifindexes;
  std::map<uint32_t, std::pair<int, std::string>> nhs;  // id → oif, gw
  std::map<uint32_t, std::vector<uint32_t>> groups;
  std::map<std::string, uint32_t> routes_;  // prefix → group
  std::set<int> down;                        // oifs without carrier
  int group_writes = 0, route_writes = 0;

  Result<int> ifindex(const std::string& n) override {
    if (!ifindexes.count(n)) ifindexes[n] = 10 + static_cast<int>(ifindexes.size());
    return ifindexes[n];
  }
  Result<std::vector<NexthopInfo>> nexthops() override {
    std::vector<NexthopInfo> out;
    for (auto& [id, v] : nhs) out.push_back({id, kProtoBgp, v.first, v.second});
    for (auto& [id, m] : groups) {
      NexthopInfo g{id, kProtoBgp};
      g.is_group = true;
      g.resilient = true;
      for (auto x : m) g.members.emplace_back(x, 1);
      out.push_back(g);
    }
    return out;
  }
  Result<std::vector<RouteEntry>> routes(int family) override {
    std::vector<RouteEntry> out;
    for (auto& [p, g] : routes_)
      if ((p.find(':') != std::string::npos) == (family == AF_INET6)) {
        RouteEntry e;
        e.family = family;
        e.dst = p;
        e.protocol = kProtoBgp;
        e.nh_id = g;
        out.push_back(e);
      }
    return out;
  }
  Status add_nexthop(uint32_t id, int oif, const std::string& gw) override {
    if (down.count(oif)) return os_error(ENETDOWN, "carrier down");
    nhs[id] = {oif, gw};
    return {};
  }
  Status set_group(uint32_t id, const std::vector<uint32_t>& m, const ResilientParams&, bool replace) override {
    if (!replace && groups.count(id)) return os_error(EEXIST, "exists");
    for (auto x : m)
      if (!nhs.count(x)) return os_error(EINVAL, "no such member");
    groups[id] = m;
    ++group_writes;
    return {};
  }
  Status delete_nexthop(uint32_t id) override {
    nhs.erase(id);
    groups.erase(id);
    return {};
  }
  Status set_route(const std::string& p, uint32_t g) override {
    if (!groups.count(g)) return os_error(EINVAL, "no group");
    routes_[p] = g;
    ++route_writes;
    return {};
  }
  Status delete_route(const std::string& p) override {
    routes_.erase(p);
    return {};
  }
  Status add_static(const AgentStatic&, int) override { return {}; }
  Status add_blackhole(const std::string&) override { return {}; }

  // the kernel's reaction to carrier loss on OIF
  void lose_carrier(int oif) {
    down.insert(oif);
    std::set<uint32_t> gone;
    for (auto it = nhs.begin(); it != nhs.end();)
      if (it->second.first == oif) {
        gone.insert(it->first);
        it = nhs.erase(it);
      } else {
        ++it;
      }
    for (auto it = groups.begin(); it != groups.end();) {
      auto& m = it->second;
      m.erase(std::remove_if(m.begin(), m.end(), [&](uint32_t x) { return gone.count(x); }), m.end());
      if (m.empty()) {
        uint32_t g = it->first;
        for (auto r = routes_.begin(); r != routes_.end();) r = r->second == g ? routes_.erase(r) : std::next(r);
        it = groups.erase(it);
      } else {
        ++it;
      }
    }
  }
};

AgentConfig four_nic_config() {
  auto t = load_topology(topology("laptop.xml"));
  return AgentConfig::from_json(render_agent_config(t, t.find_node("r1-tor")));
}

const std::vector<std::string> kH1 = {"198.19.1.0", "198.19.1.1", "198.19.1.2", "198.19.1.3"};

}  // namespace

TEST_CASE("rendered gobgpd configurations pass gobgpd --dry-run", "[unit]") {
  for (const char* f : {"laptop.xml", "two-racks.xml", "rack-64.xml"}) {
    auto t = load_topology(topology(f));
    for (size_t i = 0; i < t.nodes.size(); ++i) {
      if (t.nodes[i].kind != NodeKind::rack_switch && t.nodes[i].kind != NodeKind::spine) continue;
      INFO(f << " " << t.nodes[i].name);
      auto path = std::filesystem::temp_directory_path() / ("lanes-gobgpd-" + std::to_string(::getpid()) + ".toml");
      std::ofstream(path) << render_gobgp_config(t, static_cast<int>(i));
      auto r = run_command("gobgpd --dry-run -t toml -f " + path.string());
      CHECK(r.status == 0);
      std::filesystem::remove(path);
    }
  }
}

TEST_CASE("switch config renders ownership and containment policies and per-NIC sessions", "[unit]") {
  auto t = load_topology(topology("two-racks.xml"));
  std::string r1 = render_gobgp_config(t, t.find_node("r1-tor"));
  CHECK(r1.find("neighbor-set-name = \"host-r1h1\"\n  neighbor-info-list = [\"198.19.1.0\", \"198.19.1.1\", "
                "\"198.19.1.2\", \"198.19.1.3\"]") != std::string::npos);
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

  auto ap = load_topology_text(R"(<topology><rack name="r" max-prefixes="2" buckets="32">
    <host name="h"><job vip="add-path"/></host></rack></topology>)", "ap.xml");
  auto nb = switch_neighbors(ap, ap.find_node("r-tor"));
  CHECK(nb.size() == 1);  // one session per host with ADD-PATH
  std::string cfg = render_gobgp_config(ap, ap.find_node("r-tor"));
  CHECK(cfg.find("[neighbors.add-paths.config]\n    receive = true") != std::string::npos);
  CHECK(cfg.find("max-prefixes = 2") != std::string::npos);
  CHECK(render_agent_config(ap, ap.find_node("r-tor"))["resilient"]["buckets"] == 32);
}

TEST_CASE("gobgp monitor lines parse into multipath sets and withdrawals", "[unit]") {
  auto j = nlohmann::json::parse(R"([
    {"nlri":{"prefix":"198.19.0.1/32"},"attrs":[{"type":1,"value":2},{"type":3,"nexthop":"198.19.1.2"}],"neighbor-ip":"198.19.1.2"},
    {"nlri":{"prefix":"198.19.0.1/32"},"attrs":[{"type":3,"nexthop":"198.19.1.0"}],"neighbor-ip":"198.19.1.0"}])");
  auto m = parse_gobgp_paths(j);
  REQUIRE(m.size() == 1);
  CHECK(m["198.19.0.1/32"] == std::vector<std::string>{"198.19.1.2", "198.19.1.0"});
  auto v6 = parse_gobgp_paths(nlohmann::json::parse(
      R"([{"nlri":{"prefix":"2001:2:0:100::9/128"},"attrs":[{"type":14,"nexthop":"198.19.1.1","afi":2,"safi":1}]}])"));
  CHECK(v6["2001:2:0:100::9/128"] == std::vector<std::string>{"198.19.1.1"});
  auto wd = parse_gobgp_paths(nlohmann::json::parse(
      R"([{"nlri":{"prefix":"198.19.0.9/32"},"attrs":[{"type":3,"nexthop":"198.19.1.0"}],"withdrawal":true}])"));
  REQUIRE(wd.count("198.19.0.9/32"));
  CHECK(wd["198.19.0.9/32"].empty());
  // `gobgp global rib -j` gives an object keyed by prefix
  auto dump = parse_gobgp_paths(nlohmann::json::parse(
      R"({"198.19.0.0/22":[{"nlri":{"prefix":"198.19.0.0/22"},"attrs":[{"type":3,"nexthop":"0.0.0.0"}]}]})"));
  CHECK(dump["198.19.0.0/22"] == std::vector<std::string>{"0.0.0.0"});
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
  a.link_changed("swp3", false);
  CHECK(k.groups[g].size() == 3);
  CHECK(a.members("198.19.0.1/32").size() == 3);
  // BGP still has the path: when carrier returns, the next hop returns
  k.down.erase(swp3);
  a.link_changed("swp3", true);
  CHECK(k.groups[g].size() == 4);
  CHECK(k.routes_["198.19.0.1/32"] == g);
  CHECK(a.members("2001:2:0:100::1/128").size() == 4);
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
