// FRR as a switch stack: the configuration lanes renders, the vty
// protocol, and the parsers of bgpd's JSON (shapes as FRR 8.4 prints them).
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "lanes/switches/frr.hpp"
#include "lanes/switches/switch_config.hpp"
#include "lanes/testbed/topology_loader.hpp"
#include "support.hpp"

using namespace lanes::testbed;
using namespace lanes::switches;
using lanes::test::topology;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("FRR config: ownership, containment, host sessions, limits and next hops in FRR's own language", "[unit]") {
  auto t = load_topology(topology("two-racks.xml"));
  auto c = render_frr_config(t, t.find_node("r1-tor"));
  // ownership: a host's task IP only from that host's sessions
  CHECK(has(c.bgpd, "ip prefix-list OWN-r1h1-4 seq 5 permit 198.19.0.1/32\n"));
  CHECK(has(c.bgpd, "route-map OWN-r1h1 permit 10\n match ip address prefix-list OWN-r1h1-4\n"));
  CHECK(has(c.bgpd, "  neighbor 198.19.1.0 route-map OWN-r1h1 in\n"));
  CHECK(has(c.bgpd, "  neighbor 198.19.1.4 route-map OWN-r1h2 in\n"));
  // nothing to the injectors, containment towards the spine
  CHECK(has(c.bgpd, "  neighbor 198.19.1.0 route-map NOTHING out\n"));
  CHECK(has(c.bgpd, "ip prefix-list RACK-MORE-4 seq 5 permit 198.19.0.0/22 ge 23\n"));
  CHECK(has(c.bgpd, "route-map CONTAIN deny 10\n"));
  auto spine_nb = switch_neighbors(t, t.find_node("r1-tor")).back();
  REQUIRE_FALSE(spine_nb.host);
  CHECK(has(c.bgpd, "  neighbor " + spine_nb.address + " route-map CONTAIN out\n"));
  // IPv6 over the IPv4 fabric session: the spine's IPv6 link address as next hop
  CHECK(has(c.bgpd, "set ipv6 next-hop global " + spine_nb.address6 + "\n"));
  // host sessions: passive, multihop from the NIC's address, limits, timers
  CHECK(has(c.bgpd, " neighbor 198.19.1.0 passive\n neighbor 198.19.1.0 ebgp-multihop 3\n"));
  CHECK(has(c.bgpd, "  neighbor 198.19.1.0 maximum-prefix 4\n"));
  CHECK(has(c.bgpd, " neighbor 198.19.1.0 timers 3 9\n"));
  CHECK(has(c.bgpd, "  maximum-paths 64\n  network 198.19.0.0/22\n"));
  CHECK(has(c.bgpd, " no bgp network import-check\n"));  // the NHT filter hides the blackholes
  CHECK(has(c.bgpd, " bgp graceful-restart\n"));      // zebra keeps the routes while bgpd restarts
  // the rack blocks as blackholes, each NIC's address through its link
  CHECK(has(c.staticd, "ip route 198.19.0.0/22 blackhole\n"));
  CHECK(has(c.staticd, "ip route 198.19.1.0/32 198.18.128.1 swp1\n"));
  // next hops resolve through links and NIC host routes only; multipath routes
  CHECK(has(c.zebra, "ip nht bgp route-map NHT\n"));
  CHECK(has(c.zebra, "no zebra nexthop kernel enable\n"));
  // a spine carries no host policy and no blackhole
  auto s = render_frr_config(t, t.find_node("spine1"));
  CHECK_FALSE(has(s.bgpd, "OWN-"));
  CHECK_FALSE(has(s.bgpd, "CONTAIN"));
  CHECK_FALSE(has(s.staticd, "blackhole"));
  // an IPv6-only job: no IPv4 ownership entry at all
  auto v6 = load_topology_text(R"(<topology><rack name="r"><host name="h"><job family="ipv6"/></host></rack></topology>)",
                               "v6.xml");
  auto c6 = render_frr_config(v6, v6.find_node("r-tor"));
  CHECK_FALSE(has(c6.bgpd, "OWN-h-4"));
  CHECK(has(c6.bgpd, "ipv6 prefix-list OWN-h-6"));
}

TEST_CASE("FRR neighbors JSON: state, peer, description, accepted counts, families", "[unit]") {
  const char* text = R"({
    "198.19.1.4": {"remoteAs": 4200000003, "nbrDesc": "r1h2 nic0", "bgpState": "Established",
                   "bgpTimerUpEstablishedEpoch": 1796458017,
                   "addressFamilyInfo": {"ipv4Unicast": {"acceptedPrefixCounter": 1},
                                         "ipv6Unicast": {"acceptedPrefixCounter": 2}}},
    "198.19.1.5": {"remoteAs": 4200000003, "nbrDesc": "r1h2 nic1", "bgpState": "Idle",
                   "addressFamilyInfo": {"ipv4Unicast": {"acceptedPrefixCounter": 0}}},
    "totalPeers": 2})";
  auto s = parse_frr_neighbors(text);
  REQUIRE(s.size() == 2);
  CHECK(s[0].session.neighbor == "198.19.1.4");
  CHECK(s[0].session.description == "r1h2 nic0");
  CHECK(s[0].session.peer_as == 4200000003u);
  CHECK(s[0].session.established());
  CHECK(s[0].session.up_since_unix == 1796458017);
  CHECK(s[0].accepted == 3);
  CHECK(s[0].families == std::vector<int>{AF_INET, AF_INET6});
  CHECK_FALSE(s[1].session.established());
  CHECK(session_state_name(s[1].session.state) == std::string("idle"));
  CHECK(parse_frr_neighbors("not json").empty());
  CHECK(parse_frr_received(R"({"receivedRoutes": {}, "totalPrefixCounter": 3, "filteredPrefixCounter": 1})") == 3);
  CHECK(parse_frr_received("{}") == 0);
}

TEST_CASE("FRR routes JSON: the table and one prefix, best and multipath, peers and originated paths", "[unit]") {
  const char* table = R"j({"routerId": "198.18.0.2", "routes": {
    "198.19.0.0/22": [{"valid": true, "bestpath": true, "peerId": "(unspec)", "nexthops": [{"ip": "0.0.0.0", "used": true}]}],
    "198.19.0.1/32": [{"valid": true, "multipath": true, "peerId": "198.19.1.1", "nexthops": [{"ip": "198.19.1.1", "used": true}]},
                      {"valid": true, "peerId": "198.19.1.2", "nexthops": [{"ip": "198.19.1.2", "used": true}]}]}})j";
  auto r = parse_frr_routes(table, "");
  REQUIRE(r.size() == 3);
  CHECK(r[0].prefix == "198.19.0.0/22");
  CHECK(r[0].best);
  CHECK(r[0].neighbor.empty());  // originated here
  CHECK(r[1].best);              // an equal-cost path is used
  CHECK(r[1].neighbor == "198.19.1.1");
  CHECK_FALSE(r[2].best);
  const char* one = R"({"prefix": "2001:2:0:100::1/128", "paths": [
    {"valid": true, "bestpath": {"overall": true}, "peer": {"peerId": "198.19.1.0"},
     "nexthops": [{"ip": "fe80::1", "scope": "link-local", "used": false}, {"ip": "2001:2:0:100:2000::", "scope": "global", "used": true}]},
    {"valid": true, "bestpath": {"selectionReason": "Older Path"}, "peer": {"peerId": "198.19.1.1"},
     "nexthops": [{"ip": "2001:2:0:100:2000::1", "used": true}]}]})";
  auto p = parse_frr_routes(one, "2001:2:0:100::1/128");
  REQUIRE(p.size() == 2);
  CHECK(p[0].best);
  CHECK(p[0].next_hop == "2001:2:0:100:2000::");
  CHECK(p[0].neighbor == "198.19.1.0");
  CHECK_FALSE(p[1].best);  // a bestpath object without overall
  CHECK(parse_frr_routes("{}", "").empty());
}

TEST_CASE("FRR vty: a command and its NUL out, the answer up to three NULs and the status byte back", "[unit]") {
  auto dir = std::filesystem::temp_directory_path() / ("lanes-vty-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "bgpd.vty").string();
  int srv = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::strcpy(sa.sun_path, path.c_str());
  REQUIRE(::bind(srv, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  REQUIRE(::listen(srv, 1) == 0);
  std::string seen;
  std::thread daemon([&] {
    int c = ::accept(srv, nullptr, nullptr);
    auto answer = [&](const std::string& body, char status) {
      std::string out = body + std::string(3, '\0') + std::string(1, status);
      // in two pieces: the reader waits for the end
      (void)!::write(c, out.data(), out.size() / 2);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      (void)!::write(c, out.data() + out.size() / 2, out.size() - out.size() / 2);
    };
    for (char status : {'\0', '\1'}) {
      std::string cmd;
      char ch;
      while (::read(c, &ch, 1) == 1 && ch != '\0') cmd.push_back(ch);
      seen += cmd + ";";
      answer(status ? "% Unknown command" : "{\"ok\": true}", status);
    }
    ::close(c);
  });
  auto vty = FrrVty::connect(path);
  REQUIRE(vty);
  auto ok = vty.value().run("show bgp neighbors json");
  REQUIRE(ok);
  CHECK(ok.value() == "{\"ok\": true}");
  auto bad = vty.value().run("show nonsense");
  REQUIRE_FALSE(bad);
  CHECK(has(bad.error().what(), "FRR says (status 1): % Unknown command"));
  // the daemon gone: an error, not a hang
  daemon.join();
  auto gone = vty.value().run("show bgp neighbors json", std::chrono::milliseconds(500));
  CHECK_FALSE(gone);
  ::close(srv);
  CHECK(seen == "show bgp neighbors json;show nonsense;");
  CHECK_FALSE(FrrVty::connect((dir / "none.vty").string()));
  std::filesystem::remove_all(dir);
}

TEST_CASE("FRR config: byte-stable for the two-rack topology's rack switch and spine", "[unit]") {
  auto t = load_topology(topology("two-racks.xml"));
  for (const char* node : {"r1-tor", "spine1"}) {
    auto c = render_frr_config(t, t.find_node(node));
    std::string all = "! ---- zebra.conf\n" + c.zebra + "! ---- staticd.conf\n" + c.staticd + "! ---- bgpd.conf\n" + c.bgpd;
    CHECK(lanes::test::golden_mismatch(std::string("frr-two-racks-") + node + ".conf", all) == "");
  }
}
