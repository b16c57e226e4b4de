// unit tier: the neighbour plan of a topology, fabric and container links.

#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "lanes/core/neighbors.hpp"
#include "lanes/core/topology_loader.hpp"
#include "lanes/hostnet/hostnet.hpp"

using namespace lanes::testbed;

namespace {

std::string topology(const std::string& name) { return std::string(LANES_SOURCE_DIR) + "/topologies/" + name; }

}  // namespace

TEST_CASE("every end of every link has a permanent neighbour for the other end, both families", "[unit]") {
  for (const char* file : {"laptop.xml", "two-racks.xml", "rack-64.xml"}) {
    INFO(file);
    auto t = load_topology(topology(file));
    auto plan = link_neighbors(t);
    CHECK(plan.size() == t.links.size() * 4);
    // (node, ifname, ip) -> mac
    std::map<std::tuple<int, std::string, std::string>, MacAddr> have;
    for (const auto& e : plan) CHECK(have.emplace(std::make_tuple(e.node, e.ifname, e.ip), e.mac).second);
    std::set<MacAddr> macs;
    for (size_t k = 0; k < t.links.size(); ++k) {
      const Link& l = t.links[k];
      auto at = [&](const Endpoint& here, const std::string& ip) {
        auto it = have.find({here.node, here.ifname, ip});
        return it == have.end() ? MacAddr{} : it->second;
      };
      CHECK(at(l.a, l.b.addr4.addr.to_string()) == link_mac(k, 1));
      CHECK(at(l.a, l.b.addr6.addr.to_string()) == link_mac(k, 1));
      CHECK(at(l.b, l.a.addr4.addr.to_string()) == link_mac(k, 0));
      CHECK(at(l.b, l.a.addr6.addr.to_string()) == link_mac(k, 0));
      CHECK(macs.insert(link_mac(k, 0)).second);
      CHECK(macs.insert(link_mac(k, 1)).second);
    }
    for (const auto& m : macs) {
      CHECK((m[0] & 0x02) == 0x02);  // locally administered
      CHECK((m[0] & 0x01) == 0);     // unicast
    }
  }
}

TEST_CASE("the links between a host and its job container have permanent neighbours both ways", "[unit]") {
  auto t = load_topology(topology("laptop.xml"));
  std::set<MacAddr> macs;
  for (size_t h = 0; h < t.nodes.size(); ++h) {
    const Node& n = t.nodes[h];
    if (!n.job) continue;
    for (const auto& nic : n.nics) {
      auto plan = lanes::hostnet::container_neighbors(t, static_cast<int>(h), nic.index);
      REQUIRE(plan.size() == 4);
      MacAddr host_mac = container_link_mac(static_cast<int>(h), nic.index, 0);
      MacAddr cont_mac = container_link_mac(static_cast<int>(h), nic.index, 1);
      CHECK(macs.insert(host_mac).second);
      CHECK(macs.insert(cont_mac).second);
      std::map<std::pair<bool, std::string>, MacAddr> by;
      for (const auto& e : plan) by[{e.in_container, e.ip}] = e.mac;
      CHECK(by[{false, nic.cont_side4.addr.to_string()}] == cont_mac);
      CHECK(by[{false, nic.cont_side6.addr.to_string()}] == cont_mac);
      CHECK(by[{true, nic.host_side4.addr.to_string()}] == host_mac);
      CHECK(by[{true, nic.host_side6.addr.to_string()}] == host_mac);
      for (const auto& e : plan)
        CHECK(e.ifname == (e.in_container ? lanes::hostnet::container_ifname(nic.index)
                                          : lanes::hostnet::host_side_ifname(nic.index)));
    }
  }
  // the container links' MACs never equal a fabric link's
  for (size_t k = 0; k < t.links.size(); ++k) {
    CHECK_FALSE(macs.count(link_mac(k, 0)));
    CHECK_FALSE(macs.count(link_mac(k, 1)));
  }
}

TEST_CASE("the host agent's config is written and read back as the same struct", "[unit]") {
  auto t = load_topology(topology("two-racks.xml"));
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    if (t.nodes[i].kind != NodeKind::host || !t.nodes[i].job) continue;
    auto c = lanes::hostnet::host_agent_config(t, static_cast<int>(i), "ab12", EgressMode::bpf);
    REQUIRE(c.nics.size() == t.nodes[i].nics.size());
    CHECK(c.container_netns == "lanes-ab12-" + t.nodes[i].name + ".job");
    CHECK(c.mode == "bpf");
    CHECK(lanes::hostnet::HostAgentConfig::from_json(nlohmann::json::parse(c.to_json().dump())) == c);
  }
  lanes::testbed::RunLayout run("/run/lanes/ab12");
  auto f = lanes::hostnet::host_agent_files(run, "h1");
  CHECK(f.config == "/run/lanes/ab12/hosts/h1/host-agent.json");
  CHECK(f.state == "/run/lanes/ab12/hosts/h1/host-agent-state.json");
}
