// The emulated switches end to end: gobgpd, the FIB agent and the
// supervisor against stand-in announcers in the hosts' namespaces.

#include <signal.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "bgp_support.hpp"
#include "lanes/testbed/topology_loader.hpp"
#include "lanes/switches/fib_agent.hpp"
#include "lanes/switches/switch_config.hpp"

using namespace lanes::testbed;
using namespace lanes::switches;
using lanes::test::eventually;
using lanes::test::group_members;
using lanes::test::ScopedRun;
using lanes::test::StandIn;
using lanes::test::topology;

namespace {

constexpr auto kBgpWait = std::chrono::seconds(40);  // gobgpd's first connect waits 5-10 s

// An iperf3 server on NODE for one test.
Daemon iperf_server(ScopedRun& run, const std::string& node, const std::string& bind, int port) {
  ProcessSpec spec{"iperf3 -s", {"iperf3", "-s", "-B", bind, "-p", std::to_string(port)}};
  spec.netns_fd = run.tb().netns(run.node(node)).fd();
  spec.log_path = run.registry().dir(run.id()) + "/iperf-server.log";
  auto d = Daemon::start(spec);
  if (!d) throw d.error();
  lanes::test::wait_listening(spec.netns_fd, port);
  return std::move(d).value();
}

// iperf3 client on NODE; returns the parsed JSON result (status in "rc").
nlohmann::json iperf_client(ScopedRun& run, const std::string& node, std::vector<std::string> args) {
  std::vector<std::string> argv = {"iperf3", "-J"};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessSpec spec{"iperf3 -c", argv};
  spec.netns_fd = run.tb().netns(run.node(node)).fd();
  spec.new_session = false;
  auto r = run_capture(spec, std::chrono::seconds(120));
  nlohmann::json j;
  if (!r) return {{"rc", -1}};
  try {
    j = nlohmann::json::parse(r.value().out);
  } catch (const std::exception&) {
    j = nlohmann::json::object();
  }
  j["rc"] = r.value().status;
  return j;
}

std::map<std::string, std::string> rib_nexthops(ScopedRun& run, const std::string& sw, const std::string& prefix) {
  ProcessSpec spec{"gobgp", {"gobgp", "global", "rib", "-j", prefix}};
  spec.netns_fd = run.tb().netns(run.node(sw)).fd();
  spec.new_session = false;
  auto r = run_capture(spec, std::chrono::seconds(5));
  std::map<std::string, std::string> out;  // neighbor → next hop
  if (!r || r.value().status != 0) return out;
  try {
    auto j = nlohmann::json::parse(r.value().out);  // items() must not outlive it
    for (const auto& [p, paths] : j.items())
      for (const auto& path : paths) out[path.value("neighbor-ip", "")] = p;
  } catch (const std::exception&) {
  }
  return out;
}

pid_t daemon_pid(ScopedRun& run, const std::string& node, const std::string& name) {
  std::ifstream in(supervisor_state_path(run.registry(), run.id()));
  auto j = nlohmann::json::parse(in);
  for (const auto& d : j["daemons"])
    if (d["node"] == node && d["name"] == name) return d["pid"].get<pid_t>();
  return 0;
}

// After gobgpd on r1-tor is killed: the fewest members h1's group had until
// gobgpd's RIB holds h1's four paths again and the FIB agent has reconciled
// (its state no longer stale); nullopt if that did not happen in 40 s.
std::optional<size_t> fewest_members_until_reconciled(ScopedRun& run) {
  auto& sw = run.tb().netlink(run.node("r1-tor"));
  std::string agent_state = switch_files(run.registry(), run.id(), "r1-tor").agent_state;
  auto reconciled = [&] {
    try {
      std::ifstream in(agent_state);
      return !nlohmann::json::parse(in).value("stale", true);
    } catch (const std::exception&) {
      return false;
    }
  };
  size_t fewest = 4;
  bool back = eventually([&] {
    fewest = std::min(fewest, group_members(sw, "198.19.0.1/32").size());
    return rib_nexthops(run, "r1-tor", "198.19.0.1/32").size() == 4 && reconciled();
  }, std::chrono::seconds(40), std::chrono::milliseconds(20));
  if (!back) return std::nullopt;
  return std::min(fewest, group_members(sw, "198.19.0.1/32").size());
}

}  // namespace

// here, with the tiers that run gobgpd, not in the unit tier, which needs
// nothing installed
TEST_CASE("rendered gobgpd configurations pass gobgpd --dry-run", "[root]") {
  for (const char* f : {"laptop.xml", "two-racks.xml", "rack-64.xml"}) {
    auto t = lanes::testbed::load_topology(topology(f));
    for (size_t i = 0; i < t.nodes.size(); ++i) {
      if (t.nodes[i].kind != NodeKind::rack_switch && t.nodes[i].kind != NodeKind::spine) continue;
      INFO(f << " " << t.nodes[i].name);
      auto path = std::filesystem::temp_directory_path() / ("lanes-gobgpd-" + std::to_string(::getpid()) + ".toml");
      std::ofstream(path) << lanes::switches::render_gobgp_config(t, static_cast<int>(i));
      auto r = lanes::test::run_command("gobgpd --dry-run -t toml -f " + path.string());
      CHECK(r.status == 0);
      std::filesystem::remove(path);
    }
  }
}

TEST_CASE("a task IP announced over four NICs gets four next hops and takes ping and TCP", "[root]") {
  ScopedRun run(topology("laptop.xml"), true);
  StandIn h1(run, "h1");
  auto& sw = run.tb().netlink(run.node("r1-tor"));
  REQUIRE(eventually([&] { return group_members(sw, "198.19.0.1/32").size() == 4; }, kBgpWait));
  REQUIRE(eventually([&] { return group_members(sw, "2001:2:0:100::1/128").size() == 4; }, kBgpWait));
  auto nhs = sw.nexthops();
  REQUIRE(nhs.ok());
  uint32_t group = 0;
  group_members(sw, "198.19.0.1/32", &group);
  for (const auto& n : nhs.value())
    if (n.id == group) {
      CHECK(n.resilient);
      CHECK(n.buckets == 128);
    }
  CHECK(run.run_in("storage", {"ping", "-c", "2", "-W", "2", "198.19.0.1"}) == 0);
  CHECK(run.run_in("storage", {"ping", "-c", "2", "-W", "2", "2001:2:0:100::1"}) == 0);
  auto server = iperf_server(run, "h1", "198.19.0.1", 5201);
  auto res = iperf_client(run, "storage", {"-c", "198.19.0.1", "-p", "5201", "-t", "2", "-P", "8"});
  CHECK(res["rc"] == 0);
  CHECK(res["end"]["sum_received"]["bytes"].get<double>() > 1e6);
  // and the status shows the group
  auto st = lanes::test::run_command("LANES_STATE_DIR=" + run.registry().base() + " " + lanes::test::lanes_bin() +
                                     " status " + run.id());
  CHECK(st.out.find("group 198.19.0.1/32") != std::string::npos);
}

TEST_CASE("a NIC failure moves only its own flows and its next hop returns with carrier", "[root]") {
  ScopedRun run(topology("laptop.xml"), true);
  StandIn h1(run, "h1");
  auto& sw = run.tb().netlink(run.node("r1-tor"));
  REQUIRE(eventually([&] { return group_members(sw, "198.19.0.1/32").size() == 4; }, kBgpWait));
  uint32_t group = 0;
  group_members(sw, "198.19.0.1/32", &group);
  auto before = sw.nexthop_buckets(group);
  REQUIRE(before.ok());
  REQUIRE(before.value().size() == 128);
  int h1n = run.node("h1");
  uint32_t nic2_nh = kNexthopIdBase + 2 * 2;  // swp3 is port index 2 in the agent's config (IPv4)

  auto server = iperf_server(run, "h1", "198.19.0.1", 5202);
  nlohmann::json res;
  std::thread client([&] { res = iperf_client(run, "storage", {"-c", "198.19.0.1", "-p", "5202", "-t", "6", "-P", "64"}); });
  CHECK(lanes::test::traffic_flowing(run.tb().netlink(run.node("storage")), {"eth0"}, 50'000'000));
  REQUIRE(run.tb().netlink(h1n).set_link_up(run.tb().ifindex(h1n, "nic2").value(), false, "nic2").ok());
  CHECK(eventually([&] { return group_members(sw, "198.19.0.1/32").size() == 3; }));
  auto after = sw.nexthop_buckets(group);
  client.join();
  REQUIRE(after.ok());
  REQUIRE(after.value().size() == 128);
  int kept = 0, moved = 0;
  for (size_t b = 0; b < 128; ++b) {
    if (before.value()[b] == nic2_nh) {
      CHECK(after.value()[b] != nic2_nh);
      ++moved;
    } else {
      CHECK(after.value()[b] == before.value()[b]);  // flows on healthy NICs keep their NIC
      ++kept;
    }
  }
  CHECK(moved > 0);
  CHECK(kept > 0);
  CHECK(res["rc"] == 0);  // no stream was reset
  CHECK(res["end"]["sum_received"]["bytes"].get<double>() > 1e6);

  REQUIRE(run.tb().netlink(h1n).set_link_up(run.tb().ifindex(h1n, "nic2").value(), true, "nic2").ok());
  // the switch ended the NIC's session with its carrier (fast external
  // fallover); the stand-in gobgpd reconnects after its own idle hold
  CHECK(eventually([&] { return group_members(sw, "198.19.0.1/32").size() == 4; }, kBgpWait));
}

TEST_CASE("no task route leaves the rack and cross-rack traffic follows the aggregate", "[root]") {
  ScopedRun run(topology("two-racks.xml"), true);
  StandIn a(run, "r1h1");
  StandIn b(run, "r2h2");
  auto& r1 = run.tb().netlink(run.node("r1-tor"));
  auto& r2 = run.tb().netlink(run.node("r2-tor"));
  REQUIRE(eventually([&] { return group_members(r1, "198.19.0.1/32").size() == 4; }, kBgpWait));
  REQUIRE(eventually([&] { return group_members(r2, "198.19.4.2/32").size() == 4; }, kBgpWait));
  auto& spine = run.tb().netlink(run.node("spine1"));
  REQUIRE(eventually([&] { return group_members(spine, "198.19.4.0/22").size() == 1; }, kBgpWait));
  // the spine's FIB: both aggregates, no /32 or /128 in the task pools
  for (int fam : {AF_INET, AF_INET6}) {
    auto routes = spine.route_entries(fam);
    REQUIRE(routes.ok());
    for (const auto& r : routes.value()) {
      INFO(r.dst);
      bool task = r.dst.rfind("198.19.", 0) == 0 || r.dst.rfind("2001:2:0:1", 0) == 0;
      if (task) CHECK((r.dst.size() > 3 && (r.dst.substr(r.dst.size() - 3) == "/22" || r.dst.substr(r.dst.size() - 3) == "/64")));
    }
  }
  CHECK(group_members(spine, "198.19.0.0/22").size() == 1);
  CHECK(group_members(spine, "2001:2:0:100::/64").size() == 1);
  CHECK(group_members(spine, "2001:2:0:101::/64").size() == 1);
  // the spine's RIB has no task route either
  CHECK(rib_nexthops(run, "spine1", "198.19.0.1/32").empty());
  CHECK(rib_nexthops(run, "spine1", "198.19.4.2/32").empty());
  CHECK(rib_nexthops(run, "spine1", "2001:2:0:100::1/128").empty());
  // cross-rack: storage in rack 2 reaches the task IP in rack 1 and back
  CHECK(run.run_in("storage2", {"ping", "-c", "2", "-W", "2", "198.19.0.1"}) == 0);
  CHECK(run.run_in("storage2", {"ping", "-c", "2", "-W", "2", "2001:2:0:100::1"}) == 0);
  CHECK(run.run_in("storage1", {"ping", "-c", "2", "-W", "2", "198.19.4.2"}) == 0);
}

TEST_CASE("a job announcing another job's task IP is rejected and the owner keeps its route", "[root]") {
  ScopedRun run(topology("laptop.xml"), true);
  StandIn owner(run, "h1");
  auto& sw = run.tb().netlink(run.node("r1-tor"));
  REQUIRE(eventually([&] { return group_members(sw, "198.19.0.1/32").size() == 4; }, kBgpWait));
  StandIn rogue(run, "h2", {"198.19.0.1/32", "2001:2:0:100::1/128"});
  // the rogue's sessions come up and its announcements are counted as rejected
  auto rejected = [&] {
    auto st = lanes::test::run_command("LANES_STATE_DIR=" + run.registry().base() + " " + lanes::test::lanes_bin() +
                                       " status " + run.id() + " --json");
    try {
      auto j = nlohmann::json::parse(st.out);
      for (const auto& n : j["nodes"])
        if (n["name"] == "r1-tor") return n["bgp"]["rejected"].get<uint64_t>();
    } catch (const std::exception&) {
    }
    return uint64_t{0};
  };
  CHECK(eventually([&] { return rejected() >= 8; }, kBgpWait));  // 4 sessions x (v4 + v6)
  // the RIB holds only the owner's four paths; the kernel group is the owner's
  auto rib = rib_nexthops(run, "r1-tor", "198.19.0.1/32");
  CHECK(rib.size() == 4);
  for (const auto& [nb, _] : rib) CHECK(nb.rfind("198.19.1.", 0) == 0);
  for (const auto& [nb, _] : rib) CHECK((nb == "198.19.1.0" || nb == "198.19.1.1" || nb == "198.19.1.2" || nb == "198.19.1.3"));
  CHECK(group_members(sw, "198.19.0.1/32").size() == 4);
  // traffic still reaches the owner: h1's stack answers the 5 echo
  // requests, the rogue's sees none (its NICs' packet counters would count
  // BFD and BGP too)
  // h2 holds the address too, as a hijacker would: an echo the switch sent
  // it would be answered there and counted
  REQUIRE(run.run_in("h2", {"ip", "addr", "add", "198.19.0.1/32", "dev", "lo"}) == 0);
  int h1 = run.tb().netns(run.node("h1")).fd(), h2 = run.tb().netns(run.node("h2")).fd();
  long h1_before = lanes::test::icmp_in_echos(h1), h2_before = lanes::test::icmp_in_echos(h2);
  REQUIRE(h1_before >= 0);
  REQUIRE(h2_before >= 0);
  CHECK(run.run_in("storage", {"ping", "-c", "5", "-i", "0.2", "-W", "2", "198.19.0.1"}) == 0);
  CHECK(lanes::test::icmp_in_echos(h1) - h1_before == 5);
  CHECK(lanes::test::icmp_in_echos(h2) - h2_before == 0);
}

TEST_CASE("FIB agent killed during traffic is restarted and matches the RIB without disturbing flows", "[root]") {
  ScopedRun run(topology("laptop.xml"), true);
  StandIn h1(run, "h1");
  auto& sw = run.tb().netlink(run.node("r1-tor"));
  REQUIRE(eventually([&] { return group_members(sw, "198.19.0.1/32").size() == 4; }, kBgpWait));
  uint32_t group_before = 0;
  group_members(sw, "198.19.0.1/32", &group_before);
  auto buckets_before = sw.nexthop_buckets(group_before).value();
  auto server = iperf_server(run, "h1", "198.19.0.1", 5203);
  nlohmann::json res;
  std::thread client([&] { res = iperf_client(run, "storage", {"-c", "198.19.0.1", "-p", "5203", "-t", "5", "-P", "16"}); });
  CHECK(lanes::test::traffic_flowing(run.tb().netlink(run.node("storage")), {"eth0"}, 20'000'000));
  pid_t agent = daemon_pid(run, "r1-tor", "fib-agent");
  REQUIRE(agent > 0);
  ::kill(agent, SIGKILL);
  CHECK(eventually([&] { pid_t p = daemon_pid(run, "r1-tor", "fib-agent"); return p > 0 && p != agent; },
                   std::chrono::seconds(10)));
  // while the new agent starts, a path changes: it must catch up from the RIB
  h1.withdraw(3);
  CHECK(eventually([&] { return group_members(sw, "198.19.0.1/32").size() == 3; }, std::chrono::seconds(15)));
  client.join();
  CHECK(res["rc"] == 0);
  uint32_t group_after = 0;
  group_members(sw, "198.19.0.1/32", &group_after);
  CHECK(group_after == group_before);  // the route was adopted, not rebuilt
  auto buckets_after = sw.nexthop_buckets(group_after).value();
  uint32_t nic3_nh = kNexthopIdBase + 3 * 2;
  for (size_t b = 0; b < buckets_before.size(); ++b)
    if (buckets_before[b] != nic3_nh) CHECK(buckets_after[b] == buckets_before[b]);
  // kernel equals RIB: three paths, three members; IPv6 likewise
  CHECK(rib_nexthops(run, "r1-tor", "198.19.0.1/32").size() == 3);
  CHECK(group_members(sw, "2001:2:0:100::1/128").size() == 3);
  auto events = read_events(run.registry(), run.id());
  bool recorded = std::any_of(events.begin(), events.end(), [](const auto& e) {
    return e.value("daemon", "") == "fib-agent" && e.value("event", "") == "exited";
  });
  CHECK(recorded);
}

TEST_CASE("gobgpd killed during an ingress transfer: groups stay until sessions return", "[root]") {
  ScopedRun run(topology("laptop.xml"), true);
  StandIn h1(run, "h1");
  auto& sw = run.tb().netlink(run.node("r1-tor"));
  REQUIRE(eventually([&] { return group_members(sw, "198.19.0.1/32").size() == 4; }, kBgpWait));
  uint32_t group_before = 0;
  group_members(sw, "198.19.0.1/32", &group_before);
  auto server = iperf_server(run, "h1", "198.19.0.1", 5204);
  nlohmann::json res;
  std::thread client([&] { res = iperf_client(run, "storage", {"-c", "198.19.0.1", "-p", "5204", "-t", "20", "-P", "8"}); });
  CHECK(lanes::test::traffic_flowing(run.tb().netlink(run.node("storage")), {"eth0"}, 20'000'000));
  pid_t gobgpd = daemon_pid(run, "r1-tor", "gobgpd");
  REQUIRE(gobgpd > 0);
  ::kill(gobgpd, SIGKILL);
  // the groups stay while gobgpd is away and sessions come back
  auto fewest = fewest_members_until_reconciled(run);
  REQUIRE(fewest.has_value());
  CHECK(*fewest == 4);
  client.join();
  CHECK(res["rc"] == 0);  // no connection failed
  CHECK(res["end"]["sum_received"]["bytes"].get<double>() > 1e6);
  // then kernel equals RIB
  CHECK(group_members(sw, "198.19.0.1/32").size() == 4);
  uint32_t group_after = 0;
  group_members(sw, "198.19.0.1/32", &group_after);
  CHECK(group_after == group_before);
  auto events = read_events(run.registry(), run.id());
  bool recorded = std::any_of(events.begin(), events.end(), [](const auto& e) {
    return e.value("daemon", "") == "gobgpd" && e.value("event", "") == "exited";
  });
  CHECK(recorded);
}

TEST_CASE("gobgpd killed the moment its last session came up: the FIB agent waits for that one too", "[root]") {
  // the agent learnt whom to wait for from a once-a-second look at the
  // sessions: one that came up since was not waited for, and the reconcile
  // dropped its next hop (the group fell to 3 of 4, then came back)
  ScopedRun run(topology("laptop.xml"), true);
  StandIn h1(run, "h1");
  auto& sw = run.tb().netlink(run.node("r1-tor"));
  REQUIRE(eventually([&] { return group_members(sw, "198.19.0.1/32").size() == 4; }, kBgpWait,
                     std::chrono::milliseconds(5)));
  pid_t gobgpd = daemon_pid(run, "r1-tor", "gobgpd");
  REQUIRE(gobgpd > 0);
  ::kill(gobgpd, SIGKILL);
  // through the reconcile, which comes once every expected session is back
  auto fewest = fewest_members_until_reconciled(run);
  REQUIRE(fewest.has_value());
  CHECK(*fewest == 4);
}

// laptop.xml's namespaces and its switches' daemons deployed (their
// requests not yet written): what a supervisor is then started on
struct SwitchesDeployed {
  RunRegistry reg;
  std::string id = reg.new_id();
  Result<RunLock> lock = reg.create(id);
  Topology topo = load_topology(topology("laptop.xml"));
  Result<Fabric> tb = Fabric::build(topo, id);
  std::optional<DeployContext> ctx;
  SwitchesDeployed() {
    REQUIRE(lock.ok());
    try {  // a constructor that throws runs no destructor: what it made goes here
      REQUIRE(tb.ok());
      std::filesystem::copy_file(topology("laptop.xml"), reg.dir(id) + "/topology.xml");
      ctx.emplace(DeployContext{tb.value(), reg, id, {}, std::filesystem::path(lanes::test::lanes_bin()).parent_path().string(), {}});
      REQUIRE(deploy_switches(*ctx).ok());
    } catch (...) {
      teardown_run(id, {}, reg.base());
      (void)reg.remove_dir(id);
      throw;
    }
  }
  // what the test did not take down itself (a failed REQUIRE throws past
  // its teardown) goes here: one failure must not load the machine for
  // the tests after it
  bool torn_down = false;
  ~SwitchesDeployed() {
    if (torn_down || !lock.ok()) return;
    teardown_run(id, {}, reg.base());
    (void)reg.remove_dir(id);
  }
  // r1-tor's gobgpd runs as WRAP makes its command line
  void wrap_tor_gobgpd(const std::function<std::vector<std::string>(const std::vector<std::string>&)>& wrap) {
    bool wrapped = false;
    for (auto& d : ctx->daemons)
      if (d.node == "r1-tor" && d.name == "gobgpd") {
        d.argv = wrap(d.argv);
        wrapped = true;
      }
    REQUIRE(wrapped);
  }
};

TEST_CASE("a gobgpd that cannot start is reported with its log and nothing hangs", "[root][serial]") {
  lanes::test::require_root();
  SwitchesDeployed run;
  auto& reg = run.reg;
  const std::string& id = run.id;
  auto& ctx = *run.ctx;
  REQUIRE(write_daemon_requests(reg, id, ctx.daemons).ok());
  // break it after the check, as a bad config would
  std::ofstream(switch_files(reg, id, "r1-tor").gobgp_config) << "[global.config]\n  as = \"not a number\"\n";
  auto t0 = std::chrono::steady_clock::now();
  auto sup = start_supervisor(reg, id, std::chrono::seconds(30), lanes::test::lanes_bin());
  auto took = std::chrono::steady_clock::now() - t0;
  CHECK_FALSE(sup.ok());
  if (!sup.ok()) {
    std::string msg = sup.error().what();
    INFO(msg);
    CHECK(msg.find("r1-tor-gobgpd.log") != std::string::npos);
    // gobgpd logs the bad line and then exits: the supervisor may read the
    // line before the exit (no retry: a bad config fails at once) or the
    // exit first (then it tries again before it gives up)
    bool logged = msg.find("reported an error") != std::string::npos;
    bool retried = msg.find("(3 starts)") != std::string::npos;
    CHECK((logged || retried));
  }
  CHECK(took < std::chrono::seconds(25));
  teardown_run(id, {}, reg.base());
  (void)reg.remove_dir(id);
  run.torn_down = true;
}

TEST_CASE("a daemon that crashes once before the run is ready is started again and the run comes up", "[root]") {
  lanes::test::require_root();
  SwitchesDeployed run;
  auto& reg = run.reg;
  const std::string& id = run.id;
  auto& ctx = *run.ctx;
  // r1-tor's gobgpd dies with status 2 on its first start (as gobgpd's Go
  // runtime was seen to), then runs as it should
  std::string mark = reg.dir(id) + "/crashed-once";
  run.wrap_tor_gobgpd([&](const std::vector<std::string>& gobgpd) {
    std::vector<std::string> argv = {"sh", "-c", "if [ -e " + mark + " ]; then exec \"$@\"; fi; touch " + mark + "; exit 2",
                                     "gobgpd"};
    argv.insert(argv.end(), gobgpd.begin(), gobgpd.end());
    return argv;
  });
  REQUIRE(write_daemon_requests(reg, id, ctx.daemons).ok());
  auto sup = start_supervisor(reg, id, std::chrono::seconds(30), lanes::test::lanes_bin());
  if (!sup.ok()) FAIL(sup.error().what());
  std::string exited, restarted;
  for (const auto& e : read_events(reg, id))
    if (e.value("node", "") == "r1-tor" && e.value("daemon", "") == "gobgpd") {
      if (e.value("event", "") == "exited") exited = e.dump();
      if (e.value("event", "") == "restarted") restarted = e.dump();
    }
  CHECK(exited.find("\"status\":2") != std::string::npos);
  CHECK_FALSE(restarted.empty());
  teardown_run(id, {sup.value()}, reg.base());
  (void)reg.remove_dir(id);
  run.torn_down = true;
}

TEST_CASE("a daemon that exits at every start fails the bring-up after three starts and shows its last words", "[root]") {
  lanes::test::require_root();
  SwitchesDeployed run;
  auto& reg = run.reg;
  const std::string& id = run.id;
  auto& ctx = *run.ctx;
  std::string starts = reg.dir(id) + "/starts";
  run.wrap_tor_gobgpd([&](const std::vector<std::string>&) {
    return std::vector<std::string>{"sh", "-c", "echo start >> " + starts + "; echo 'last words'; exit 3"};
  });
  REQUIRE(write_daemon_requests(reg, id, ctx.daemons).ok());
  auto sup = start_supervisor(reg, id, std::chrono::seconds(30), lanes::test::lanes_bin());
  CHECK_FALSE(sup.ok());
  if (!sup.ok()) {
    std::string msg = sup.error().what();
    INFO(msg);
    CHECK(msg.find("exited with status 3") != std::string::npos);
    CHECK(msg.find("(3 starts)") != std::string::npos);
    CHECK(msg.find("last words") != std::string::npos);
  }
  std::ifstream in(starts);
  int n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  CHECK(n == 3);
  teardown_run(id, {}, reg.base());
  (void)reg.remove_dir(id);
  run.torn_down = true;
}

TEST_CASE("ADD-PATH mode: one session per host carries one path per NIC", "[root]") {
  lanes::test::require_root();
  auto file = std::filesystem::temp_directory_path() / ("lanes-addpath-" + std::to_string(::getpid()) + ".xml");
  std::ofstream(file) << R"(<topology name="add-path"><rack name="r1">
    <host name="h" count="1" nics="4"><job vip="add-path"/></host>
    <server name="storage"/></rack></topology>)";
  ScopedRun run(file.string(), true);
  std::filesystem::remove(file);
  const auto& t = run.topo();
  const Node& h = t.nodes[run.node("h1")];
  auto& hn = run.tb().netlink(run.node("h1"));
  (void)hn.add_address(1, IfAddr4{h.job->task_ip4, 32}, "lo");
  for (const auto& nic : h.nics) (void)hn.add_address(1, nic.job_addr4, "lo");
  Route def{IpNet::default_route(AF_INET),
            std::vector<Via>{{IpAddr(t.links[h.nics[0].link].a.addr4.addr), run.tb().ifindex(run.node("h1"), "nic0").value(), 1}}};
  REQUIRE(hn.add_route(def).ok());
  // one gobgpd, one session from NIC 0, ADD-PATH send
  std::string dir = run.registry().dir(run.id());
  const auto& sw = t.nodes[t.racks[0].switch_node];
  std::ofstream(dir + "/ap.toml") << "[global.config]\n  as = " << h.asn << "\n  router-id = \"" << h.nics[0].job_addr4.addr.to_string()
                                  << "\"\n  port = -1\n[[neighbors]]\n  [neighbors.config]\n    neighbor-address = \""
                                  << t.links[h.nics[0].link].a.addr4.addr.to_string() << "\"\n    peer-as = " << sw.asn
                                  << "\n  [neighbors.transport.config]\n    local-address = \"" << h.nics[0].job_addr4.addr.to_string()
                                  << "\"\n  [neighbors.ebgp-multihop.config]\n    enabled = true\n    multihop-ttl = 3\n"
                                     "  [neighbors.timers.config]\n    connect-retry = 1\n"
                                     "  [neighbors.add-paths.config]\n    send-max = 8\n"
                                     "  [[neighbors.afi-safis]]\n    [neighbors.afi-safis.config]\n      afi-safi-name = \"ipv4-unicast\"\n"
                                     "    [neighbors.afi-safis.add-paths.config]\n      send-max = 8\n";
  ProcessSpec spec{"add-path gobgpd", {"gobgpd", "-f", dir + "/ap.toml", "-p", "--pprof-disable", "--api-hosts", "127.0.0.1:50090"}};
  spec.netns_fd = run.tb().netns(run.node("h1")).fd();
  spec.log_path = dir + "/ap.log";
  auto d = Daemon::start(spec);
  REQUIRE(d.ok());
  auto gobgp = [&](std::vector<std::string> a) {
    std::vector<std::string> argv = {"gobgp", "-p", "50090"};
    argv.insert(argv.end(), a.begin(), a.end());
    ProcessSpec s{"gobgp", argv};
    s.netns_fd = spec.netns_fd;
    s.new_session = false;
    auto r = run_capture(s, std::chrono::seconds(5));
    return r ? r.value().status : -1;
  };
  REQUIRE(eventually([&] { return gobgp({"global"}) == 0; }));
  for (size_t i = 0; i < h.nics.size(); ++i)
    CHECK(gobgp({"global", "rib", "add", "-a", "ipv4", h.job->task_ip4.to_string() + "/32", "nexthop",
                 h.nics[i].job_addr4.addr.to_string(), "identifier", std::to_string(i + 1)}) == 0);
  auto& swnl = run.tb().netlink(run.node("r1-tor"));
  CHECK(eventually([&] { return group_members(swnl, h.job->task_ip4.to_string() + "/32").size() == 4; }, kBgpWait));
  CHECK(run.run_in("storage", {"ping", "-c", "2", "-W", "2", h.job->task_ip4.to_string()}) == 0);
  (void)d.value().stop();
}
