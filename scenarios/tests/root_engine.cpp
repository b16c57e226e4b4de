// root tier: the traffic engine through the whole stack, every byte verified.

#include <atomic>
#include <fstream>
#include <set>
#include <catch2/catch.hpp>

#include "bgp_support.hpp"
#include "engine_support.hpp"
#include "lanes/testbed/features.hpp"
#include "lanes/testbed/input_file.hpp"
#include "lanes/testbed/mptcp.hpp"

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

TEST_CASE("MPTCP egress: a subflow from every NIC of the job, a save it sends and a restore it opens, both ways verified",
          "[root]") {
  lanes::test::require_root();
  if (!probe_kernel_features().mptcp) lanes::test::not_run("this kernel has no MPTCP (CONFIG_MPTCP)");
  // laptop.xml with its job's egress mptcp
  lanes::test::TempDir dir;
  std::string xml = read_input_file(topology("laptop.xml"), "topology file");
  xml.replace(xml.find("egress=\"ecmp\""), 13, "egress=\"mptcp\"");
  std::string file = dir.path() + "/laptop-mptcp.xml";
  std::ofstream(file) << xml;
  ScopedRun run(file, true, lanes::test::host_roles());
  auto job = Netns::open(lanes::hostnet::job_netns(run.id(), "h1")).value();
  int storage = run.tb().netns(run.node("storage")).fd();
  REQUIRE(eventually([&] { return group_members(run.tb().netlink(run.node("r1-tor")), "198.19.0.1/32").size() == 4; },
                     std::chrono::seconds(20)));
  const Node& h1 = run.topo().nodes.at(static_cast<size_t>(run.node("h1")));
  // the path managers as the plan set them: the kernel's own word
  auto pm = MptcpPm::open_in(job.fd(), "h1's job").value();
  CHECK(pm.limits().value() == MptcpLimits{kMptcpMaxSubflows, 0});
  std::set<std::string> endpoint_addrs;
  auto endpoints = pm.endpoints();  // (held: a range-for over .value() of a temporary would dangle)
  REQUIRE(endpoints);
  for (const auto& e : endpoints.value()) {
    CHECK(e.subflow);
    endpoint_addrs.insert(e.addr.to_string());
  }
  std::set<std::string> job_addrs = {"198.19.0.1"};
  for (const auto& nic : h1.nics) {
    job_addrs.insert(nic.job_addr4.addr.to_string());
    if (nic.index > 0) {
      CHECK(endpoint_addrs.count(nic.job_addr4.addr.to_string()) == 1);
      CHECK(endpoint_addrs.count(nic.job_addr6.addr.to_string()) == 1);
    }
  }
  CHECK(endpoint_addrs.size() == 2 * (h1.nics.size() - 1));
  CHECK(MptcpPm::open_in(storage, "storage").value().limits().value().subflows == kMptcpMaxSubflows);

  // every flow's subflows: one from the task IP and one from each other NIC's address, all different
  auto one_per_nic = [&](const nlohmann::json& flows, const char* side) {
    for (const auto& f : flows) {
      std::set<std::string> seen;
      for (const auto& sf : f["subflows"]) {
        std::string a = sf[side];
        CHECK(job_addrs.count(a) == 1);
        seen.insert(a);
        CHECK(sf["bytes_acked"].get<uint64_t>() > 0);  // it carried some of the flow
      }
      CHECK(f["subflows"].size() == h1.nics.size());
      CHECK(seen.size() == h1.nics.size());
    }
  };
  // A connection opened at once after bring-up has twice in about 25 runs
  // got no subflow but its first (cause not found yet: issue 33's note).
  // Short probes until one has them all; how many it took is said.
  std::string out = run.registry().dir(run.id()) + "/recv.json";
  int probes = 0;
  REQUIRE(eventually(
      [&] {
        ++probes;
        auto r = lanes::test::start_receiver(storage, 5310, 1, out, "--mptcp");
        auto p = lanes::test::send(job.fd(), "198.18.128.17", 5310, 1, 4'000'000, {"--mptcp"});
        r.wait();
        return p.contains("flows") && p["flows"].size() == 1 && p["flows"][0]["subflows"].size() == h1.nics.size();
      },
      std::chrono::seconds(30)));
  if (probes > 1) WARN("MPTCP: " << probes << " probe connections before one had a subflow from every NIC");
  auto recv = lanes::test::start_receiver(storage, 5311, 2, out, "--mptcp");
  auto s = lanes::test::send(job.fd(), "198.18.128.17", 5311, 2, 60'000'000, {"--mptcp"});
  CHECK(s["connection_errors"] == 0);
  one_per_nic(s["flows"], "local");
  CHECK(recv.wait() == 0);
  CHECK(lanes::test::read_json(out)["verified_bytes"] == 120'000'000);

  // the restore: storage listens, the job opens the connections
  ProcessSpec spec{"lanes-traffic send --listen",
                   {"sh", "-c", lanes::test::traffic_bin() + " send --listen --mptcp --port 5312 --flows 2 --bytes 60000000 > " +
                                    run.registry().dir(run.id()) + "/send.json"}};
  spec.netns_fd = storage;
  auto sender = Daemon::start(spec).value();
  lanes::test::wait_listening(storage, 5312);
  ProcessSpec rspec{"lanes-traffic recv --from", {lanes::test::traffic_bin(), "recv", "--from", "198.18.128.17", "--port",
                                                  "5312", "--flows", "2", "--mptcp"}};
  rspec.netns_fd = job.fd();
  rspec.new_session = false;
  auto r = run_capture(rspec, std::chrono::seconds(120));
  REQUIRE(r);
  auto got = nlohmann::json::parse(r.value().out);
  CHECK(got["all_complete"] == true);
  CHECK(got["verified_bytes"] == 120'000'000);
  CHECK(sender.wait() == 0);
  auto sent = lanes::test::read_json(run.registry().dir(run.id()) + "/send.json");
  CHECK(sent["connection_errors"] == 0);
  one_per_nic(sent["flows"], "remote");
}
