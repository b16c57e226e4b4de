// A run over several machines reads another machine's fabric through
// lanes fabric-query: every FabricView call, asked as JSON and answered as
// JSON by answer_query there, reads back as the view itself gives it; an
// error there is an error here, with its words; an answer that cannot be
// read is refused.

#include <catch2/catch.hpp>

#include "fake_fabric.hpp"
#include "lanes/scenarios/fabric_view.hpp"

using namespace lanes::scenarios;
using lanes::test::FakeFabric;
namespace tb = lanes::testbed;

namespace {

// the far machine: the fake view behind answer_query, the query's text on the wire
RemoteFabric over(FabricView& far, std::vector<std::string>* asked = nullptr) {
  return RemoteFabric([&far, asked](int, const std::string& query) -> tb::Result<std::string> {
    if (asked) asked->push_back(query);
    return answer_query(far, nlohmann::json::parse(query)).dump();
  });
}

}  // namespace

TEST_CASE("remote fabric: every call reads back as the far view gives it", "[unit]") {
  FakeFabric far;
  tb::RouteEntry r;
  r.family = AF_INET;
  r.dst = "198.19.0.1/32";
  r.protocol = tb::kProtoBgp;
  r.type = 1;
  r.nh_id = 100004;
  r.oif = 3;
  r.gateway = "198.18.64.1";
  r.paths = 2;
  r.path_oifs = {3, 4};
  far.fib[{5, AF_INET}] = {r};
  tb::NexthopInfo g;
  g.id = 100004;
  g.is_group = true;
  g.resilient = true;
  g.buckets = 128;
  g.members = {{1, 1}, {2, 1}};
  far.groups[5] = {g};
  far.bucket_table[5] = {{100004, {1, 2, 1, 2}}};
  far.paths[{5, AF_INET6}] = {{"2001:2:0:100::1/128", "2001:2:0:3::1", "2001:2:0:3::", true},
                              {"2001:2:0:101::1/128", "", "", false}};
  far.counts[5] = {{"198.18.64.1", 12, 3}};
  far.neighbor_table[{5, true}] = {{7, "198.18.64.0", 0x80}};
  far.flow_port = [](int, const tb::FlowKey& f) { return f.sport % 2 ? 3 : 4; };

  std::vector<std::string> asked;
  auto near = over(far, &asked);
  auto routes = near.routes(5, AF_INET);
  REQUIRE(routes.ok());
  REQUIRE(routes.value().size() == 1);
  const auto& back = routes.value()[0];
  CHECK(back.dst == r.dst);
  CHECK(back.nh_id == r.nh_id);
  CHECK(back.gateway == r.gateway);
  CHECK(back.paths == 2);
  CHECK(back.path_oifs == std::vector<int>{3, 4});
  CHECK(nlohmann::json::parse(asked.at(0)).value("node", -1) == 5);

  auto nh = near.nexthops(5);
  REQUIRE(nh.ok());
  REQUIRE(nh.value().size() == 1);
  CHECK(nh.value()[0].resilient);
  CHECK(nh.value()[0].buckets == 128);
  CHECK(nh.value()[0].members == g.members);

  auto b = near.buckets(5);
  REQUIRE(b.ok());
  CHECK(b.value() == far.bucket_table[5]);

  auto rib = near.rib(5, AF_INET6, "2001:2:0:100::1/128");
  REQUIRE(rib.ok());
  REQUIRE(rib.value().size() == 1);  // the prefix travelled with the question
  CHECK(rib.value()[0].best);
  CHECK(rib.value()[0].neighbor == "2001:2:0:3::");

  auto s = near.sessions(5);
  REQUIRE(s.ok());
  REQUIRE(s.value().size() == 1);
  CHECK(s.value()[0].received == 12);
  CHECK(s.value()[0].rejected == 3);

  auto n = near.neighbors(5, true);
  REQUIRE(n.ok());
  REQUIRE(n.value().size() == 1);
  CHECK(n.value()[0].ifindex == 7);
  CHECK(n.value()[0].state == 0x80);
  CHECK(near.neighbors(5, false).value().empty());  // the node's own, not its container's

  std::vector<tb::FlowKey> flows;
  for (uint16_t p = 40000; p < 40004; ++p)
    flows.push_back({"swp1", *tb::parse_ip("198.18.0.9"), *tb::parse_ip("198.19.0.1"), 6, p, 5301});
  auto oifs = near.flow_oifs(5, flows);
  REQUIRE(oifs.ok());
  CHECK(oifs.value() == std::vector<int>{4, 3, 4, 3});
}

TEST_CASE("remote fabric: the far side's error, a failed ask and an unreadable answer are errors here", "[unit]") {
  struct Failing : FakeFabric {
    tb::Result<std::vector<tb::NexthopInfo>> nexthops(int) override {
      return tb::os_error(EIO, "r1-tor's netlink dump failed");
    }
  } far;
  auto near = over(far);
  auto nh = near.nexthops(2);
  REQUIRE_FALSE(nh.ok());
  CHECK(std::string(nh.error().what()).find("r1-tor's netlink dump failed") != std::string::npos);

  RemoteFabric down([](int, const std::string&) -> tb::Result<std::string> {
    return tb::os_error(EIO, "lanes fabric-query on m3 exited with status 1");
  });
  auto r = down.routes(1, AF_INET);
  REQUIRE_FALSE(r.ok());
  CHECK(std::string(r.error().what()).find("m3") != std::string::npos);

  RemoteFabric garbled([](int, const std::string&) -> tb::Result<std::string> { return std::string("srun: error"); });
  CHECK_FALSE(garbled.buckets(1).ok());
  RemoteFabric wrong_shape(
      [](int, const std::string&) -> tb::Result<std::string> { return std::string(R"({"ok": [{"dst": 1}]})"); });
  CHECK_FALSE(wrong_shape.routes(1, AF_INET).ok());

  FakeFabric plain;
  CHECK(answer_query(plain, {{"what", "everything"}, {"node", 1}}).contains("error"));
}
