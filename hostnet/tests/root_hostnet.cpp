// root tier: job containers in every egress mode, real TCP through the
// switch, NIC shares from the host's NIC counters, the BPF flow table from
// the host agent.

#include <signal.h>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "bgp_support.hpp"
#include "lanes/testbed/features.hpp"
#include "lanes/hostnet/hostnet.hpp"

using namespace lanes::testbed;
using lanes::hostnet::job_netns;
using lanes::test::eventually;
using lanes::test::group_members;
using lanes::test::ScopedRun;
using lanes::test::StandIn;

namespace {

constexpr auto kBgpWait = std::chrono::seconds(40);

// One rack, one host per egress mode, 4 NICs at 250 Mbit/s, a storage server: the
// links, not the two cores, bound what a mode sends (at 500 Mbit/s, 2 Gbit/s through
// one host, a busy machine made byte shares follow flow counts: 0.19 on one NIC)
std::string modes_topology() {
  auto path = std::filesystem::temp_directory_path() / ("lanes-modes-" + std::to_string(::getpid()) + ".xml");
  std::ofstream(path) << R"(<topology name="modes"><rack name="r1">
    <host name="single" nics="4" rate="250mbit"><job egress="single"/></host>
    <host name="ecmp" nics="4" rate="250mbit"><job egress="ecmp"/></host>
    <host name="bpf" nics="4" rate="250mbit"><job egress="bpf"/></host>
    <host name="numa" nics="4" rate="250mbit"><job egress="bpf-numa"/></host>
    <server name="storage"/></rack></topology>)";
  return path.string();
}

struct Env {
  std::string file = modes_topology();
  ScopedRun run{file, true, {std::make_shared<lanes::hostnet::HostRole>()}};
  std::map<std::string, Netns> job_ns;
  std::vector<std::unique_ptr<StandIn>> standins;
  std::optional<Daemon> server;

  Env() {
    std::filesystem::remove(file);
    for (const char* h : {"single", "ecmp", "bpf", "numa"}) {
      auto ns = Netns::open(job_netns(run.id(), h));
      REQUIRE(ns.ok());
      job_ns.emplace(h, std::move(ns).value());
      standins.push_back(std::make_unique<StandIn>(run, h, std::vector<std::string>{}, job_ns.at(h).fd()));
    }
    auto& sw = run.tb().netlink(run.node("r1-tor"));
    for (int i = 1; i <= 4; ++i)
      REQUIRE(eventually([&] { return group_members(sw, "198.19.0." + std::to_string(i) + "/32").size() == 4; }, kBgpWait));
    ProcessSpec spec{"iperf3 -s", {"iperf3", "-s", "-p", "5201"}};
    spec.netns_fd = run.tb().netns(run.node("storage")).fd();
    spec.log_path = run.registry().dir(run.id()) + "/iperf-server.log";
    auto d = Daemon::start(spec);
    REQUIRE(d.ok());
    server.emplace(std::move(d).value());
    lanes::test::wait_listening(spec.netns_fd, 5201);
  }

  int in_job(const std::string& host, std::vector<std::string> argv, std::string* out = nullptr) {
    ProcessSpec spec{argv[0], argv};
    spec.netns_fd = job_ns.at(host).fd();
    spec.new_session = false;
    auto r = run_capture(spec, std::chrono::seconds(60));
    if (!r) return -1;
    if (out) *out = r.value().out;
    return r.value().status;
  }
  std::vector<uint64_t> nic_tx(const std::string& host) {
    std::vector<uint64_t> v(4, 0);
    auto links = run.tb().netlink(run.node(host)).links();
    for (const auto& l : links.value())
      if (l.name.size() == 4 && l.name.rfind("nic", 0) == 0) v[static_cast<size_t>(l.name[3] - '0')] = l.tx_bytes;
    return v;
  }
  // iperf3 from HOST's container to storage with FLOWS streams; per-NIC shares of the bytes sent
  std::vector<double> shares(const std::string& host, int flows, int seconds, int* rc = nullptr) {
    auto before = nic_tx(host);
    int status = in_job(host, {"iperf3", "-c", "198.18.128.33", "-p", "5201", "-P", std::to_string(flows), "-t",
                               std::to_string(seconds), "-J"});
    if (rc) *rc = status;
    auto after = nic_tx(host);
    double total = 0;
    std::vector<double> d(4);
    for (size_t i = 0; i < 4; ++i) total += d[i] = static_cast<double>(after[i] - before[i]);
    for (auto& x : d) x = total > 0 ? x / total : 0;
    return d;
  }
  std::string tool() { return std::filesystem::path(lanes::test::lanes_bin()).parent_path().string() + "/lanes_test_tcp"; }
  nlohmann::json agent_state(const std::string& host) {
    std::ifstream in(run.registry().dir(run.id()) + "/hosts/" + host + "/host-agent-state.json");
    return nlohmann::json::parse(in);
  }
};

}  // namespace

TEST_CASE("every egress mode reaches storage from the task IP and from each NIC address", "[root]") {
  lanes::test::require_root();
  Env env;
  const std::string storage4 = "198.18.128.33", storage6 = "2001:2:0:2::21";
  for (const char* h : {"single", "ecmp", "bpf", "numa"}) {
    INFO(h);
    CHECK(env.in_job(h, {"ping", "-c", "1", "-W", "2", storage4}) == 0);
    CHECK(env.in_job(h, {"ping", "-c", "1", "-W", "2", storage6}) == 0);
    const auto& node = env.run.topo().nodes[env.run.node(h)];
    for (const auto& nic : node.nics) {
      INFO("from " << nic.job_addr4.addr.to_string());
      CHECK(env.in_job(h, {"ping", "-c", "1", "-W", "2", "-I", nic.job_addr4.addr.to_string(), storage4}) == 0);
      CHECK(env.in_job(h, {"ping", "-c", "1", "-W", "2", "-I", nic.job_addr6.addr.to_string(), storage6}) == 0);
    }
  }
}

TEST_CASE("egress spreads flows over the NICs as each mode promises", "[root][serial]") {
  lanes::test::require_root();
  Env env;
  auto show = [](const std::vector<double>& s) {
    std::string o;
    for (double x : s) o += fmt::format(" {:.3f}", x);
    return o;
  };
  SECTION("single uses NIC 0 only") {
    auto s = env.shares("single", 8, 2);
    INFO(show(s));
    CHECK(s[0] > 0.97);
  }
  SECTION("ecmp with 64 flows puts each NIC within 15% of a quarter") {
    int rc = -1;
    auto s = env.shares("ecmp", 64, 3, &rc);
    INFO(show(s));
    CHECK(rc == 0);
    for (double x : s) CHECK(std::abs(x - 0.25) <= 0.15 * 0.25);
  }
  SECTION("bpf with 4 flows puts one flow on each NIC, with 64 within 5% of a quarter") {
    int rc = -1;
    // exactly 4 connections (iperf3 would add its control connection)
    ProcessSpec sink{"sink", {env.tool(), "sink", "5301"}};
    sink.netns_fd = env.run.tb().netns(env.run.node("storage")).fd();
    auto sd = Daemon::start(sink);
    REQUIRE(sd.ok());
    lanes::test::wait_listening(sink.netns_fd, 5301);
    rc = env.in_job("bpf", {env.tool(), "send", "198.18.128.33", "5301", "4", "2"});
    CHECK(rc == 0);
    // the agent publishes its flow table once a second: wait for the 4 flows to show
    nlohmann::json st;
    std::map<int, int> big;  // NIC → data flows (over 1 MB)
    eventually([&] {
      st = env.agent_state("bpf");
      big.clear();
      int n = 0;
      for (const auto& f : st["flows"])
        if (f["bytes"].get<uint64_t>() > (1u << 20)) ++big[f["nic"].get<int>()], ++n;
      return n >= 4;
    });
    INFO(st["flows"].dump());
    CHECK(big.size() == 4);
    for (auto [nic, n] : big) CHECK(n == 1);
    auto s = env.shares("bpf", 64, 3, &rc);
    INFO(show(s));
    CHECK(rc == 0);
    for (double x : s) CHECK(std::abs(x - 0.25) <= 0.05 * 0.25);
  }
  SECTION("bpf-numa puts flows on the sending CPU's node's NICs, and spills to the other node's when they are full") {
    // a sender pinned to one CPU: each first packet leaves on that CPU (a
    // one-node machine is split in two: CPU 0 on node 0, the last CPU on
    // node 1). Two connections do not fill the node's two 250 Mbit/s NICs
    // beyond one flow each: they stay home, one per NIC. Eight fill them:
    // flows spill to the other node's NICs, and every NIC carries some.
    ProcessSpec sink{"sink", {env.tool(), "sink", "5302"}};
    sink.netns_fd = env.run.tb().netns(env.run.node("storage")).fd();
    auto sd = Daemon::start(sink);
    REQUIRE(sd.ok());
    lanes::test::wait_listening(sink.netns_fd, 5302);
    auto st = env.agent_state("numa");
    REQUIRE(st["mode"] == "bpf-numa");
    std::map<int, int> node_of;  // NIC → node
    for (const auto& n : st["nics"]) node_of[n["index"].get<int>()] = n["numa"].get<int>();
    long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
    for (long cpu : std::set<long>{0, cpus - 1}) {
      int node = cpu == 0 ? 0 : 1;
      for (int conns : {2, 8}) {
        INFO("sender on CPU " << cpu << " (node " << node << "), " << conns << " connections");
        std::set<int> before_ports;
        uint64_t spilled_before = 0;
        // the last run's flows have left every NIC: its rate, measured by
        // the window, is gone (a NIC still full of it would send a new flow
        // away from home for a reason that is not this run's)
        nlohmann::json now;  // held: a range-for over a temporary's member reads freed memory
        REQUIRE(eventually([&] {
          now = env.agent_state("numa");
          for (const auto& n : now["nics"])
            if (n["bpf"]["rate"].get<uint64_t>() >= (1u << 20)) return false;
          return true;
        }));
        for (const auto& f : now["flows"]) before_ports.insert(f["sport"].get<int>());
        for (const auto& n : now["nics"]) spilled_before += n["bpf"]["spilled"].get<uint64_t>();
        int rc = env.in_job("numa", {"taskset", "-c", std::to_string(cpu), env.tool(), "send", "198.18.128.33", "5302",
                                     std::to_string(conns), "2"});
        CHECK(rc == 0);
        std::map<int, int> on;  // NIC → this run's data flows
        nlohmann::json agent;
        eventually([&] {
          agent = env.agent_state("numa");
          on.clear();
          int n = 0;
          for (const auto& f : agent["flows"])
            if (f["dport"] == 5302 && !before_ports.count(f["sport"].get<int>()) &&
                f["bytes"].get<uint64_t>() > (1u << 20)) {
              ++on[f["nic"].get<int>()], ++n;
              CHECK(f["node"].get<int>() == node);  // each flow names the node it was opened on
            }
          return n >= conns;
        });
        INFO(agent["flows"].dump());
        uint64_t spilled = 0;
        for (const auto& n : agent["nics"]) spilled += n["bpf"]["spilled"].get<uint64_t>();
        spilled -= spilled_before;
        int home = 0, away = 0;
        for (auto [nic, n] : on) (node_of[nic] == node ? home : away) += n;
        CHECK(home + away == conns);
        if (conns == 2) {
          CHECK(away == 0);
          CHECK(on.size() == 2);  // one on each of the node's NICs
        } else {
          CHECK(on.size() == 4);  // every NIC carries some
          CHECK(spilled >= static_cast<uint64_t>(away));
          // local first, counted in bytes: a flow leaves only a full NIC,
          // so the node's NICs were full before the others carried
          // anything and stay full after. How many flows each holds once
          // all four are full is no promise (3 home and 5 away, 1 of them
          // alone on a home NIC, fills every NIC as well as 4 and 4)
          uint64_t home_tx = 0, away_tx = 0;
          for (size_t i = 0; i < agent["nics"].size(); ++i) {
            const auto& n = agent["nics"][i];
            uint64_t sent = n["bpf"]["tx_bytes"].get<uint64_t>() - now["nics"][i]["bpf"]["tx_bytes"].get<uint64_t>();
            (node_of[n["index"].get<int>()] == node ? home_tx : away_tx) += sent;
          }
          INFO("bytes sent by the node's NICs " << home_tx << ", by the others " << away_tx);
          CHECK(home_tx * 100 >= away_tx * 95);
        }
      }
    }
  }
}

TEST_CASE("a NIC going down gets no new flows and its flows move without a reset", "[root][serial]") {
  lanes::test::require_root();
  Env env;
  for (const char* h : {"bpf", "ecmp"}) {
    INFO(h);
    int host = env.run.node(h);
    auto& hnl = env.run.tb().netlink(host);
    int nic2 = env.run.tb().ifindex(host, "nic2").value();
    int rc = -1;
    std::thread t([&] {
      rc = env.in_job(h, {"iperf3", "-c", "198.18.128.33", "-p", "5201", "-P", "16", "-t", "6"});
    });
    // the streams are under way on every NIC before one fails
    CHECK(lanes::test::traffic_flowing(hnl, {"nic0", "nic1", "nic2", "nic3"}, 20'000'000));
    REQUIRE(hnl.set_link_up(nic2, false, "nic2").ok());
    // what NIC 2 had in flight is out once the others have sent 5 MB more
    CHECK(lanes::test::traffic_flowing(hnl, {"nic0", "nic1", "nic3"}, 5'000'000));
    auto mid = env.nic_tx(h);
    t.join();
    auto end = env.nic_tx(h);
    CHECK(rc == 0);  // every stream completed: no connection reset
    uint64_t moved_on = 0;
    for (size_t i = 0; i < 4; ++i)
      if (i != 2) moved_on += end[i] - mid[i];
    CHECK(end[2] - mid[2] < 100000);  // nothing more left through NIC 2
    CHECK(moved_on > 10'000'000);
    if (std::string(h) == "bpf") {
      auto st = env.agent_state(h);
      CHECK(st["nics"][2]["up"] == false);
      CHECK(st["nics"][2]["bpf"]["moved"].get<uint64_t>() > 0);
    }
    // new flows avoid it
    auto s = env.shares(h, 8, 1, &rc);
    CHECK(rc == 0);
    CHECK(s[2] < 0.01);
    REQUIRE(hnl.set_link_up(nic2, true, "nic2").ok());
    CHECK(eventually([&] { return env.agent_state(h)["nics"][2]["up"] == true; }, std::chrono::seconds(5)));
    // the agent took the container link down and up: its permanent
    // neighbours are back, and traffic through it learned none (a learned
    // entry would count against the kernel-wide neighbour limit)
    s = env.shares(h, 8, 1, &rc);
    CHECK(rc == 0);
    ProcessSpec ip{"ip neigh", {"ip", "-j", "neigh", "show", "dev", "jnic2"}};
    ip.netns_fd = env.run.tb().netns(host).fd();
    ip.new_session = false;
    auto shown = run_capture(ip, std::chrono::seconds(10));
    REQUIRE(shown.ok());
    auto entries = nlohmann::json::parse(shown.value().out);
    INFO(shown.value().out);
    CHECK(entries.size() == 2);  // the container side's IPv4 and IPv6 address
    for (const auto& e : entries)
      CHECK(e.value("state", nlohmann::json::array()).dump().find("PERMANENT") != std::string::npos);
    // both egress groups have the NIC again: its IPv6 next hop too, added
    // the moment the link came up (checked against the routes then, it
    // failed: the kernel had not yet seen the carrier, and the IPv6 group
    // stayed at three NICs)
    for (const char* group : {"1000", "1001"}) {
      INFO(group);
      std::string out;
      REQUIRE(env.in_job(h, {"ip", "-j", "nexthop", "show", "id", group}, &out) == 0);
      auto g = nlohmann::json::parse(out);
      REQUIRE(g.size() == 1);
      CHECK(g[0].value("group", nlohmann::json::array()).size() == 4);
    }
  }
}

TEST_CASE("netkit job containers carry every egress mode where the kernel has netkit", "[root][serial]") {
  lanes::test::require_root();
  if (!probe_kernel_features().netkit) {
    lanes::test::not_run("this kernel has no netkit (lanes uses veth here)");
  }
  Env env;
  auto link = env.run.tb().netlink(env.run.node("bpf")).link("jnic0");
  REQUIRE(link.ok());
  REQUIRE(link.value());
  CHECK(link.value()->kind == "netkit");
  for (const char* h : {"single", "ecmp", "bpf", "numa"}) {
    INFO(h);
    CHECK(env.in_job(h, {"ping", "-c", "1", "-W", "2", "198.18.128.33"}) == 0);
    CHECK(env.in_job(h, {"ping", "-c", "1", "-W", "2", "2001:2:0:2::21"}) == 0);
  }
  int rc = -1;
  auto s = env.shares("bpf", 16, 2, &rc);
  CHECK(rc == 0);
  for (double x : s) CHECK(std::abs(x - 0.25) <= 0.05 * 0.25);
}
