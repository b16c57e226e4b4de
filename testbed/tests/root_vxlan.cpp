// root tier: a link between two machines as a VXLAN tunnel. Two emulated
// machines (network namespaces joined by a veth, the underlay) each build
// their shard of two-racks.xml split over two (r1 and spine1 on the first,
// r2 on the second); the spine1 - r2-tor link is a VXLAN device at each end,
// made from the machine's namespace straight into the node's (none appears
// in the machine's), with the link's addresses, MACs and permanent
// neighbours, and full-size frames cross it. Both shards torn down, nothing
// is left.

#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "lanes/testbed/fabric.hpp"
#include "lanes/testbed/netlink.hpp"
#include "lanes/testbed/netns.hpp"
#include "lanes/testbed/topology_loader.hpp"
#include "root_support.hpp"

using namespace lanes::testbed;

TEST_CASE("vxlan: a link between two machines' shards carries full-size frames, nothing appears in the machines",
          "[root]") {
  lanes::test::require_root();
  std::string tag = std::to_string(::getpid() % 100000);
  std::string run_id = "vx" + tag;
  // the two machines: their own namespaces, a 9000-byte underlay between them
  std::string ma = "lanestest-vx" + tag + "-ma", mb = "lanestest-vx" + tag + "-mb";
  struct Cleanup {
    std::string ma, mb, run;
    ~Cleanup() {
      (void)teardown_run(run, {}, "");
      (void)remove_netns(ma);
      (void)remove_netns(mb);
    }
  } cleanup{ma, mb, run_id};
  auto nsa = Netns::create(ma, {});
  REQUIRE(nsa.ok());
  auto nsb = Netns::create(mb, {});
  REQUIRE(nsb.ok());
  auto nla = Netlink::open_in(nsa.value().fd(), ma);
  REQUIRE(nla.ok());
  auto nlb = Netlink::open_in(nsb.value().fd(), mb);
  REQUIRE(nlb.ok());
  REQUIRE(nla.value().create_veth("under", 0, "under", 0, nsb.value().fd(), mb).ok());
  auto ia = nla.value().ifindex("under");
  auto ib = nlb.value().ifindex("under");
  REQUIRE(ia.ok());
  REQUIRE(ib.ok());
  REQUIRE(lanes::test::run_command("ip -n " + ma + " link set under mtu 9000 && ip -n " + mb +
                                   " link set under mtu 9000 up")
              .status == 0);
  REQUIRE(nla.value().add_address(ia.value(), IfAddr4{*parse_ip4("198.18.9.1"), 24}, "under").ok());
  REQUIRE(nlb.value().add_address(ib.value(), IfAddr4{*parse_ip4("198.18.9.2"), 24}, "under").ok());

  auto t = load_topology(lanes::test::topology("two-racks.xml"));
  auto placement = place(t, 2);
  REQUIRE(placement.cross.size() == 1);
  std::vector<IpAddr> underlay{*parse_ip("198.18.9.1"), *parse_ip("198.18.9.2")};
  Shard s0{&placement, 0, underlay, kVxlanPort, 9000, nsa.value().fd()};
  Shard s1{&placement, 1, underlay, kVxlanPort, 9000, nsb.value().fd()};
  auto f0 = Fabric::build(t, run_id, &s0);
  REQUIRE(f0.ok());
  auto f1 = Fabric::build(t, run_id, &s1);
  REQUIRE(f1.ok());
  CHECK(list_netns(RunRegistry::netns_prefix(run_id)).size() == t.nodes.size());

  const Link& l = t.links[static_cast<size_t>(placement.cross.front().link)];
  std::string spine = RunRegistry::netns_name(run_id, t.nodes[static_cast<size_t>(l.a.node)].name);
  std::string tor = RunRegistry::netns_name(run_id, t.nodes[static_cast<size_t>(l.b.node)].name);
  // each end a VXLAN device with the link's VNI, up, in the node's namespace
  auto spine_dev = lanes::test::run_command("ip -d -n " + spine + " link show " + l.a.ifname);
  INFO(spine_dev.out);
  // the link's VNI, in the run's own slot
  CHECK(spine_dev.out.find("vxlan id " + std::to_string(placement.cross.front().vni + vni_offset(run_id))) !=
        std::string::npos);
  CHECK(spine_dev.out.find("remote 198.18.9.2 local 198.18.9.1") != std::string::npos);
  CHECK(spine_dev.out.find("mtu 1500") != std::string::npos);  // the jumbo underlay leaves room
  CHECK(lanes::test::run_command("ip -d -n " + tor + " link show " + l.b.ifname).out.find("vxlan id") !=
        std::string::npos);
  // nothing but the underlay in the machines' namespaces
  for (auto* nl : {&nla.value(), &nlb.value()}) {
    auto links = nl->links();
    REQUIRE(links.ok());
    CHECK(links.value().size() == 2);  // lo, under
  }
  // full-size frames both ways, IPv4 and IPv6, over the link's own addresses
  auto ping4 = lanes::test::run_command("ip netns exec " + spine + " ping -c 3 -i 0.2 -W 2 -M do -s 1472 " +
                                        l.b.addr4.addr.to_string());
  INFO(ping4.out);
  CHECK(ping4.status == 0);
  auto ping6 = lanes::test::run_command("ip netns exec " + tor + " ping -6 -c 3 -i 0.2 -W 2 -M do -s 1452 " +
                                        l.a.addr6.addr.to_string());
  INFO(ping6.out);
  CHECK(ping6.status == 0);
  // links within a machine are veths as ever
  auto r1 = lanes::test::run_command("ip -d -n " + spine + " link show");
  CHECK(r1.out.find("veth") != std::string::npos);

  auto rep = teardown_run(run_id, {}, "");
  CHECK(rep.errors.empty());
  CHECK(list_netns(RunRegistry::netns_prefix(run_id)).empty());
}
