// unit tier: the injector's typed config and files, and the hijack fault's
// rewrite of that config through vip's own API.

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>

#include "lanes/testbed/topology_loader.hpp"
#include "lanes/vip/deploy.hpp"
#include "lanes/vip/other_injectors.hpp"
#include "lanes/vip/speaker.hpp"
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

namespace {
bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("BIRD as the injector: a session per NIC from its address, that address as next hop, both families",
          "[unit]") {
  auto t = load_topology_text(R"(<topology><rack name="r"><host name="h" nics="2"><job injector="bird"/></host>
    </rack></topology>)", "b.xml");
  int h = t.find_node("h");
  const auto& n = t.nodes[static_cast<size_t>(h)];
  auto c = injector_config(t, h);
  CHECK(c.injector == "bird");
  std::string b = render_bird_config(c);
  CHECK(has(b, "router id " + n.nics[0].job_addr4.addr.to_string() + ";\n"));
  CHECK(has(b, "protocol static task4 {\n  ipv4;\n  route " + c.task4 + "/32 blackhole;\n}\n"));
  CHECK(has(b, "route " + c.task6 + "/128 blackhole;"));
  for (int k : {0, 1}) {
    const auto& s = c.sessions[static_cast<size_t>(k)];
    INFO("NIC " << k);
    CHECK(has(b, "protocol bgp eth" + std::to_string(k) + " {\n"));
    CHECK(has(b, "  local " + s.local + " as " + std::to_string(c.local_as) + ";\n  neighbor " + s.peer + " as " +
                     std::to_string(c.peer_as) + ";\n"));
    CHECK(has(b, "export where net = " + c.task4 + "/32;\n    next hop self;\n    next hop address " +
                     n.nics[static_cast<size_t>(k)].job_addr4.addr.to_string() + ";"));
    CHECK(has(b, "next hop address " + n.nics[static_cast<size_t>(k)].job_addr6.addr.to_string() + ";"));
  }
  CHECK(has(b, "  multihop 3;\n  hold time 9;\n  keepalive time 3;\n"));
  CHECK(has(b, "connect retry time 1;"));
  // IPv6-only: sessions over IPv6, no IPv4 channel, an identifier made of the AS
  auto t6 = load_topology_text(R"(<topology><rack name="r"><host name="h"><job injector="bird" family="ipv6"/>
    </host></rack></topology>)", "b6.xml");
  auto c6 = injector_config(t6, t6.find_node("h"));
  std::string b6 = render_bird_config(c6);
  CHECK_FALSE(has(b6, "ipv4"));
  CHECK(has(b6, "  local " + c6.sessions[0].local + " as "));
  CHECK_FALSE(has(b6, "router id 0.0.0.0"));
  c6.add_path = true;
  CHECK_THROWS_AS(render_bird_config(c6), std::invalid_argument);
}

TEST_CASE("ExaBGP as the injector: a neighbor per session, per NIC or ADD-PATH with a path id per NIC", "[unit]") {
  auto t = load_topology_text(R"(<topology><rack name="r"><host name="h" nics="4"><job injector="exabgp"/></host>
    </rack></topology>)", "e.xml");
  int h = t.find_node("h");
  const auto& n = t.nodes[static_cast<size_t>(h)];
  auto c = injector_config(t, h);
  std::string e = render_exabgp_config(c);
  CHECK(has(e, "neighbor " + c.sessions[2].peer + " {\n"));
  CHECK(has(e, "  local-address " + c.sessions[2].local + ";\n"));
  CHECK(has(e, "  local-as " + std::to_string(c.local_as) + ";\n  peer-as " + std::to_string(c.peer_as) +
                   ";\n  hold-time 9;\n"));
  CHECK(has(e, "    ipv4 unicast;\n    ipv6 unicast;\n"));
  CHECK(has(e, "    route " + c.task4 + "/32 next-hop " + n.nics[2].job_addr4.addr.to_string() + ";\n"));
  CHECK(has(e, "    route " + c.task6 + "/128 next-hop " + n.nics[2].job_addr6.addr.to_string() + ";\n"));
  CHECK_FALSE(has(e, "add-path"));
  auto ta = load_topology_text(R"(<topology><rack name="r"><host name="h" nics="4"><job injector="exabgp"
    vip="add-path"/></host></rack></topology>)", "ea.xml");
  auto ca = injector_config(ta, ta.find_node("h"));
  std::string a = render_exabgp_config(ca);
  CHECK(ca.sessions.size() == 2);
  CHECK(has(a, "  capability {\n    add-path send;\n  }\n"));
  const auto& na = ta.nodes[static_cast<size_t>(ta.find_node("h"))];
  for (int k = 0; k < 4; ++k)
    CHECK(has(a, "route " + ca.task4 + "/32 next-hop " + na.nics[static_cast<size_t>(k)].job_addr4.addr.to_string() +
                     " path-information 0.0.0." + std::to_string(k + 1) + ";"));
  // the environment runs it in the foreground, logging where the supervisor reads
  auto env = exabgp_environment();
  CHECK(std::find(env.begin(), env.end(), std::pair<std::string, std::string>{"exabgp.daemon.daemonize", "false"}) !=
        env.end());
}

TEST_CASE("a hijack claim on a BIRD injector renders BIRD's configuration again", "[unit]") {
  auto t = load_topology_text(R"(<topology><rack name="r"><host name="a"><job injector="bird"/></host>
    <host name="b"><job injector="bird"/></host></rack></topology>)", "h.xml");
  auto dir = std::filesystem::temp_directory_path() / ("lanes-claim-bird-" + std::to_string(::getpid()));
  RunLayout run(dir.string());
  std::filesystem::create_directories(run.node_dir("hosts", "b"));
  auto f = injector_files(run, "b");
  std::ofstream(f.config) << injector_config(t, t.find_node("b")).to_json().dump(2);
  auto victim = injector_config(t, t.find_node("a"));
  REQUIRE(claim_task_ips(run, "b", victim.task4, victim.task6).ok());
  std::ifstream in(f.bird);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(has(text, "route " + victim.task4 + "/32 blackhole;"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("ExaBGP and BIRD configurations: byte-stable for the laptop topology's h1", "[unit]") {
  auto t = load_topology(lanes::test::topology("laptop.xml"));
  auto c = injector_config(t, t.find_node("h1"));
  CHECK(lanes::test::golden_mismatch("bird-laptop-h1.conf", render_bird_config(c)) == "");
  CHECK(lanes::test::golden_mismatch("exabgp-laptop-h1.conf", render_exabgp_config(c)) == "");
  c.add_path = true;
  c.sessions.resize(2);
  for (auto& s : c.sessions) s.nics = {0, 1, 2, 3};
  CHECK(lanes::test::golden_mismatch("exabgp-laptop-h1-add-path.conf", render_exabgp_config(c)) == "");
}

TEST_CASE("active-backup: one NIC announced, the lowest with carrier and a session up, else the lowest with carrier",
          "[unit]") {
  auto t = load_topology_text(R"(<topology><rack name="r"><host name="h" nics="4"><job egress="active-backup"/></host>
    <server name="s" role="storage"/></rack></topology>)",
                              "inline.xml");
  auto c = injector_config(t, t.find_node("h"));
  CHECK(c.active_backup);
  CHECK(SpeakerConfig::from_json(nlohmann::json::parse(c.to_json().dump())) == c);
  auto laptop = load_topology(lanes::test::topology("laptop.xml"));
  CHECK_FALSE(injector_config(laptop, laptop.find_node("h1")).active_backup);
  std::set<int> est;
  auto up = [&](int nic) { return est.count(nic) > 0; };
  auto nics = c.nics;
  CHECK(choose_active(nics, up) == 0);  // nothing established yet: the first with carrier
  est = {1, 2};
  CHECK(choose_active(nics, up) == 1);  // NIC 0's session not back yet: NIC 1 carries
  est = {0, 1, 2};
  CHECK(choose_active(nics, up) == 0);  // it is: NIC 0 takes the traffic back
  nics[0].up = false;
  CHECK(choose_active(nics, up) == 1);  // NIC 0 lost carrier
  for (auto& n : nics) n.up = false;
  CHECK(choose_active(nics, up) == -1);
}
