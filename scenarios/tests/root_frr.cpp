// root tier: FRR as the rack switch's stack. Rack r1 runs Debian's FRR
// (zebra, staticd, bgpd) under a GoBGP spine and beside a GoBGP rack: the
// fabric converges, a restore into r1's task IP and one across the spine
// carry every byte, the spine holds r1's aggregate and none of its task
// routes, a hijack of r1h1's task IP from r1h2 is rejected by FRR's
// ownership policy, and a NIC's failure takes its next hop out (the flows
// on healthy NICs are counted, not required to stay: zebra's multipath
// rehashes). lanes status reads bgpd over its vty. Nothing is left.

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <set>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lanes/testbed/netns.hpp"
#include "lanes/testbed/process.hpp"
#include "lanes/testbed/run_registry.hpp"
#include "root_support.hpp"

using namespace lanes::testbed;

namespace {

const char* kTopology = R"(<topology name="frr-rack">
  <spine name="spine1" asn="65000"/>
  <rack name="r1" switch-stack="frr">
    <host name="r1h" count="2" nics="4" rate="500mbit"><job name="train" egress="bpf"/></host>
    <server name="storage1" role="storage"/>
  </rack>
  <rack name="r2">
    <host name="r2h" count="1" nics="4" rate="500mbit"><job name="train" egress="bpf"/></host>
    <server name="storage2" role="storage"/>
  </rack>
  <link a="spine1" b="r1-tor"/>
  <link a="spine1" b="r2-tor"/>
</topology>
)";

const char* kScenario = R"(<scenario name="frr-rack" description="FRR as the rack switch's stack">
  <topology file="frr-rack.xml"/>
  <phase name="p">
    <converge timeout="60s"/>
    <workload name="restore" type="checkpoint-restore" host="r1h1" server="storage1" bytes="200M" flows="16"/>
    <workload name="cross" type="checkpoint-restore" host="r2h1" server="storage1" bytes="100M" flows="8"/>
    <assert type="no-task-routes" node="spine1"/>
    <fault type="rogue-announce" host="r1h2" victim="r1h1" mark="rogue"/>
    <assert type="hijack-rejected" victim="r1h1" rogue="r1h2" timeout="20s"/>
    <assert type="members" host="r1h1" count="4"/>
    <fault type="nic-down" host="r1h1" nic="2" mark="down"/>
    <assert type="members" host="r1h1" count="3" timeout="10s"/>
    <fault type="nic-up" host="r1h1" nic="2" mark="up"/>
    <wait condition="members" host="r1h1" count="4" timeout="20s"/>
  </phase>
  <assert type="bytes-verified" workload="restore" phase="p"/>
  <assert type="bytes-verified" workload="cross" phase="p"/>
</scenario>
)";

const nlohmann::json* assertion(const nlohmann::json& sc, const std::string& prefix) {
  for (const auto& a : sc["assertions"])
    if (a.value("name", "").rfind(prefix, 0) == 0) return &a;
  return nullptr;
}

}  // namespace

TEST_CASE("FRR rack: converges, carries verified traffic, contains routes, rejects a hijack, drops a failed NIC",
          "[root]") {
  lanes::test::require_root();
  if (::access("/usr/lib/frr/bgpd", X_OK) != 0 || ::access("/usr/lib/frr/zebra", X_OK) != 0)
    lanes::test::not_run("FRR is not installed (scripts/setup installs it)");
  auto dir = std::filesystem::temp_directory_path() / ("lanes-frr-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "frr-rack.xml") << kTopology;
  std::ofstream(dir / "frr-rack-scenario.xml") << kScenario;

  SECTION("lanes up: status reads bgpd over its vty; down leaves nothing") {
    std::string id = "frr" + std::to_string(::getpid() % 10000);
    ProcessSpec up{"lanes up", {lanes::test::lanes_bin(), "up", (dir / "frr-rack.xml").string(), "--run-id", id,
                                "--wait", "60"}};
    up.log_path = (dir / "up.log").string();
    auto u = run_capture(up, std::chrono::seconds(120));
    REQUIRE(u.ok());
    ProcessSpec st{"lanes status", {lanes::test::lanes_bin(), "status", id, "r1-tor", "--json"}};
    st.log_path = (dir / "status.log").string();
    auto s = run_capture(st, std::chrono::seconds(30));
    ProcessSpec down{"lanes down", {lanes::test::lanes_bin(), "down", id}};
    down.log_path = (dir / "down.log").string();
    auto d = run_capture(down, std::chrono::seconds(60));
    CHECK(u.value().status == 0);
    REQUIRE(s.ok());
    auto j = nlohmann::json::parse(s.value().out, nullptr, false);
    REQUIRE(j.is_object());
    INFO(s.value().out.substr(0, 2000));
    const nlohmann::json* sw = nullptr;
    for (const auto& n : j["nodes"])
      if (n.value("name", "") == "r1-tor") sw = &n;
    REQUIRE(sw);
    const auto& b = (*sw)["bgp"];
    CHECK(b["stack"] == "frr");
    CHECK_FALSE(b.contains("error"));
    int est = 0;
    for (const auto& x : b["sessions"]) est += x["state"] == "established";
    CHECK(est == 9);  // 2 hosts x 4 NICs and the spine
    std::set<std::string> daemons;
    for (const auto& x : b["daemons"]) daemons.insert(x.value("name", ""));
    CHECK(daemons.count("bgpd"));
    CHECK(daemons.count("zebra"));
    CHECK_FALSE(daemons.count("gobgpd"));
    REQUIRE(d.ok());
    CHECK(d.value().status == 0);
    CHECK(list_netns(RunRegistry::netns_prefix(id)).empty());
  }

  SECTION("a scenario judges it by behaviour") {
    auto [status, sc] = lanes::test::lanes_run(dir, "frr-rack-scenario.xml");
    INFO(sc.dump(1).substr(0, 4000));
    CHECK(status == 0);
    CHECK(sc["passed"] == true);
    for (const char* name : {"no-task-routes spine1", "hijack-rejected", "members r1h1", "bytes-verified restore",
                             "bytes-verified cross"}) {
      INFO(name);
      const auto* a = assertion(sc, name);
      REQUIRE(a);
      CHECK((*a)["passed"] == true);
    }
  }
  std::filesystem::remove_all(dir);
}

namespace {

// A shipped scenario run with every switch on FRR (lanes run --set
// switch-stack=frr, and EXTRA): assertion name [phase] -> (passed, measured)
std::map<std::string, std::pair<bool, std::string>> qualify_on_frr(const std::string& scenario, int& status,
                                                                   const std::vector<std::string>& extra = {}) {
  auto dir = std::filesystem::temp_directory_path() / ("lanes-frrq-" + scenario + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::vector<std::string> set{"--set", "switch-stack=frr"};
  set.insert(set.end(), extra.begin(), extra.end());
  auto ran = lanes::test::lanes_run(dir, lanes::test::source_dir() + "/scenarios/" + scenario + ".xml", set);
  status = ran.status;
  INFO(ran.scenario.dump(1).substr(0, 3000));
  CHECK(ran.scenario.value("error", "").empty());  // it ran to the end: verdicts are the figures'
  std::map<std::string, std::pair<bool, std::string>> v;
  for (const auto& a : ran.scenario["assertions"])  // a name can recur in each phase
    v[a.value("name", "") + " [" + a.value("phase", "") + "]"] = {a.value("passed", false), a.value("measured", "")};
  std::filesystem::remove_all(dir);
  return v;
}

}  // namespace

TEST_CASE("qualify on FRR: throughput-4x passes (ingress spread by zebra's multipath)", "[root]") {
  lanes::test::require_root();
  if (::access("/usr/lib/frr/bgpd", X_OK) != 0) lanes::test::not_run("FRR is not installed");
  int status = -1;
  auto v = qualify_on_frr("throughput-4x", status);
  CHECK(status == 0);
  for (const auto& [name, r] : v) {
    INFO(name << ": " << r.second);
    CHECK(r.first);
  }
}

TEST_CASE("qualify on FRR: nic-failover fails healthy-flows-kept only (hash-threshold multipath rehashes)", "[root]") {
  lanes::test::require_root();
  if (::access("/usr/lib/frr/bgpd", X_OK) != 0) lanes::test::not_run("FRR is not installed");
  int status = -1;
  auto v = qualify_on_frr("nic-failover", status);
  CHECK(status == 1);
  int rehashed = 0;
  for (const auto& [name, r] : v) {
    INFO(name << ": " << r.second);
    if (name.rfind("healthy-flows-kept", 0) == 0) {
      CHECK_FALSE(r.first);  // the design wants resilient groups; FRR does not program them
      CHECK(r.second.find("flows on healthy NICs changed NIC (no resilient group)") != std::string::npos);
      ++rehashed;
    } else {
      CHECK(r.first);
    }
  }
  CHECK(rehashed == 2);  // IPv4 and IPv6
}

TEST_CASE("qualify on FRR: route-containment and vip-hijack pass, vip-hijack with ADD-PATH sessions too", "[root]") {
  lanes::test::require_root();
  if (::access("/usr/lib/frr/bgpd", X_OK) != 0) lanes::test::not_run("FRR is not installed");
  // ADD-PATH: bgpd takes the four NICs' paths over each of the host's two
  // sessions (FRR receives ADD-PATH on every session unasked): 8 paths, 4
  // next hops (members h1 count="4" in the scenario)
  for (auto [scenario, vip] : {std::pair{"route-containment", "per-nic"}, {"vip-hijack", "per-nic"},
                               {"vip-hijack", "add-path"}}) {
    INFO(scenario << " vip=" << vip);
    int status = -1;
    auto v = qualify_on_frr(scenario, status, {"--set", std::string("vip=") + vip});
    CHECK(status == 0);
    int hijacks = 0;
    for (const auto& [name, r] : v) {
      INFO(name << ": " << r.second);
      CHECK(r.first);
      if (name.rfind("hijack-rejected", 0) == 0) {
        CHECK(r.second.find(std::string(vip) == "add-path" ? "; 8 paths, 0 not from h1" : "; 4 paths, 0 not from h1") !=
              std::string::npos);
        ++hijacks;
      }
    }
    CHECK(hijacks == (std::string(scenario) == "vip-hijack" ? 2 : 0));  // IPv4 and IPv6
  }
}
