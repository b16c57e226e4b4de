// lanes-bfdd's pieces that need no privileges: its config, the sessions a
// topology gives each node, and the verdict socket between bfdd and its
// clients.

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "lanes/bfd/bfdd.hpp"
#include "lanes/bfd/notify.hpp"
#include "lanes/testbed/topology_loader.hpp"
#include "support.hpp"

using namespace lanes::bfd;
namespace tb = lanes::testbed;

TEST_CASE("bfdd config: intervals in, discriminators per link, bad input named", "[unit]") {
  nlohmann::json j = {{"node", "r1-tor"},
                      {"socket", "/tmp/x.sock"},
                      {"links", {{{"ifname", "swp1"}, {"local", "198.18.0.0"}, {"remote", "198.18.0.1"}},
                                 {{"ifname", "swp2"}, {"local", "198.18.0.2"}, {"remote", "198.18.0.3"},
                                  {"interval_ms", 50}, {"multiplier", 5}}}}};
  auto c = BfddConfig::from_json(j);
  REQUIRE(c.links.size() == 2);
  CHECK(c.links[0].session.desired_min_tx_us == 100'000);  // the default, 100 ms x 3
  CHECK(c.links[0].session.detect_mult == 3);
  CHECK(c.links[1].session.required_min_rx_us == 50'000);
  CHECK(c.links[1].session.detect_mult == 5);
  CHECK(c.links[0].session.local_disc != c.links[1].session.local_disc);
  CHECK(BfddConfig::from_json(c.to_json()).to_json() == c.to_json());
  auto bad = j;
  bad["links"][1]["interval_ms"] = 0;
  CHECK_THROWS_WITH(BfddConfig::from_json(bad), Catch::Contains("swp2: interval_ms 0"));
  bad = j;
  bad["links"][0].erase("remote");
  CHECK_THROWS_WITH(BfddConfig::from_json(bad), Catch::Contains("\"remote\""));
  bad = j;
  bad.erase("socket");
  CHECK_THROWS(BfddConfig::from_json(bad));
}

TEST_CASE("bfdd plan: one node as it was, or a rack's hosts each in its namespace, bad input named", "[unit]") {
  nlohmann::json one = {{"node", "r1-tor"},
                        {"socket", "/tmp/x.sock"},
                        {"links", {{{"ifname", "swp1"}, {"local", "198.18.0.0"}, {"remote", "198.18.0.1"}}}}};
  auto p = BfddPlan::from_json(one);
  REQUIRE(p.nodes.size() == 1);
  CHECK(p.nodes[0].netns.empty());
  CHECK(p.to_json() == p.nodes[0].to_json());  // a lone node in the daemon's namespace keeps the single form
  auto host = [](const std::string& n) {
    return nlohmann::json{{"node", n},
                          {"netns", "lanes-x-" + n},
                          {"socket", "/tmp/" + n + ".sock"},
                          {"state", "/tmp/" + n + ".json"},
                          {"links", {{{"ifname", "eth0"}, {"local", "198.18.0.1"}, {"remote", "198.18.0.0"}}}}};
  };
  nlohmann::json rack = {{"nodes", {host("h1"), host("h2")}}};
  p = BfddPlan::from_json(rack);
  REQUIRE(p.nodes.size() == 2);
  CHECK(p.nodes[1].netns == "lanes-x-h2");
  CHECK(p.nodes[1].state == "/tmp/h2.json");
  // discriminators count per node: each node is a system of its own
  CHECK(p.nodes[0].links[0].session.local_disc == p.nodes[1].links[0].session.local_disc);
  CHECK(BfddPlan::from_json(p.to_json()).to_json() == p.to_json());
  auto bad = rack;
  bad["nodes"][1]["socket"] = "/tmp/h1.sock";
  CHECK_THROWS_WITH(BfddPlan::from_json(bad), Catch::Contains("node \"h2\": socket /tmp/h1.sock is another node's"));
  bad = rack;
  bad["nodes"][0].erase("netns");
  CHECK_THROWS_WITH(BfddPlan::from_json(bad), Catch::Contains("node \"h1\": a node of \"nodes\" needs its \"netns\""));
  bad = rack;
  bad["nodes"][1]["links"][0]["multiplier"] = 0;
  CHECK_THROWS_WITH(BfddPlan::from_json(bad), Catch::Contains("node \"h2\": eth0: multiplier 0"));
  CHECK_THROWS_WITH(BfddPlan::from_json(nlohmann::json{{"nodes", nlohmann::json::array()}}), Catch::Contains("empty"));
  CHECK_THROWS(BfddPlan::from_json(nlohmann::json::array()));
}

TEST_CASE("every job host NIC gets one BFD session, its switch port the other end", "[unit]") {
  auto t = tb::load_topology(lanes::test::topology("laptop.xml"));
  int sw = t.find_node("r1-tor"), h1 = t.find_node("h1"), storage = t.find_node("storage");
  REQUIRE(sw >= 0);
  auto sl = bfd_links(t, sw);
  auto hl = bfd_links(t, h1);
  REQUIRE(hl.size() == t.nodes[static_cast<size_t>(h1)].nics.size());
  CHECK(bfd_links(t, storage).empty());  // servers run no BFD
  // each host session has its mirror at the switch
  for (const auto& h : hl) {
    bool found = false;
    for (const auto& s : sl)
      if (s.local == h.remote && s.remote == h.local) found = true;
    CHECK(found);
    CHECK(h.session.desired_min_tx_us == 100'000);
    CHECK(h.session.detect_mult == 3);
  }
  // bfd-interval="0" turns BFD off for the rack
  auto text = lanes::test::topology("laptop.xml");
  std::string xml;
  {
    std::ifstream in(text);
    xml.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto pos = xml.find("<rack ");
  REQUIRE(pos != std::string::npos);
  xml.insert(pos + 6, "bfd-interval=\"0\" ");
  auto off = tb::load_topology_text(xml, "laptop-no-bfd.xml");
  CHECK(bfd_links(off, off.find_node("h1")).empty());
}

TEST_CASE("verdict messages: what bfdd sends and what a client accepts", "[unit]") {
  Verdicts v = {{"eth0", true}, {"eth3", false}};
  CHECK(encode_verdicts(v) == R"({"usable":{"eth0":true,"eth3":false}})");
  CHECK(decode_verdicts(encode_verdicts(v)) == v);
  CHECK_FALSE(decode_verdicts("{"));
  CHECK_FALSE(decode_verdicts(R"({"usable":{"eth0":1}})"));
  CHECK_FALSE(decode_verdicts(R"({"other":{}})"));
}

TEST_CASE("bfdd's verdict socket: a client hears the verdicts on connecting and on every change", "[unit]") {
  auto path = (std::filesystem::temp_directory_path() / ("lanes-bfd-notify-" + std::to_string(::getpid()) + ".sock")).string();
  VerdictClient c(path);
  CHECK_FALSE(c.connect());  // no bfdd yet
  auto n = Notifier::open(path);
  REQUIRE(n.ok());
  REQUIRE(c.connect());
  n.value().accept({{"eth0", true}});
  CHECK(n.value().clients() == 1);
  auto first = c.read();
  REQUIRE(first);
  CHECK(first->at("eth0"));
  // two changes before the client reads: it takes the newest
  n.value().publish({{"eth0", false}});
  n.value().publish({{"eth0", true}, {"eth1", false}});
  auto newest = c.read();
  REQUIRE(newest);
  CHECK(newest->size() == 2);
  CHECK_FALSE(newest->at("eth1"));
  CHECK_FALSE(c.read());  // nothing new
  CHECK(c.connected());
  // bfdd gone: the client sees the end, and can connect to a new one
  { Notifier gone = std::move(n).value(); }
  CHECK_FALSE(c.read());
  CHECK_FALSE(c.connected());
  auto again = Notifier::open(path);
  REQUIRE(again.ok());
  CHECK(c.connect());
  CHECK(Notifier::open(std::string(200, 'x')).error().code().value() == ENAMETOOLONG);
  ::unlink(path.c_str());
}
