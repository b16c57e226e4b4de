// root tier: the traffic engine through the whole stack, every byte verified.

#include <atomic>
#include <catch2/catch.hpp>

#include "bgp_support.hpp"
#include "engine_support.hpp"

using namespace lanes::testbed;
using lanes::test::eventually;
using lanes::test::group_members;
using lanes::test::ScopedRun;
using lanes::test::topology;

TEST_CASE("traffic engine carries a checkpoint save from the job to storage with every byte verified", "[root]") {
  ScopedRun run(topology("laptop.xml"), true, lanes::test::host_roles());
  auto job = Netns::open(lanes::hostnet::job_netns(run.id(), "h1")).value();
  REQUIRE(eventually([&] { return group_members(run.tb().netlink(run.node("r1-tor")), "198.19.0.1/32").size() == 4; },
                     std::chrono::seconds(20)));
  std::string out = run.registry().dir(run.id()) + "/recv.json";
  auto recv = lanes::test::start_receiver(run.tb().netns(run.node("storage")).fd(), 5301, 8, out);
  auto s = lanes::test::send(job.fd(), "198.18.128.17", 5301, 8, 20'000'000);
  CHECK(s["connection_errors"] == 0);
  CHECK(s["bytes"] == 160'000'000);
  CHECK(recv.wait() == 0);
  auto r = lanes::test::read_json(out);
  CHECK(r["all_complete"] == true);
  CHECK(r["verified_bytes"] == 160'000'000);
}

TEST_CASE("traffic engine runs the TCP congestion control it is told and names one the kernel lacks", "[root]") {
  ScopedRun run(topology("laptop.xml"), true, lanes::test::host_roles());
  auto job = Netns::open(lanes::hostnet::job_netns(run.id(), "h1")).value();
  REQUIRE(eventually([&] { return group_members(run.tb().netlink(run.node("r1-tor")), "198.19.0.1/32").size() == 4; },
                     std::chrono::seconds(20)));
  int storage = run.tb().netns(run.node("storage")).fd();
  // reno: never this machine's default, so it is the flag that set it
  std::string out = run.registry().dir(run.id()) + "/recv.json";
  auto recv = lanes::test::start_receiver(storage, 5302, 2, out);
  auto s = lanes::test::send(job.fd(), "198.18.128.17", 5302, 2, 2'000'000, {"--congestion", "reno"});
  CHECK(s["congestion"] == "reno");
  CHECK(s["connection_errors"] == 0);
  CHECK(recv.wait() == 0);
  CHECK(lanes::test::read_json(out)["verified_bytes"] == 4'000'000);
  auto bad = lanes::test::send(job.fd(), "198.18.128.17", 5302, 1, 1000, {"--congestion", "nosuchcc"});
  CHECK(bad["connection_errors"] == 1);
  REQUIRE(bad["flows"].size() == 1);
  std::string why = bad["flows"][0]["error"];
  CHECK(why.find("TCP congestion control nosuchcc") != std::string::npos);
  CHECK(why.find("this kernel has: ") != std::string::npos);
}

TEST_CASE("traffic engine carries a restore into the task IP through a NIC failure with no byte lost", "[root]") {
  ScopedRun run(topology("laptop.xml"), true, lanes::test::host_roles());
  auto job = Netns::open(lanes::hostnet::job_netns(run.id(), "h1")).value();
  REQUIRE(eventually([&] { return group_members(run.tb().netlink(run.node("r1-tor")), "198.19.0.1/32").size() == 4; },
                     std::chrono::seconds(20)));
  std::string out = run.registry().dir(run.id()) + "/recv.json";
  auto recv = lanes::test::start_receiver(job.fd(), 5302, 16, out);
  int h1 = run.node("h1");
  std::atomic<bool> flowing{false}, down{false};
  std::thread fault([&] {
    // mid-transfer: once storage has sent 50 MB of the restore
    flowing = lanes::test::traffic_flowing(run.tb().netlink(run.node("storage")), {"eth0"}, 50'000'000);
    down = run.tb().netlink(h1).set_link_up(run.tb().ifindex(h1, "nic2").value(), false, "nic2").ok();
  });
  auto s = lanes::test::send(run.tb().netns(run.node("storage")).fd(), "198.19.0.1", 5302, 16, 25'000'000);
  bool sent_before_fault = !down;  // the transfer ended before the NIC went down: no fault in it
  fault.join();
  CHECK(flowing);
  CHECK(down);
  CHECK_FALSE(sent_before_fault);
  CHECK(s["connection_errors"] == 0);
  CHECK(recv.wait() == 0);
  auto r = lanes::test::read_json(out);
  CHECK(r["all_complete"] == true);
  CHECK(r["verified_bytes"] == 400'000'000);
  CHECK(group_members(run.tb().netlink(run.node("r1-tor")), "198.19.0.1/32").size() == 3);
}
