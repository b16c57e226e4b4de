// The split of a topology over the machines of a run over several
// (partition.hpp): whole racks balanced by host count, spines round-robin,
// fabric servers with what they attach to, VNIs per crossing link, pins
// honoured, and every topology that cannot be split refused with its line.

#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>

#include "lanes/testbed/partition.hpp"
#include "lanes/testbed/topology_loader.hpp"

using namespace lanes::testbed;

namespace {

// RACKS racks of HOSTS[i] hosts each under SPINES spines, a storage
// server in each rack and a parameter server on spine1.
std::string fabric(const std::vector<int>& hosts, int spines, const std::string& extra_rack_attr = "") {
  std::string s = "<topology name=\"p\">\n";
  s += "<spine name=\"spine\" count=\"" + std::to_string(spines) + "\"/>\n";
  for (size_t r = 0; r < hosts.size(); ++r) {
    std::string name = "r" + std::to_string(r + 1);
    s += "<rack name=\"" + name + "\"" + (r == 0 ? extra_rack_attr : "") + ">\n";
    s += "<host name=\"" + name + "h\" count=\"" + std::to_string(hosts[r]) + "\" nics=\"2\"/>\n";
    s += "<server name=\"" + name + "s\" role=\"storage\"/>\n</rack>\n";
  }
  s += "<server name=\"ps\" role=\"param\" attach=\"spine" + std::to_string(spines) + "\"/>\n";
  for (int sp = 1; sp <= spines; ++sp)
    for (size_t r = 0; r < hosts.size(); ++r)
      s += "<link a=\"spine" + std::to_string(sp) + "\" b=\"r" + std::to_string(r + 1) + "-tor\"/>\n";
  s += "</topology>\n";
  return s;
}

int machine(const Topology& t, const Placement& p, const std::string& node) {
  return p.machine_of.at(static_cast<size_t>(t.find_node(node)));
}

std::string refusal(const std::string& text, int k) {
  try {
    place(load_topology_text(text, "p.xml"), k);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("partition: whole racks, balanced by host count, deterministic") {
  auto t = load_topology_text(fabric({8, 2, 2, 4, 4, 4}, 2), "p.xml");
  auto p = place(t, 3);
  REQUIRE(p.share.size() == 3);
  // largest first onto the lightest: r1(8)→0, r4(4)→1, r5(4)→2, r6(4)→1,
  // r2(2)→2, r3(2)→2: 8 / 8 / 8
  CHECK(p.share[0].hosts == 8);
  CHECK(p.share[1].hosts == 8);
  CHECK(p.share[2].hosts == 8);
  CHECK(p.share[0].nics == 16);
  // a rack's switch, hosts and servers together
  for (const auto& rack : t.racks) {
    int m = p.machine_of[static_cast<size_t>(rack.switch_node)];
    for (int h : rack.hosts) CHECK(p.machine_of[static_cast<size_t>(h)] == m);
    for (int s : rack.servers) CHECK(p.machine_of[static_cast<size_t>(s)] == m);
  }
  CHECK(machine(t, p, "r1-tor") == 0);
  CHECK(machine(t, p, "r4-tor") == 1);
  CHECK(machine(t, p, "r5-tor") == 2);
  // spines round-robin; the parameter server with the spine it attaches to
  CHECK(machine(t, p, "spine1") == 0);
  CHECK(machine(t, p, "spine2") == 1);
  CHECK(machine(t, p, "ps") == 1);
  // the same input, the same placement
  auto again = place(load_topology_text(fabric({8, 2, 2, 4, 4, 4}, 2), "p.xml"), 3);
  CHECK(again.machine_of == p.machine_of);
  // every node placed once
  size_t placed = 0;
  for (const auto& sh : p.share) placed += sh.nodes.size();
  CHECK(placed == t.nodes.size());
}

TEST_CASE("partition: crossing links get a VNI each and both ends' machines") {
  auto t = load_topology_text(fabric({2, 2, 2, 2}, 2), "p.xml");
  auto p = place(t, 2);
  std::set<uint32_t> vnis;
  size_t tunnels = 0;
  for (const auto& c : p.cross) {
    const Link& l = t.links.at(static_cast<size_t>(c.link));
    CHECK(l.kind != LinkKind::host_nic);  // a host's NICs never leave its rack's machine
    CHECK(c.machine_a == p.machine_of[static_cast<size_t>(l.a.node)]);
    CHECK(c.machine_b == p.machine_of[static_cast<size_t>(l.b.node)]);
    CHECK(c.machine_a != c.machine_b);
    CHECK(c.vni == kVniBase + static_cast<uint32_t>(c.link));
    CHECK(vnis.insert(c.vni).second);
  }
  // spine1 on 0, spine2 on 1, racks r1 r3 on 0 and r2 r4 on 1 (2 hosts
  // each: in file order): each spine reaches the other machine's 2 racks
  CHECK(p.cross.size() == 4);
  for (const auto& sh : p.share) tunnels += sh.tunnels;
  CHECK(tunnels == 2 * p.cross.size());
  // one machine: nothing crosses
  CHECK(place(t, 1).cross.empty());
}

TEST_CASE("partition: machine= pins a rack (or a host's rack), a spine, a fabric server") {
  std::string text = fabric({4, 4, 4}, 2, " machine=\"2\"");
  // spine pinned, the parameter server pinned
  text.replace(text.find("<spine name=\"spine\" count=\"2\"/>"), 32,
               "<spine name=\"spine\" count=\"2\" machine=\"1\"/>");
  text.replace(text.find("attach=\"spine2\""), 15, "attach=\"spine2\" machine=\"0\"");
  auto t = load_topology_text(text, "p.xml");
  auto p = place(t, 3);
  CHECK(machine(t, p, "r1-tor") == 2);
  CHECK(machine(t, p, "r1h1") == 2);
  CHECK(machine(t, p, "r1s") == 2);
  CHECK(machine(t, p, "spine1") == 1);
  CHECK(machine(t, p, "spine2") == 1);
  CHECK(machine(t, p, "ps") == 0);
  // the others fill machines 0 and 1
  CHECK(machine(t, p, "r2-tor") == 0);
  CHECK(machine(t, p, "r3-tor") == 1);

  // a host's pin is its rack's
  std::string by_host = fabric({2, 2}, 1);
  by_host.replace(by_host.find("<host name=\"r2h\""), 16, "<host name=\"r2h\" machine=\"0\"");
  auto th = load_topology_text(by_host, "p.xml");
  auto ph = place(th, 2);
  CHECK(machine(th, ph, "r2-tor") == 0);
  CHECK(machine(th, ph, "r2s") == 0);
  CHECK(machine(th, ph, "r1-tor") == 1);
}

TEST_CASE("partition: what cannot be split is refused with its line") {
  // fewer racks than machines: the <topology> line
  std::string why = refusal(fabric({2, 2}, 1), 3);
  CHECK(why.find("p.xml:1: 2 racks cannot be split over 3 machines") != std::string::npos);
  // a pin beyond the run's machines: the pinned element's line
  why = refusal(fabric({2, 2}, 1, " machine=\"5\""), 2);
  CHECK(why.find("p.xml:3: r1-tor is pinned to machine 5, but the run has 2 machines (0 to 1)") != std::string::npos);
  // pins that leave a machine without a rack
  std::string two_on_zero = fabric({2, 2}, 1, " machine=\"0\"");
  two_on_zero.replace(two_on_zero.find("<rack name=\"r2\">"), 16, "<rack name=\"r2\" machine=\"0\">");
  why = refusal(two_on_zero, 2);
  CHECK(why.find("1 of 2 machines would build no rack") != std::string::npos);
  // a node pinned twice: a host to one machine, its rack to another (the loader's)
  std::string twice = fabric({2, 2}, 1, " machine=\"1\"");
  twice.replace(twice.find("<host name=\"r1h\""), 16, "<host name=\"r1h\" machine=\"0\"");
  try {
    load_topology_text(twice, "p.xml");
    FAIL("a node pinned twice was taken");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("p.xml:4: <host> machine=\"0\": its rack 'r1' is pinned to machine 1 at line 3") !=
          std::string::npos);
  }
  // machine= out of range and on an element that does not take it
  CHECK_THROWS_AS(load_topology_text(fabric({2}, 1, " machine=\"-1\""), "p.xml"), InputError);
  CHECK_THROWS_AS(place(load_topology_text(fabric({2}, 1), "p.xml"), 0), InputError);
}

TEST_CASE("partition: each run's VNIs in a slot of its own, the same for the same run id", "[unit]") {
  CHECK(vni_offset("ab12") == vni_offset("ab12"));
  CHECK(vni_offset("ab12") % kVniRunStride == 0);
  std::set<uint32_t> slots;
  for (int i = 0; i < 64; ++i) {
    uint32_t o = vni_offset("r" + std::to_string(i));
    CHECK(o < kVniRunStride * kVniRunSlots);
    slots.insert(o);
  }
  CHECK(slots.size() > 40);  // spread over the slots, not piled into a few
  // the largest VNI a run can have stays a VNI (24 bits)
  CHECK(kVniBase + kVniRunStride * kVniRunSlots < (1u << 24));
}
