// root tier: ExaBGP and BIRD 2 as the VIP injector, configured by lanes in
// each job container. On one GoBGP rack: every task IP reaches the switch
// with a next hop per NIC, a restore into h1's task IP carries every byte
// (ingress through the routes they announced), a hijack of h1's task IP by
// h2's injector is rejected, a NIC's failure takes one next hop out and its
// return brings it back. ExaBGP also with ADD-PATH. Nothing is left.

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lanes/testbed/netns.hpp"
#include "lanes/testbed/process.hpp"
#include "lanes/testbed/run_registry.hpp"
#include "root_support.hpp"

using namespace lanes::testbed;

namespace {

std::string topology(const std::string& injector, const std::string& vip, const std::string& family) {
  return R"(<topology name="injectors">
  <rack name="r1">
    <host name="h" count="2" nics="4" rate="500mbit"><job name="train" egress="bpf" injector=")" +
         injector + R"(" vip=")" + vip + R"(" family=")" + family + R"("/></host>
    <server name="storage" role="storage"/>
  </rack>
</topology>
)";
}

const char* kScenario = R"(<scenario name="injector" description="another injector, judged by the switch">
  <topology file="injectors.xml"/>
  <phase name="p">
    <converge timeout="60s"/>
    <assert type="members" host="h1" count="4"/>
    <workload name="restore" type="checkpoint-restore" host="h1" server="storage" bytes="200M" flows="16"/>
    <fault type="rogue-announce" host="h2" victim="h1" mark="rogue"/>
    <assert type="hijack-rejected" victim="h1" rogue="h2" timeout="30s"/>
    <fault type="nic-down" host="h1" nic="2" mark="down"/>
    <assert type="members" host="h1" count="3" timeout="10s"/>
    <fault type="nic-up" host="h1" nic="2" mark="up"/>
    <wait condition="members" host="h1" count="4" timeout="30s"/>
  </phase>
  <assert type="bytes-verified" workload="restore" phase="p"/>
</scenario>
)";

void run_with(const std::string& injector, const std::string& program, const std::string& vip,
              const std::string& family = "dual") {
  lanes::test::require_root();
  if (::access(program.c_str(), X_OK) != 0)
    lanes::test::not_run((program + " is not installed (scripts/setup installs it)").c_str());
  auto dir = std::filesystem::temp_directory_path() /
             ("lanes-inj-" + injector + "-" + vip + "-" + family + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "injectors.xml") << topology(injector, vip, family);
  std::ofstream(dir / "scenario.xml") << kScenario;
  auto [status, sc] = lanes::test::lanes_run(dir, "scenario.xml");
  INFO(injector << " " << vip << " " << family << ": " << sc.dump(1).substr(0, 4000));
  CHECK(status == 0);
  CHECK(sc["passed"] == true);
  int checked = 0;
  for (const auto& a : sc["assertions"]) {
    INFO(a.value("name", ""));
    CHECK(a["passed"] == true);
    ++checked;
  }
  CHECK(checked == 5);  // members, hijack-rejected, members, the wait for members, bytes-verified
  std::filesystem::remove_all(dir);
}

}  // namespace

TEST_CASE("BIRD 2 as the VIP injector, a session per NIC: converges, carries, rejected as a hijacker, fails over",
          "[root]") {
  run_with("bird", "/usr/sbin/bird", "per-nic");
}

TEST_CASE("ExaBGP as the VIP injector, a session per NIC: converges, carries, rejected as a hijacker, fails over",
          "[root]") {
  run_with("exabgp", "/usr/sbin/exabgp", "per-nic");
}

TEST_CASE("ExaBGP as the VIP injector with ADD-PATH: a path per NIC on two sessions", "[root]") {
  run_with("exabgp", "/usr/sbin/exabgp", "add-path");
}

TEST_CASE("BIRD 2 as the VIP injector of an IPv6-only job: sessions over IPv6, the /128 with a next hop per NIC",
          "[root]") {
  run_with("bird", "/usr/sbin/bird", "per-nic", "ipv6");
}

TEST_CASE("ExaBGP as the VIP injector of an IPv6-only job: sessions over IPv6, the /128 with a next hop per NIC",
          "[root]") {
  run_with("exabgp", "/usr/sbin/exabgp", "per-nic", "ipv6");
}
