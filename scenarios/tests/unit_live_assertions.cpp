// unit tier: the live assertions over a fake fabric — what each one
// concludes from routes, groups, RIB paths and session counts, without root.

#include <linux/neighbour.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "assertions/live_assertions.hpp"
#include "lanes/testbed/topology_loader.hpp"
#include "lanes/scenarios/fabric_view.hpp"
#include "fake_fabric.hpp"
#include "support.hpp"

using namespace lanes::scenarios;
using lanes::test::FakeFabric;
namespace tb = lanes::testbed;

namespace {

struct Rig {
  tb::Topology topo;
  FakeFabric fabric;
  int polls = 0;
  std::map<std::string, nlohmann::json> agent_state;  // host agents' published states, by host
  explicit Rig(const char* file) : topo(tb::load_topology(lanes::test::topology(file))) {}
  LiveContext context() {
    return LiveContext{topo, fabric, {{"start", 0.0}}, [] { return std::vector<lanes::reports::Series>{}; }, {},
                       // no clock: one look, as a wait whose time is up would end
                       [this](const std::function<bool()>& pred, std::chrono::milliseconds, std::chrono::milliseconds) {
                         ++polls;
                         return pred();
                       },
                       {},
                       // as the runner reads them: through the host agent's own reader
                       [this](const std::string& host) -> std::optional<lanes::hostnet::HostAgentState> {
                         if (!agent_state.count(host)) return std::nullopt;
                         return lanes::hostnet::HostAgentState::from_json(agent_state[host]);
                       }};
  }
  Step step(const char* type, std::map<std::string, std::string> attrs) {
    Step s;
    s.element = "assert";
    s.type = type;
    s.attrs = std::move(attrs);
    return s;
  }
};

}  // namespace

TEST_CASE("live assertions: every type is registered once and declares its attributes", "[unit]") {
  std::set<std::string> types;
  for (const auto* a : live_assertions()) {
    CHECK(types.insert(a->type()).second);
    CHECK_FALSE(a->attrs().empty());
    CHECK(find_live_assertion(a->type()) == a);
  }
  CHECK(types == std::set<std::string>{"members", "healthy-flows-kept", "rate-ratio", "rate-recovery", "neighbors",
                                       "rate-share", "no-task-routes", "hijack-rejected", "impairment-loss", "nic-out"});
  CHECK(find_live_assertion("throughput-ratio") == nullptr);  // a post-run assertion
}

TEST_CASE("live assertion members: passes with four next hops, fails with three and says how many", "[unit]") {
  Rig r("laptop.xml");
  int sw = r.topo.find_node("r1-tor");
  r.fabric.group(sw, "198.19.0.1/32", 100001, {1000, 1002, 1004, 1006});
  r.fabric.group(sw, "198.19.0.2/32", 100002, {1008, 1010, 1012});
  auto ctx = r.context();
  auto ok = MembersAssertion().check(r.step("members", {{"host", "h1"}, {"count", "4"}}), ctx);
  CHECK(ok.passed);
  CHECK(ok.name == "members h1");
  CHECK(ok.measured == "4");
  auto short_one = MembersAssertion().check(r.step("members", {{"host", "h2"}, {"count", "4"}}), ctx);
  CHECK_FALSE(short_one.passed);
  CHECK(short_one.measured == "3");
  auto rack = MembersAssertion().check(r.step("members", {{"rack", "r1"}, {"count", "4"}}), ctx);
  CHECK_FALSE(rack.passed);
  CHECK(rack.measured == "1 of 2 groups");
  // a task IP with no route at all has no members
  FakeFabric empty;
  LiveContext bare{r.topo, empty, {}, {}, {}, ctx.eventually, {}};
  auto none = MembersAssertion().check(r.step("members", {{"host", "h1"}, {"count", "4"}}), bare);
  CHECK_FALSE(none.passed);
  CHECK(none.measured == "0");
}

TEST_CASE("live assertion no-task-routes: a spine with only aggregates passes, one task /32 fails", "[unit]") {
  Rig r("two-racks.xml");
  int spine = r.topo.find_node("spine1");
  const auto& r1 = r.topo.racks.at(0);
  r.fabric.route(spine, AF_INET, r1.block4.to_string());
  r.fabric.route(spine, AF_INET6, r1.block6.to_string());
  auto ctx = r.context();
  auto clean = NoTaskRoutes().check(r.step("no-task-routes", {{"node", "spine1"}}), ctx);
  CHECK(clean.passed);
  CHECK(clean.measured == "0 in the FIB, 0 in the RIB (2 task aggregates)");
  // a task IP of rack r1 learnt by the spine's BGP: a leak
  std::string task = r.topo.nodes.at(static_cast<size_t>(r.topo.find_node("r1h1"))).job->task_ip4.to_string() + "/32";
  r.fabric.paths[{spine, AF_INET}].push_back({task, "198.18.0.9", "198.18.0.9", true});
  auto leak = NoTaskRoutes().check(r.step("no-task-routes", {{"node", "spine1"}}), ctx);
  CHECK_FALSE(leak.passed);
  CHECK(leak.measured.find("1 in the RIB") != std::string::npos);
  CHECK(leak.measured.find(task) != std::string::npos);
  // no aggregate either: nothing reached the node, which is no pass
  FakeFabric empty;
  LiveContext bare{r.topo, empty, {}, {}, {}, ctx.eventually, {}};
  auto nothing = NoTaskRoutes().check(r.step("no-task-routes", {{"node", "spine1"}}), bare);
  CHECK_FALSE(nothing.passed);
  CHECK(nothing.message == "no task aggregate reached this node either");
}

TEST_CASE("live assertion no-task-routes: a rack switch may hold its own rack's task routes", "[unit]") {
  Rig r("two-racks.xml");
  int tor = r.topo.racks.at(0).switch_node;
  auto task_of = [&](const char* h) {
    return r.topo.nodes.at(static_cast<size_t>(r.topo.find_node(h))).job->task_ip4.to_string() + "/32";
  };
  r.fabric.route(tor, AF_INET, task_of("r1h1"));                        // its own: fine
  r.fabric.route(tor, AF_INET, r.topo.racks.at(1).block4.to_string());  // the other rack's aggregate
  auto ctx = r.context();
  CHECK(NoTaskRoutes().check(r.step("no-task-routes", {{"node", r.topo.nodes[tor].name}}), ctx).passed);
  r.fabric.route(tor, AF_INET, task_of("r2h1"));  // the other rack's task IP: a leak into this rack
  CHECK_FALSE(NoTaskRoutes().check(r.step("no-task-routes", {{"node", r.topo.nodes[tor].name}}), ctx).passed);
}

TEST_CASE("live assertion hijack-rejected: rejected, every path the victim's, else it fails", "[unit]") {
  Rig r("laptop.xml");
  int sw = r.topo.find_node("r1-tor");
  const auto& h1 = r.topo.nodes.at(static_cast<size_t>(r.topo.find_node("h1")));
  const auto& h2 = r.topo.nodes.at(static_cast<size_t>(r.topo.find_node("h2")));
  std::string prefix = h1.job->task_ip4.to_string() + "/32";
  r.fabric.group(sw, prefix, 100001, {1000, 1002, 1004, 1006});
  for (const auto& nic : h1.nics)
    r.fabric.paths[{sw, AF_INET}].push_back({prefix, nic.job_addr4.addr.to_string(), nic.job_addr4.addr.to_string(), true});
  for (const auto& nic : h2.nics) r.fabric.counts[sw].push_back({nic.job_addr4.addr.to_string(), 2, 1});
  auto ctx = r.context();
  auto st = r.step("hijack-rejected", {{"victim", "h1"}, {"rogue", "h2"}});
  auto ok = HijackRejected().check(st, ctx);
  CHECK(ok.passed);
  CHECK(ok.measured == "4 rejected from h2; 4 paths, 0 not from h1");
  // one rogue path got in
  std::string rogue_nh = h2.nics[0].job_addr4.addr.to_string();
  r.fabric.paths[{sw, AF_INET}].push_back({prefix, rogue_nh, rogue_nh, false});
  auto leak = HijackRejected().check(st, ctx);
  CHECK_FALSE(leak.passed);
  CHECK(leak.measured == "4 rejected from h2; 5 paths, 1 not from h1");
  // nothing rejected (the switch accepted or never saw the claim): no pass either
  r.fabric.paths[{sw, AF_INET}].pop_back();
  for (auto& c : r.fabric.counts[sw]) c.rejected = 0;
  CHECK_FALSE(HijackRejected().check(st, ctx).passed);
}

TEST_CASE("live assertion healthy-flows-kept: reads what the fault recorded", "[unit]") {
  Rig r("laptop.xml");
  auto ctx = r.context();
  auto st = r.step("healthy-flows-kept", {{"fault", "down"}});
  auto missing = HealthyFlowsKept().check(st, ctx);
  CHECK_FALSE(missing.passed);
  CHECK(missing.measured == "the fault recorded no flows");
  ctx.faults["down"] = {{"moved_healthy", 0}, {"healthy_buckets", 96}, {"buckets", 128}, {"moved_flows", 0},
                        {"healthy_flows", 190}, {"group_shrunk", true}};
  CHECK(HealthyFlowsKept().check(st, ctx).passed);
  // judged by the flows: a stack without buckets is judged the same way
  ctx.faults["down"]["moved_flows"] = 24;
  auto moved = HealthyFlowsKept().check(st, ctx);
  CHECK_FALSE(moved.passed);
  CHECK(moved.measured == "24 of 190 flows on healthy NICs changed NIC (0 of 96 healthy buckets moved)");
  ctx.faults["down"] = {{"moved_flows", 0}, {"healthy_flows", 190}, {"group_shrunk", true}};
  CHECK(HealthyFlowsKept().check(st, ctx).passed);
  CHECK(HealthyFlowsKept().check(st, ctx).measured == "0 of 190 flows on healthy NICs changed NIC (no resilient group)");
  // no flow seen on a healthy NIC proves nothing
  ctx.faults["down"]["healthy_flows"] = 0;
  CHECK_FALSE(HealthyFlowsKept().check(st, ctx).passed);
  ctx.faults["down"] = {{"moved_flows", 0}, {"healthy_flows", 190}, {"group_shrunk", false}};
  CHECK(HealthyFlowsKept().check(st, ctx).message == "the switch did not drop the failed NIC");
}

TEST_CASE("live assertion impairment-loss: the configured share of each side's packets, no more, no less, no fewer packets",
          "[unit]") {
  Rig r("laptop.xml");
  auto ctx = r.context();
  auto st = r.step("impairment-loss", {{"fault", "clean"}, {"loss", "1%"}});
  auto missing = ImpairmentLoss().check(st, ctx);
  CHECK_FALSE(missing.passed);
  CHECK(missing.measured.find("recorded no impairment counters") != std::string::npos);
  // as lossy-nic measured: both sides within 4 standard deviations of 1%
  ctx.faults["clean"] = {{"impairment",
                          {{"rx", {{"packets", 37067}, {"lost", 331}}}, {"tx", {{"packets", 28190}, {"lost", 282}}}}}};
  auto ok = ImpairmentLoss().check(st, ctx);
  CHECK(ok.passed);
  CHECK(ok.measured == "rx 331 of 37067 packets (0.89%, expected 371 ± 78); tx 282 of 28190 packets (1.00%, expected "
                       "282 ± 68)");
  // an impairment that dropped nothing (a no-op) fails
  ctx.faults["clean"]["impairment"]["rx"]["lost"] = 0;
  CHECK_FALSE(ImpairmentLoss().check(st, ctx).passed);
  // so does 2% where 1% was set
  ctx.faults["clean"]["impairment"]["rx"]["lost"] = 741;
  CHECK_FALSE(ImpairmentLoss().check(st, ctx).passed);
  // a side whose counters could not be read fails it, whatever the other says
  ctx.faults["clean"]["impairment"]["rx"] = {{"error", "reading the map: no such file"}};
  CHECK_FALSE(ImpairmentLoss().check(st, ctx).passed);
  // and too few packets to tell (the traffic did not cross the impaired side)
  ctx.faults["clean"]["impairment"] = {{"tx", {{"packets", 500}, {"lost", 5}}}};
  CHECK_FALSE(ImpairmentLoss().check(st, ctx).passed);
  CHECK(ImpairmentLoss().check(r.step("impairment-loss", {{"fault", "clean"}, {"loss", "1%"}, {"min-packets", "100"}}),
                               ctx)
            .passed);
}

namespace {
// h1's four NICs in direction DIR, 1 s samples: GBPS on each for 20 s, NIC 2
// at 0 from 10 s on
std::vector<lanes::reports::Series> nic2_down_series(const std::string& dir, double gbps) {
  std::vector<lanes::reports::Series> out;
  for (int nic = 0; nic < 4; ++nic) {
    lanes::reports::Series s;
    s.name = "h1 nic" + std::to_string(nic) + " " + dir;
    s.host = "h1", s.nic = nic, s.direction = dir;
    s.interval_s = 1.0;
    for (int t = 0; t < 20; ++t) s.values.push_back(nic == 2 && t >= 10 ? 0.0 : gbps);
    out.push_back(s);
  }
  return out;
}
}  // namespace

TEST_CASE("live assertion rate-ratio: the host's NICs between two marks against a baseline", "[unit]") {
  Rig r("laptop.xml");
  auto ctx = r.context();
  ctx.marks = {{"start", 0.0}, {"down", 10.0}};
  ctx.series = [] { return nic2_down_series("rx", 0.5); };
  auto st = r.step("rate-ratio", {{"host", "h1"}, {"from", "down+1s"}, {"to", "down+8s"}, {"base-from", "start+1s"},
                                  {"base-to", "start+8s"}, {"min", "0.65"}, {"max", "0.85"}});
  auto a = RateRatio().check(st, ctx);
  CHECK(a.passed);
  CHECK(a.measured.rfind("0.75", 0) == 0);
  CHECK(ctx.figures.at("rate_ratio_h1") == Approx(0.75));
  CHECK(a.message.empty());
  // the two windows it read, for the report to shade
  REQUIRE(a.windows.size() == 2);
  CHECK(a.windows[0].label == "base");
  CHECK(a.windows[0].from_s == Approx(1.0));
  CHECK(a.windows[0].to_s == Approx(8.0));
  CHECK(a.windows[1].label == "measured");
  CHECK(a.windows[1].from_s == Approx(11.0));
  CHECK(a.windows[1].to_s == Approx(18.0));
  CHECK(a.windows[1].host == "h1");
}

TEST_CASE("live assertion rate-ratio: a base window that does not fill the line is an invalid baseline", "[unit]") {
  Rig r("laptop.xml");  // 4 x 500 Mbit/s
  auto ctx = r.context();
  ctx.marks = {{"start", 0.0}, {"down", 10.0}};
  // 0.35 Gbit/s a NIC (73% of a counter's full line) before, NIC 2 idle after:
  // the ratio is 0.75, within bounds, but it compares a CPU-bound rate
  ctx.series = [] { return nic2_down_series("tx", 0.35); };
  auto st = r.step("rate-ratio", {{"host", "h1"}, {"direction", "tx"}, {"from", "down+1s"}, {"to", "down+8s"},
                                  {"base-from", "start+1s"}, {"base-to", "start+8s"}, {"min", "0.65"}, {"max", "0.85"}});
  auto a = RateRatio().check(st, ctx);
  CHECK_FALSE(a.passed);
  CHECK(a.measured == "0.75 (1.050 Gbit/s against 1.400), invalid baseline");
  CHECK(a.message.find("invalid baseline: h1 tx filled 73% of its line (1.400 of 2.000 Gbit/s)") == 0);
}

namespace {
// h1's four NICs, 0.1 s samples: 1 Gbit/s on each for 2 s, NIC 2 at 0 from
// 2 s to 4 s (the others 1.33), then NIC 2 back at 0.2 and climbing by
// 0.2 per sample to 1 from 4 s on
std::vector<lanes::reports::Series> rejoin_series() {
  std::vector<lanes::reports::Series> out;
  for (int n = 0; n < 4; ++n) {
    lanes::reports::Series s;
    s.name = "h1 nic" + std::to_string(n) + " rx";
    s.host = "h1", s.nic = n, s.direction = "rx";
    s.interval_s = 0.1;
    for (int i = 0; i < 80; ++i) {
      double v = 1.0;
      if (i >= 20 && i < 40) v = n == 2 ? 0.0 : 4.0 / 3;
      if (i >= 40 && n == 2) v = std::min(1.0, 0.2 * (i - 39));
      if (i >= 40 && n != 2) v = std::max(1.0, 4.0 / 3 - 0.2 * (i - 39) / 3);
      s.values.push_back(v);
    }
    s.name = "h1 nic" + std::to_string(n) + " rx";
    s.host = "h1", s.nic = n, s.direction = "rx";
    out.push_back(s);
    s.name = "h1 nic" + std::to_string(n) + " tx";  // the other direction: idle
    s.direction = "tx";
    s.values.assign(80, 0.0);
    out.push_back(s);
  }
  return out;
}
}  // namespace

TEST_CASE("live assertion rate-recovery: the time until the rate is back at 95%, failing past max=", "[unit]") {
  Rig r("laptop.xml");
  auto ctx = r.context();
  ctx.series = rejoin_series;
  ctx.marks = {{"start", 0.0}, {"down", 2.0}, {"up", 4.0}};
  // the total is 4 throughout but for the sample-by-sample climb of NIC 2
  // (the others do not drop below 1 while it climbs: the total dips to 3.2+)
  auto st = r.step("rate-recovery", {{"host", "h1"}, {"after", "up"}, {"base-from", "start"}, {"base-to", "down"},
                                     {"max", "2s"}, {"window", "200ms"}});
  auto a = RateRecovery().check(st, ctx);
  CHECK(a.passed);
  REQUIRE(ctx.figures.count("rate_recovery_s_h1"));
  double t = ctx.figures["rate_recovery_s_h1"];
  CHECK(t >= 0.0);
  CHECK(t <= 0.5);
  // the tx side never carried anything: never back, a failure that says so
  st.attrs["direction"] = "tx";
  auto never = RateRecovery().check(st, ctx);
  CHECK_FALSE(never.passed);
  // a rate that stays at three quarters never reaches 95%
  ctx.series = [] {
    auto s = rejoin_series();
    for (auto& x : s)
      if (x.name == "h1 nic2 rx")
        for (size_t i = 40; i < x.values.size(); ++i) x.values[i] = 0;
    for (auto& x : s)
      if (x.name != "h1 nic2 rx" && x.name.find(" rx") != std::string::npos)
        for (size_t i = 40; i < x.values.size(); ++i) x.values[i] = 1.0;
    return s;
  };
  st.attrs["direction"] = "rx";
  CHECK_FALSE(RateRecovery().check(st, ctx).passed);
  // and a missing mark is no pass
  ctx.marks.erase("up");
  auto nomark = RateRecovery().check(st, ctx);
  CHECK_FALSE(nomark.passed);
  CHECK(nomark.measured == "a mark it reads was never set");
}

TEST_CASE("recovery_time: first window at the target, none when the samples end first", "[unit]") {
  std::vector<double> total = {4, 4, 0, 0, 1, 2, 3, 4, 4, 4};
  auto t = recovery_time(total, 0.1, 0.2, 3.8, 0.2);
  REQUIRE(t);
  CHECK(*t == Approx(0.5));  // samples 7 and 8 (0.7 .. 0.9 s) are the first pair at 4
  CHECK_FALSE(recovery_time(total, 0.1, 0.2, 4.5, 0.2));
  CHECK_FALSE(recovery_time({}, 0.1, 0.0, 1, 0.2));
}

TEST_CASE("live assertion rate-share: each NIC's part of the rate in a window", "[unit]") {
  Rig r("laptop.xml");
  auto ctx = r.context();
  ctx.series = rejoin_series;
  ctx.marks = {{"start", 0.0}, {"down", 2.0}, {"up", 4.0}, {"end", 8.0}};
  auto even = RateShare().check(r.step("rate-share", {{"host", "h1"}, {"from", "up+2s"}, {"to", "end"}}), ctx);
  CHECK(even.passed);
  CHECK(even.measured == "nic0 25.0% nic1 25.0% nic2 25.0% nic3 25.0%");
  CHECK(ctx.figures["rate_share_h1_nic2"] == Approx(25.0));
  // while NIC 2 was down its share was 0
  auto down = RateShare().check(r.step("rate-share", {{"host", "h1"}, {"from", "down"}, {"to", "up"}}), ctx);
  CHECK_FALSE(down.passed);
  CHECK(down.measured.find("nic2 0.0%") != std::string::npos);
  // even shares of what BFD and BGP send (20 kbit/s) are no workload's: no pass
  ctx.series = [] {
    std::vector<lanes::reports::Series> v;
    for (int i = 0; i < 4; ++i) {
      lanes::reports::Series s;
      s.name = "h1 nic" + std::to_string(i) + " rx";
      s.host = "h1", s.nic = i, s.direction = "rx";
      s.interval_s = 0.1;
      s.values.assign(80, 0.000005);
      v.push_back(s);
    }
    return v;
  };
  auto idle = RateShare().check(r.step("rate-share", {{"host", "h1"}, {"from", "start"}, {"to", "end"}}), ctx);
  CHECK_FALSE(idle.passed);
  CHECK(idle.message.find("under min-gbps 0.01") != std::string::npos);
}

TEST_CASE("live assertion nic-out: the NIC's share falls to nothing and, in the bpf modes, its flows moved", "[unit]") {
  Rig r("laptop.xml");
  auto ctx = r.context();
  ctx.series = rejoin_series;  // NIC 2 at 0 from 2 s to 4 s, the others at 4/3
  ctx.marks = {{"start", 0.0}, {"down", 2.0}, {"up", 4.0}};
  auto st = r.step("nic-out", {{"host", "h1"}, {"nic", "2"}, {"direction", "rx"}, {"from", "down"}, {"to", "up"}});
  auto no_state = NicOut().check(st, ctx);  // no host agent (egress ecmp): the rates decide
  CHECK(no_state.passed);
  CHECK(no_state.measured == "nic2 0.00% of 4.000 Gbit/s");
  // the datapath moved its flows: none active on it
  // (the job's BGP session over it stays: it is bound to the NIC's address)
  nlohmann::json bgp = {{"nic", 2}, {"closed", false}, {"sport", 40000}, {"dport", 179}};
  nlohmann::json closed = {{"nic", 2}, {"closed", true}, {"sport", 40001}, {"dport", 5201}};
  r.agent_state["h1"] = {{"nics", {{{"index", 2}, {"bpf", {{"moved", 8}}}}}}, {"flows", {bgp, closed}}};
  auto moved = NicOut().check(st, ctx);
  CHECK(moved.passed);
  CHECK(moved.measured == "nic2 0.00% of 4.000 Gbit/s; datapath: 8 flows moved off it, 0 still active on it");
  // the same rates from flows that stalled on the NIC: no pass
  nlohmann::json stuck = {{"nic", 2}, {"closed", false}, {"sport", 40002}, {"dport", 5201}};
  r.agent_state["h1"] = {{"nics", {{{"index", 2}, {"bpf", {{"moved", 0}}}}}}, {"flows", {bgp, stuck}}};
  auto stalled = NicOut().check(st, ctx);
  CHECK_FALSE(stalled.passed);
  CHECK(stalled.message == "the datapath moved no flow off the NIC: what was on it stalled");
  // a bpf mode whose datapath counters cannot be read is no pass on the rates alone
  r.agent_state.clear();
  r.topo.nodes.at(static_cast<size_t>(r.topo.find_node("h1"))).job->egress = lanes::testbed::EgressMode::bpf;
  auto unread = NicOut().check(st, ctx);
  CHECK_FALSE(unread.passed);
  CHECK(unread.message == "egress is a bpf mode, but its datapath's counters could not be read");
  // nor is a state of a bpf mode whose NIC carries no datapath counters
  r.agent_state["h1"] = {{"mode", "bpf"}, {"nics", {{{"index", 2}}}}, {"flows", nlohmann::json::array()}};
  auto uncounted = NicOut().check(st, ctx);
  CHECK_FALSE(uncounted.passed);
  CHECK(uncounted.message == "egress is a bpf mode, but its datapath's counters could not be read");
  // a host agent that fell back to ecmp (BPF could not load) has no
  // counters to give: the rates decide, as in ecmp
  r.agent_state["h1"] = {{"mode", "ecmp"}, {"nics", {{{"index", 2}}}}};
  CHECK(NicOut().check(st, ctx).passed);
  r.agent_state.clear();
  r.topo.nodes.at(static_cast<size_t>(r.topo.find_node("h1"))).job->egress = lanes::testbed::EgressMode::ecmp;
  // and a NIC still carrying its quarter fails on its share
  r.agent_state.clear();
  CHECK_FALSE(NicOut().check(r.step("nic-out", {{"host", "h1"}, {"nic", "2"}, {"direction", "rx"}, {"from", "start"},
                                                {"to", "down"}}),
                             ctx)
                  .passed);
}

TEST_CASE("live assertion neighbors: permanent entries pass, one learned entry fails and is named", "[unit]") {
  Rig r("laptop.xml");
  int h1 = r.topo.find_node("h1"), tor = r.topo.find_node("r1-tor");
  r.fabric.neighbor_table[{h1, false}] = {{3, "198.18.128.4", NUD_PERMANENT}, {4, "2001:2:0:2::4", NUD_PERMANENT}};
  r.fabric.neighbor_table[{h1, true}] = {{2, "198.18.64.4", NUD_PERMANENT}, {2, "ff02::16", NUD_NOARP}};
  r.fabric.neighbor_table[{tor, false}] = {{5, "198.18.128.5", NUD_PERMANENT}};
  auto ctx = r.context();
  auto all = NeighborsPermanent().check(r.step("neighbors", {}), ctx);
  CHECK(all.passed);
  // every node and each job host's container: laptop has r1-tor, h1, h2, storage and two jobs
  CHECK(all.measured == "0 learned, 5 permanent in 6 namespaces");
  // what ARP resolved after a NIC came back (an entry that counts against the kernel-wide limit)
  r.fabric.neighbor_table[{h1, false}][0].state = NUD_REACHABLE;
  auto one = NeighborsPermanent().check(r.step("neighbors", {{"node", "h1"}}), ctx);
  CHECK_FALSE(one.passed);
  CHECK(one.name == "neighbors h1");
  CHECK(one.measured == "1 learned, 3 permanent in 2 namespaces: h1 198.18.128.4 (REACHABLE)");
}
