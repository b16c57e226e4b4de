// unit tier: the injector's typed config and files, and the hijack fault's
// rewrite of that config through vip's own API.

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "lanes/testbed/topology_loader.hpp"
#include "lanes/vip/deploy.hpp"
#include "support.hpp"

using namespace lanes::testbed;
using namespace lanes::vip;

TEST_CASE("the injector's config is written and read back as the same struct", "[unit]") {
  auto t = load_topology(lanes::test::topology("laptop.xml"));
  int h1 = t.find_node("h1");
  auto c = injector_config(t, h1);
  CHECK(c.host == "h1");
  CHECK(c.nics.size() == 4);
  CHECK(c.sessions.size() == 4);  // one per NIC
  CHECK_FALSE(c.add_path);
  CHECK(SpeakerConfig::from_json(nlohmann::json::parse(c.to_json().dump())) == c);
}

TEST_CASE("an IPv6-only job's injector: sessions over IPv6 to the switch ports, the /128 alone", "[unit]") {
  auto t = load_topology_text(R"(<topology><rack name="r"><host name="h" nics="2"><job family="ipv6"/></host>
    </rack></topology>)", "v6.xml");
  int h = t.find_node("h");
  auto c = injector_config(t, h);
  CHECK(c.task4.empty());
  CHECK_FALSE(c.task6.empty());
  REQUIRE(c.sessions.size() == 2);
  const auto& n = t.nodes[static_cast<size_t>(h)];
  CHECK(c.sessions[0].local == n.nics[0].job_addr6.addr.to_string());
  CHECK(c.sessions[0].peer == t.links[n.nics[0].link].a.addr6.addr.to_string());
}

TEST_CASE("a hijack claim rewrites only the task IPs of the injector's config", "[unit]") {
  auto t = load_topology(lanes::test::topology("laptop.xml"));
  auto dir = std::filesystem::temp_directory_path() / ("lanes-claim-" + std::to_string(::getpid()));
  RunLayout run(dir.string());
  std::filesystem::create_directories(run.node_dir("hosts", "h2"));
  auto f = injector_files(run, "h2");
  CHECK(f.config == dir.string() + "/hosts/h2/injector.json");
  auto before = injector_config(t, t.find_node("h2"));
  std::ofstream(f.config) << before.to_json().dump(2);
  REQUIRE(claim_task_ips(run, "h2", "198.19.0.1", "2001:2:0:100::1").ok());
  std::ifstream in(f.config);
  auto after = SpeakerConfig::from_json(nlohmann::json::parse(in));
  CHECK(after.task4 == "198.19.0.1");
  CHECK(after.task6 == "2001:2:0:100::1");
  after.task4 = before.task4;
  after.task6 = before.task6;
  CHECK(after == before);
  CHECK_FALSE(claim_task_ips(run, "h9", "198.19.0.1", "").ok());  // no such injector
  std::filesystem::remove_all(dir);
}
