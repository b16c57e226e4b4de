// unit tier: scenario files (loading, overrides, every problem reported as
// file:line before anything is built) and assertion evaluation.

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <unistd.h>

#include "lanes/testbed/impair.hpp"
#include "lanes/testbed/process.hpp"
#include "lanes/testbed/topology_loader.hpp"
#include "lanes/scenarios/runner.hpp"
#include "lanes/scenarios/steady.hpp"
#include "lanes/scenarios/scenario.hpp"

using namespace lanes::scenarios;
using lanes::testbed::InputError;

namespace {

const std::string kDir = std::string(LANES_SOURCE_DIR) + "/scenarios";
const std::string kFile = kDir + "/test-inline.xml";  // relative paths resolve against scenarios/

std::vector<std::string> problems_of(const std::string& xml) {
  try {
    load_scenarios_text(xml, kFile);
  } catch (const InputError& e) {
    return e.problems();
  }
  return {};
}

bool has(const std::vector<std::string>& v, const std::string& needle) {
  for (const auto& s : v)
    if (s.find(needle) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("every shipped scenario and the qualify suite load", "[unit]") {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(kDir)) {
    if (e.path().extension() != ".xml") continue;
    INFO(e.path().string());
    auto v = load_scenarios(e.path().string());
    CHECK(!v.empty());
    ++n;
  }
  CHECK(n >= 10);
  // qualify holds every shipped scenario but the fleet's and cross-machine,
  // as the README says (the delay scenarios too: netem's, or lanes' delay line)
  auto q = load_scenarios(kDir + "/qualify.xml");
  std::set<std::string> in_qualify, shipped;
  for (const auto& sc : q) in_qualify.insert(sc.name);
  for (const auto& e : std::filesystem::directory_iterator(kDir)) {
    std::string name = e.path().stem().string();
    if (e.path().extension() != ".xml" || name == "qualify" || name.rfind("fleet", 0) == 0) continue;
    if (name == "cross-machine") continue;  // made for a run over several machines (the multi-machine tier)
    INFO(name);
    CHECK(in_qualify.count(name) == 1);
    shipped.insert(name);
  }
  CHECK(in_qualify == shipped);
  CHECK(resolve_scenario("nic-failover") == kDir + "/nic-failover.xml");
}

TEST_CASE("phase overrides change the topology the phase builds", "[unit]") {
  auto v = load_scenarios(kDir + "/throughput-4x.xml");
  REQUIRE(v.size() == 1);
  const auto& s = v[0];
  REQUIRE(s.phases.size() == 2);
  const auto& one = s.phases[0].topology;
  const auto& four = s.phases[1].topology;
  int h1 = one.find_node("h1");
  CHECK(one.nodes[h1].nics.size() == 1);
  CHECK(one.nodes[h1].job->egress == lanes::testbed::EgressMode::single);
  CHECK(four.nodes[four.find_node("h1")].nics.size() == 4);
  CHECK(four.nodes[four.find_node("h1")].job->egress == lanes::testbed::EgressMode::bpf);
  auto g = load_scenarios(kDir + "/gray-failure.xml");
  CHECK(g[0].phases[0].topology.racks[0].sw.hold_time_s == 3);
  CHECK(g[0].phases[0].topology.racks[0].sw.bfd_interval_ms == 100);  // the default
  auto dir = std::filesystem::temp_directory_path() / ("lanes-bfd-override-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream o(dir / "s.xml");
    o << "<scenario name=\"s\"><topology file=\"" << kDir << "/../topologies/laptop.xml"
      << "\" bfd-interval=\"0\"/><phase name=\"p\"><converge/></phase></scenario>";
  }
  auto off = load_scenarios((dir / "s.xml").string());
  std::filesystem::remove_all(dir);
  REQUIRE(off.size() == 1);
  for (const auto& r : off[0].phases[0].topology.racks) CHECK(r.sw.bfd_interval_ms == 0);
}

TEST_CASE("scenario problems are all reported as file:line before anything is built", "[unit]") {
  auto p = problems_of(R"(<scenario name="x">
  <topology file="../topologies/laptop.xml" egress="fast"/>
  <phase name="a">
    <converge timeout="soon"/>
    <workload name="w" type="checkpoint-save" host="h9" server="storage" bytes="10M" colour="red"/>
    <workload name="w" type="checkpoint-save" host="storage" server="h1" bytes="lots"/>
    <fault type="nic-down" host="h1" nic="4"/>
    <fault type="meteor" host="h1"/>
    <wait workload="nothing"/>
    <sleep/>
    <assert type="rate-ratio" host="h1" from="later" to="start" base-from="start" base-to="start+x"/>
  </phase>
  <phase name="a"/>
  <assert type="members" host="h1" count="4"/>
  <assert type="throughput-ratio" workload="w" phase="a" baseline="b"/>
  <bogus/>
</scenario>)");
  std::string f = kFile + ":";
  CHECK(has(p, f + "2: egress=\"fast\": expected one of single|ecmp|bpf|bpf-numa|bind|active-backup|mptcp"));
  CHECK(has(p, f + "4: timeout=\"soon\": expected a duration"));
  CHECK(has(p, f + "5: <workload> has no attribute 'colour'"));
  CHECK(has(p, f + "5: host=\"h9\": topology 'laptop' has no node of that name"));
  CHECK(has(p, f + "6: a workload named 'w' exists already"));
  CHECK(has(p, f + "6: host=\"storage\": expected a host with a job"));
  CHECK(has(p, f + "6: server=\"h1\": expected a server"));
  CHECK(has(p, f + "6: bytes=\"lots\": expected a size"));
  CHECK(has(p, f + "7: nic=\"4\": host has NICs 0 to 3 in this phase"));
  CHECK(has(p, f + "8: <fault> type=\"meteor\": expected one of"));
  CHECK(has(p, f + "9: workload=\"nothing\": no workload of that name earlier in this phase"));
  CHECK(has(p, f + "10: <sleep> needs duration=\"...\""));
  CHECK(has(p, f + "11: from=\"later\": expected MARK"));
  CHECK(has(p, f + "11: base-to=\"start+x\": expected MARK"));
  CHECK(has(p, f + "13: a phase named 'a' exists already"));
  CHECK(has(p, f + "14: assert type=\"members\" looks at the running testbed, so it belongs inside a <phase>"));
  CHECK(has(p, f + "15: baseline=\"b\": no phase of that name"));
  CHECK(has(p, f + "16: <bogus> is not allowed here"));
  CHECK(p.size() == 18);
  // figure= is latency-ratio's: on another ratio it is refused when the file loads, not after the run
  auto q = problems_of(R"(<scenario name="x">
  <topology file="../topologies/laptop.xml"/>
  <phase name="a"><workload name="w" type="dataload" host="h1" server="storage" rate="10"/></phase>
  <phase name="b"><workload name="w" type="dataload" host="h1" server="storage" rate="10"/></phase>
  <assert type="throughput-ratio" workload="w" phase="a" baseline="b" figure="p99_typical_ms"/>
  <assert type="latency-ratio" workload="w" phase="a" baseline="b" figure="p99_typical_ms"/>
  <assert type="latency-ratio" workload="w" phase="a" baseline="b" figure="p50_ms"/>
</scenario>)");
  std::string all;
  for (const auto& x : q) all += x + "\n";
  INFO(all);
  CHECK(q.size() == 2);
  CHECK(has(q, f + "5: <assert> has no attribute 'figure'"));
  CHECK(has(q, f + "7: figure=\"p50_ms\": expected one of p99_final_ms|p99_typical_ms"));
}

TEST_CASE("tcp-congestion: cubic unless a scenario names another and a bad name is refused at its line", "[unit]") {
  const char* body = R"(<topology file="../topologies/laptop.xml"/><phase name="p"><converge/></phase></scenario>)";
  auto plain = load_scenarios_text(std::string("<scenario name=\"s\">") + body, kFile);
  REQUIRE(plain.size() == 1);
  CHECK(plain[0].tcp_congestion == "cubic");
  auto bbr = load_scenarios_text(std::string("<scenario name=\"s\" tcp-congestion=\"bbr\">") + body, kFile);
  CHECK(bbr[0].tcp_congestion == "bbr");
  for (const char* bad : {"", "BBR", "cubic; reboot", "a_name_of_sixteen"}) {
    INFO(bad);
    auto p = problems_of(std::string("<scenario name=\"s\"\n tcp-congestion=\"") + bad + "\">" + body);
    CHECK(has(p, kFile + ":1: tcp-congestion=\"" + bad + "\" is not a congestion control's name"));
  }
}

TEST_CASE("a collective's piece is 4K to 16Mi", "[unit]") {
  auto with = [](const std::string& piece) {
    return problems_of(R"(<scenario name="x"><topology file="../topologies/two-racks-8.xml"/><phase name="p">
<workload name="ar" type="collective" size="8M" piece=")" + piece + R"("/></phase></scenario>)");
  };
  CHECK(with("64K").empty());
  CHECK(has(with("1K"), kFile + ":2: piece= must be 4K to 16Mi"));
  CHECK(has(with("32M"), kFile + ":2: piece= must be 4K to 16Mi"));
}

TEST_CASE("a job's ranks share one address family: IPv6 when a host is IPv6-only, refused when none is common", "[unit]") {
  auto dir = std::filesystem::temp_directory_path() / ("lanes-unit-family-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream o(dir / "t.xml");
    o << R"(<topology name="t"><spine name="s1" asn="65000"/>
<rack name="a"><host name="a" count="2" nics="2"><job name="j" family="ipv4"/></host><server name="st" role="storage"/></rack>
<rack name="b"><host name="b" count="2" nics="2"><job name="j" family="ipv6"/></host></rack>
<rack name="c"><host name="c" count="1" nics="2"><job name="j"/></host></rack>
<link a="s1" b="a-tor"/><link a="s1" b="b-tor"/><link a="s1" b="c-tor"/></topology>)";
  }
  auto with = [&](const std::string& steps) {
    std::ofstream(dir / "s.xml") << "<scenario name=\"s\"><topology file=\"t.xml\"/><phase name=\"p\">\n"
                                 << steps << "\n</phase></scenario>";
    try {
      load_scenarios((dir / "s.xml").string());
    } catch (const InputError& e) {
      return e.problems();
    }
    return std::vector<std::string>{};
  };
  std::string f = (dir / "s.xml").string() + ":";
  // IPv6-only and dual hosts: one IPv6 job, store included
  CHECK(with(R"(<workload name="j" type="training" hosts="b1,b2,c1" gradient="1M" steps="2" compute="10ms"
 checkpoint-every="1" checkpoint="1M" server="st"/>)")
            .empty());
  auto p = with(R"(<workload name="j" type="training" hosts="a1,b1" gradient="1M" steps="2" compute="10ms"/>)");
  CHECK(has(p, f + "2: the job hosts it connects must share one address family, and a1 has no IPv6"));
  p = with(R"(<workload name="c" type="collective" hosts="b1,b2" size="1M" family="ipv4"/>)");
  CHECK(has(p, f + "2: the job hosts it connects must share one address family, and b1, b2 have no IPv4 (family=\"ipv4\")"));
  p = with(R"(<workload name="pr" type="probe" from="a1" to="b1"/>)");
  CHECK(has(p, f + "2: the job hosts it connects must share one address family, and a1 has no IPv6"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("impairments: values and their combinations checked at their line", "[unit]") {
  auto p = problems_of(R"(<scenario name="x">
  <topology file="../topologies/laptop.xml"/>
  <phase name="a">
    <fault type="impair" host="h1" nic="2" loss="1%" duplicate="0.05%"/>
    <fault type="impair" host="h1" nic="2" loss="1.5"/>
    <fault type="impair" host="h1" nic="2" loss="0%" duplicate="101%"/>
    <fault type="impair" host="h1" nic="2" delay="5ms" jitter="1ms" distribution="pareto" reorder="1%" corrupt="0.1%"/>
    <fault type="impair" host="h1" nic="2" direction="sideways"/>
    <fault type="clear-impair" host="h1" nic="2" loss="1%"/>
    <fault type="clear-impair" host="h1" nic="2" direction="rx"/>
    <fault type="impair" host="h1" nic="2" delay="5" jitter="1ms"/>
    <fault type="impair" host="h1" nic="2" jitter="1ms"/>
    <fault type="impair" host="h1" nic="2" corrupt="1%" reorder="5%"/>
    <fault type="impair" host="h1" nic="2" delay="1ms" distribution="bell"/>
    <fault type="impair" host="h1" nic="2"/>
  </phase>
</scenario>)");
  std::string f = kFile + ":";
  CHECK(has(p, f + "5: loss=\"1.5\": expected a percentage like 1% or 0.05%"));
  CHECK(has(p, f + "6: loss=\"0%\": expected a percentage above 0% and at most 100%"));
  CHECK(has(p, f + "6: duplicate=\"101%\": expected a percentage above 0% and at most 100%"));
  CHECK(has(p, f + "8: direction=\"sideways\": expected one of both|tx|rx"));
  CHECK(has(p, f + "9: <fault> has no attribute 'loss'"));
  CHECK(has(p, f + "11: delay=\"5\": expected a delay like 5ms, 250us or 0.5ms"));
  CHECK(has(p, f + "12: jitter=\"1ms\": a jitter needs a delay"));
  CHECK(has(p, f + "13: reorder=\"5%\": netem reorders by sending some packets at once"));
  CHECK(has(p, f + "14: distribution=\"bell\": expected one of uniform|normal|pareto|paretonormal"));
  CHECK(has(p, f + "15: fault impair names no impairment"));
  CHECK(p.size() == 10);
}

TEST_CASE("impairments on a switch port or a fabric link: one target, a port the switch has", "[unit]") {
  auto p = problems_of(R"(<scenario name="x">
  <topology file="../topologies/two-racks.xml"/>
  <phase name="a">
    <fault type="impair" switch="r1-tor" port="swp1" loss="1%"/>
    <fault type="clear-impair" switch="r1-tor" port="swp1"/>
    <fault type="impair" switch="r1-tor" port="swp99" loss="1%"/>
    <fault type="impair" switch="r1h1" port="nic0" loss="1%"/>
    <fault type="impair" host="r1h1" nic="0" switch="r1-tor" port="swp1" loss="1%"/>
    <fault type="impair" switch="r1-tor" loss="1%"/>
    <fault type="impair" loss="1%"/>
  </phase>
</scenario>)");
  std::string f = kFile + ":";
  CHECK(has(p, f + "6: port=\"swp99\": r1-tor has no such port (its ports: "));
  CHECK(has(p, f + "7: switch=\"r1h1\": expected a rack switch or a spine"));
  CHECK(has(p, f + "8: fault impair takes host=\"...\" nic=\"...\" (a host's NIC) or switch="));
  CHECK(has(p, f + "9: fault impair takes host="));
  CHECK(has(p, f + "10: fault impair takes host="));
  CHECK(p.size() == 5);
}

TEST_CASE("impairment values: parts in a million, described back", "[unit]") {
  std::string why;
  CHECK(lanes::testbed::parse_probability("1%", why) == 10000u);
  CHECK(lanes::testbed::parse_probability("0.05%", why) == 500u);
  CHECK(lanes::testbed::parse_probability("100%", why) == 1000000u);
  CHECK(lanes::testbed::parse_probability("0.0001%", why) == 1u);
  for (const char* bad : {"", "%", "1", "1 %", "-1%", "nan%", "1e3%", "0.00004%"}) {
    INFO(bad);
    CHECK_FALSE(lanes::testbed::parse_probability(bad, why).has_value());
  }
  auto imp = lanes::testbed::parse_impairment({{"loss", "1%"}, {"duplicate", "0.1%"}});
  REQUIRE(imp.ok());
  CHECK(imp.value().describe() == "loss 1%, duplicate 0.1%");
  CHECK(lanes::testbed::Impairment{}.describe() == "none");
  auto netem = lanes::testbed::parse_impairment({{"reorder", "25%"}});
  REQUIRE_FALSE(netem.ok());
  CHECK(std::string(netem.error().what()).find("reorder=\"25%\": netem reorders") != std::string::npos);
  CHECK_FALSE(lanes::testbed::parse_impairment({{"loss", "2"}}).ok());
  auto all = lanes::testbed::parse_impairment({{"loss", "1%"},
                                               {"delay", "5ms"},
                                               {"jitter", "500us"},
                                               {"distribution", "uniform"},
                                               {"reorder", "25%"},
                                               {"corrupt", "0.1%"}});
  REQUIRE(all.ok());
  CHECK(all.value().describe() == "loss 1%, corrupt 0.1%, delay 5ms ± 500us, reorder 25%");
  CHECK(all.value().distribution.empty());  // uniform is netem's own
  CHECK(all.value().netem_parts() == "delay, jitter, reorder");  // corrupt is lanes' BPF program's
}

TEST_CASE("impairment delays: microseconds from us, ms and s, within 1us to 10s", "[unit]") {
  std::string why;
  CHECK(lanes::testbed::parse_delay("5ms", why) == 5000u);
  CHECK(lanes::testbed::parse_delay("250us", why) == 250u);
  CHECK(lanes::testbed::parse_delay("0.5ms", why) == 500u);
  CHECK(lanes::testbed::parse_delay("1.5s", why) == 1500000u);
  CHECK(lanes::testbed::parse_delay("10s", why) == 10000000u);
  for (const char* bad : {"", "5", "ms", "5 ms", "5m", "-1ms", "0ms", "0.1us", "11s", "1e3us", "nanms", "0x10ms"}) {
    INFO(bad);
    CHECK_FALSE(lanes::testbed::parse_delay(bad, why).has_value());
  }
}

TEST_CASE("netem's queue holds what the delay holds at the line rate and the TBF's queue", "[unit]") {
  using lanes::testbed::netem_limit;
  CHECK(netem_limit(100'000'000, 0, 0, 0) == 1000);  // netem's default at least
  // 10 Gbit/s for 5 ms: 6.25 MB, 4129 frames, twice over, and a 2 MB TBF queue (1322 frames)
  CHECK(netem_limit(10'000'000'000ull, 2'000'000, 5000, 0) == 2 * 4129 + 1322);
  // jitter counts: the longest a packet waits
  CHECK(netem_limit(10'000'000'000ull, 0, 4000, 1000) == 2 * 4129);
  // unshaped: as at 16 Gbit/s
  CHECK(netem_limit(0, 0, 5000, 0) == 2 * 6606);
}

TEST_CASE("netem distribution tables: numbers read, comments skipped, bad entries named", "[unit]") {
  auto dir = std::filesystem::temp_directory_path() / ("lanes-dist-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  };
  auto ok = lanes::testbed::parse_distribution_file(write("ok.dist", "# a table\n\n-32768 0 1\n  32767\t-5\n"));
  REQUIRE(ok.ok());
  CHECK(ok.value() == std::vector<int16_t>{-32768, 0, 1, 32767, -5});
  auto big = lanes::testbed::parse_distribution_file(write("big.dist", "1 40000\n"));
  REQUIRE_FALSE(big.ok());
  CHECK(std::string(big.error().what()).find("big.dist:1: \"40000\" is not a table entry") != std::string::npos);
  CHECK_FALSE(lanes::testbed::parse_distribution_file(write("empty.dist", "# nothing\n")).ok());
  CHECK_FALSE(lanes::testbed::parse_distribution_file((dir / "missing.dist").string()).ok());
  std::filesystem::remove_all(dir);
  auto none = lanes::testbed::netem_distribution("");
  REQUIRE(none.ok());
  CHECK(none.value().empty());  // uniform: netem's own
}

TEST_CASE("a step on a whole rack and a burst on several servers are checked like one host", "[unit]") {
  // fabric-256: racks r1..r4 of job hosts, parameter servers ps1 and ps2
  auto ok = problems_of(R"(<scenario name="x">
  <topology file="../topologies/fabric-256.xml"/>
  <phase name="a">
    <workload name="w" type="checkpoint-restore" rack="r2" server="storage2" bytes="1M" wait="false"/>
    <fault type="nic-down" rack="r2" nic="3" mark="down"/>
    <assert type="healthy-flows-kept" fault="down"/>
    <fault type="nic-up" rack="r2" nic="3"/>
    <wait condition="members" rack="r2" count="4"/>
    <assert type="members" rack="r2" count="4"/>
    <workload name="b" type="bootstrap" server="ps1,ps2" hosts="r1h1,r4h64" workers="4"/>
  </phase>
</scenario>)");
  CHECK(ok.empty());
  auto p = problems_of(R"(<scenario name="x">
  <topology file="../topologies/fabric-256.xml"/>
  <phase name="a">
    <fault type="nic-down" rack="r9" nic="0"/>
    <fault type="nic-down" rack="r1" host="r1h1" nic="0"/>
    <fault type="nic-down" nic="0"/>
    <fault type="nic-up" rack="r1" nic="4"/>
    <workload name="b" type="bootstrap" server="ps1,r1h1" workers="4"/>
    <workload name="c" type="bootstrap" server="ps1" hosts="r1h1,storage1"/>
    <workload name="d" type="bootstrap" server="ps1," hosts="r1h1"/>
    <wait condition="members" count="3"/>
  </phase>
</scenario>)");
  std::string f = kFile + ":";
  CHECK(has(p, f + "4: rack=\"r9\": topology 'fabric-256' has no rack of that name"));
  CHECK(has(p, f + "5: <fault> takes host=\"...\" or rack=\"...\", not both"));
  CHECK(has(p, f + "6: <fault type=\"nic-down\"> needs host=\"...\" or rack=\"...\""));
  CHECK(has(p, f + "7: nic=\"4\": host has NICs 0 to 3"));
  CHECK(has(p, f + "8: server=\"ps1,r1h1\": 'r1h1' is not a server"));
  CHECK(has(p, f + "9: hosts=\"r1h1,storage1\": 'storage1' is not a host with a job"));
  CHECK(has(p, f + "10: server=\"ps1,\": expected names separated by commas"));
  CHECK(has(p, f + "11: <wait condition=\"members\"> needs host=\"...\" (or rack=\"...\") and count=\"...\""));
}

TEST_CASE("broken XML, a missing topology and a broken suite are reported with their place", "[unit]") {
  CHECK(has(problems_of("<scenario name=\"x\">\n<phase name=\"a\">\n</scenario>"), kFile + ":3: not well-formed XML"));
  CHECK(has(problems_of("<scenario name=\"x\"><phase name=\"a\"/></scenario>"),
            kFile + ":1: <scenario> needs a <topology file=\"...\"/>"));
  CHECK(has(problems_of("<scenario name=\"x\"><topology file=\"nope.xml\"/><phase name=\"a\"/></scenario>"),
            "nope.xml: cannot read"));
  CHECK(has(problems_of("<suite name=\"q\">\n  <include file=\"missing.xml\"/>\n  <scenario/>\n</suite>"),
            kFile + ":3: <scenario> is not allowed in a suite"));
  // a topology override that makes the topology invalid is the topology's problem, with both places
  auto p = problems_of("<scenario name=\"x\"><topology file=\"../topologies/laptop.xml\"/>\n<phase name=\"a\" nics=\"20\"/></scenario>");
  CHECK(has(p, kFile + ":2: nics=\"20\": expected a whole number from 1 to 16"));
}

TEST_CASE("durations, sizes and time references", "[unit]") {
  std::chrono::milliseconds d;
  CHECK((parse_duration("1.5s", d) && d.count() == 1500));
  CHECK((parse_duration("250ms", d) && d.count() == 250));
  CHECK((parse_duration("2m", d) && d.count() == 120000));
  CHECK((parse_duration("3", d) && d.count() == 3000));
  CHECK_FALSE(parse_duration("3h", d));
  CHECK_FALSE(parse_duration("-1s", d));
  CHECK_FALSE(parse_duration("", d));
  uint64_t b;
  CHECK((parse_size("600M", b) && b == 600'000'000));
  CHECK((parse_size("64Ki", b) && b == 65536));
  CHECK((parse_size("1000", b) && b == 1000));
  CHECK_FALSE(parse_size("M", b));
  CHECK_FALSE(parse_size("12X", b));
  TimeRef r;
  CHECK((parse_timeref("agent-killed", r) && r.mark == "agent-killed" && r.offset.count() == 0));
  CHECK((parse_timeref("down+1s", r) && r.mark == "down" && r.offset.count() == 1000));
  CHECK((parse_timeref("restore.end-500ms", r) && r.mark == "restore.end" && r.offset.count() == -500));
}

namespace {

lanes::reports::ScenarioResult two_phases(double one_gbps, double four_gbps, std::vector<double> share) {
  using namespace lanes::reports;
  ScenarioResult r;
  for (auto [name, g, secs] : {std::tuple{"one", one_gbps, 8.0}, std::tuple{"four", four_gbps, 2.0}}) {
    PhaseResult p;
    p.name = name;
    WorkloadResult w;
    w.name = "save";
    w.type = "checkpoint-save";
    w.figures = {{"throughput_gbps", g},  {"seconds", secs},        {"connection_errors", 0},
                 {"bytes_verified", true}, {"verified_bytes", 1000}};
    w.nic_share = share;
    p.workloads.push_back(w);
    r.phases.push_back(p);
  }
  return r;
}

Step assertion(const std::string& type, std::map<std::string, std::string> attrs) {
  Step s;
  s.element = "assert";
  s.type = type;
  s.attrs = std::move(attrs);
  return s;
}

}  // namespace

TEST_CASE("assertions compare measured figures with their bounds", "[unit]") {
  auto r = two_phases(0.48, 1.90, {25.1, 24.9, 26.0, 24.0});
  auto ratio = assertion("throughput-ratio", {{"workload", "save"}, {"phase", "four"}, {"baseline", "one"}, {"min", "3.8"}});
  auto a = evaluate(ratio, r, "");
  CHECK(a.passed);
  CHECK(a.measured == "3.96");
  CHECK(a.expected == "≥ 3.8");
  r.phases[1].workloads[0].figures["throughput_gbps"] = 1.5;
  a = evaluate(ratio, r, "");
  CHECK_FALSE(a.passed);
  CHECK(a.measured == "3.12");
  CHECK(evaluate(assertion("completion-ratio", {{"workload", "save"}, {"phase", "four"}, {"baseline", "one"}, {"min", "3.5"}}), r, "").passed);
  auto share = assertion("nic-share", {{"workload", "save"}, {"phase", "four"}, {"tolerance", "2.5"}});
  CHECK(evaluate(share, r, "").passed);
  r.phases[1].workloads[0].nic_share = {30, 20, 25, 25};
  a = evaluate(share, r, "");
  CHECK_FALSE(a.passed);
  CHECK(a.measured == "30.0% 20.0% 25.0% 25.0%");
  // every workload of every phase when none is named
  CHECK(evaluate(assertion("connection-errors", {}), r, "").passed);
  r.phases[0].workloads[0].figures["connection_errors"] = 2;
  a = evaluate(assertion("connection-errors", {}), r, "");
  CHECK_FALSE(a.passed);
  CHECK(a.measured == "2");
  r.phases[0].workloads[0].figures["bytes_verified"] = false;
  r.phases[0].workloads[0].figures["verify_note"] = "10 of 1000 bytes sent";
  a = evaluate(assertion("bytes-verified", {}), r, "");
  CHECK_FALSE(a.passed);
  CHECK(a.measured == "not verified: save (10 of 1000 bytes sent)");
  // a workload that never ran fails, it does not pass by default
  a = evaluate(assertion("completion-time", {{"workload", "restore"}, {"phase", "one"}, {"max", "10s"}}), r, "");
  CHECK_FALSE(a.passed);
  CHECK(a.measured == "nothing");
  // any figure of a workload, within its bounds; one it lacks measured nothing
  r.phases[1].workloads[0].figures["spare_staleness_steps"] = 2;
  auto fig = [&](std::string key, std::string lo, std::string hi) {
    std::map<std::string, std::string> at = {{"workload", "save"}, {"phase", "four"}, {"figure", key}};
    if (!lo.empty()) at["min"] = lo;
    if (!hi.empty()) at["max"] = hi;
    return evaluate(assertion("figure", at), r, "");
  };
  CHECK(fig("spare_staleness_steps", "", "2").passed);
  CHECK(fig("spare_staleness_steps", "", "2").expected == "spare_staleness_steps ≤ 2");
  CHECK_FALSE(fig("spare_staleness_steps", "", "1").passed);
  CHECK_FALSE(fig("spare_staleness_steps", "3", "").passed);
  CHECK(fig("spare_staleness_steps", "1", "5").passed);
  a = fig("no_such", "", "1");
  CHECK_FALSE(a.passed);
  CHECK(a.measured == "nothing");
}

TEST_CASE("physics: no transfer beats its bytes at the path's rate plus a round trip, no flow its buffer per round trip", "[unit]") {
  auto r = two_phases(0.48, 1.90, {25.1, 24.9, 26.0, 24.0});
  auto& w = r.phases[1].workloads[0].figures;
  w["bytes"] = 40'000'000;  // 40 MB
  auto floor = assertion("transfer-floor", {{"workload", "save"}, {"phase", "four"}, {"rate", "100mbit"}, {"rtt", "40ms"}});
  w["seconds"] = 3.0;  // under 3.2 s + 40 ms: a measurement that lies
  auto a = evaluate(floor, r, "");
  CHECK_FALSE(a.passed);
  CHECK(a.expected == "≥ 3.240 s (40 MB at 100 Mbit/s + 40 ms round trip)");
  w["seconds"] = 3.2;
  CHECK_FALSE(evaluate(floor, r, "").passed);
  w["seconds"] = 3.25;
  CHECK(evaluate(floor, r, "").passed);
  w["seconds"] = 3.239;
  CHECK_FALSE(evaluate(floor, r, "").passed);
  // a transfer that broke off early measured no path: nothing, not a lie
  w["seconds"] = 0.01;
  w["bytes_verified"] = false;
  a = evaluate(floor, r, "");
  CHECK_FALSE(a.passed);
  CHECK(a.measured == "nothing");
  w["bytes_verified"] = true;

  auto ceiling = assertion("window-ceiling", {{"workload", "save"}, {"phase", "four"}, {"rtt", "40ms"}});
  a = evaluate(ceiling, r, "");  // no window= on the workload: no buffer to bound it by
  CHECK_FALSE(a.passed);
  CHECK(a.measured == "nothing");
  w["socket_buffer_bytes"] = 262144;  // 256 KiB per 40 ms: 52.4 Mbit/s
  w["flow_records"] = nlohmann::json::array({{{"bytes", 20'000'000}, {"seconds", 4.0}}, {{"bytes", 1000}, {"seconds", 0.0}}});
  a = evaluate(ceiling, r, "");
  CHECK(a.passed);  // 40 Mbit/s
  CHECK(a.measured == "fastest flow 40.0 Mbit/s");
  w["flow_records"].push_back({{"bytes", 20'000'000}, {"seconds", 2.0}});  // 80 Mbit/s: more than a window a round trip
  CHECK_FALSE(evaluate(ceiling, r, "").passed);
}

TEST_CASE("a throughput ratio against a baseline that did not fill its line fails, with the cause", "[unit]") {
  auto r = two_phases(0.48, 1.90, {25.1, 24.9, 26.0, 24.0});
  auto ratio = assertion("throughput-ratio", {{"workload", "save"}, {"phase", "four"}, {"baseline", "one"}, {"min", "3.8"}});
  auto& base = r.phases[0].workloads[0];
  base.start_s = 1.0, base.end_s = 9.0;
  base.figures["line_gbps"] = 0.5;
  base.figures["line_share"] = 1.004;  // a full line
  base.figures["steady_from_s"] = 1.6, base.figures["steady_to_s"] = 8.5;
  CHECK(evaluate(ratio, r, "").passed);
  base.figures["line_share"] = 0.80;
  base.figures["retransmits"] = 8700;
  auto a = evaluate(ratio, r, "");
  CHECK_FALSE(a.passed);  // 3.96 is in bounds, but of nothing
  CHECK(a.measured == "3.96, invalid baseline");
  CHECK(a.message == "invalid baseline: save in one filled 80% of its line (0.480 of 0.500 Gbit/s at the steady rate; "
                     "a baseline must fill 95%), 8700 retransmitted segments, 0.6 s of ramp and 0.5 s of tail left out");
}

TEST_CASE("the steady window leaves out the ramp and the tail, not a dip", "[unit]") {
  // ramp 0.1 .. 0.8, plateau 1.0 with a dip to 0.5, tail 0.6 .. 0.1
  std::vector<double> x = {0.1, 0.3, 0.8, 1.0, 1.0, 0.5, 0.5, 1.0, 1.0, 0.95, 1.0, 0.6, 0.3, 0.1};
  auto w = steady_window(x);
  CHECK(w.found);
  CHECK(w.plateau == Approx(1.0));
  CHECK(w.first == 3);
  CHECK(w.last == 10);
  CHECK(w.rate == Approx((1.0 * 5 + 0.95 + 0.5 * 2) / 8));
  // one spike does not make the plateau: the 90th percentile of 20 samples
  std::vector<double> spike(20, 1.0);
  spike[7] = 5.0;
  w = steady_window(spike);
  CHECK(w.plateau == Approx(1.0));
  CHECK(w.first == 0);
  CHECK(w.last == 19);
  CHECK(w.rate == Approx((19 + 5.0) / 20));
  // too short to tell a ramp from a plateau: the whole series
  w = steady_window({0.2, 1.0, 0.4});
  CHECK_FALSE(w.found);
  CHECK(w.rate == Approx(1.6 / 3));
  CHECK(steady_window({}).rate == 0);
  CHECK_FALSE(steady_window({0, 0, 0, 0, 0, 0}).found);
  // a full line as a counter reads it: 1.0; IPv6's headers are longer
  CHECK(line_share(0.5e9 * 1448 / 1514, 0.5e9, false) == Approx(1.0));
  CHECK(line_share(0.5e9 * 1428 / 1514, 0.5e9, true) == Approx(1.0));
  CHECK(line_share(0.4e9, 0.5e9, false) == Approx(0.8 * 1514 / 1448));
  CHECK(line_share(1, 0, false) == 0);
}

TEST_CASE("blackout and latency assertions", "[unit]") {
  lanes::reports::ScenarioResult r;
  lanes::reports::PhaseResult p;
  p.name = "drop";
  lanes::reports::WorkloadResult w;
  w.name = "probe";
  w.type = "probe";
  w.figures = {{"blackout_ms", 2832.0}, {"worst_path", "flow3"}, {"lost", 2800}};
  p.workloads.push_back(w);
  lanes::reports::WorkloadResult in;
  in.name = "ingest";
  in.type = "ingest";
  in.figures = {{"p50_ms", 30.0}, {"p99_ms", 80.0}, {"requests", 320}};
  p.workloads.push_back(in);
  r.phases.push_back(p);
  CHECK(evaluate(assertion("blackout", {{"workload", "probe"}, {"min", "500ms"}, {"max", "5s"}}), r, "drop").passed);
  CHECK_FALSE(evaluate(assertion("blackout", {{"workload", "probe"}, {"max", "2s"}}), r, "drop").passed);
  CHECK(evaluate(assertion("latency", {{"workload", "ingest"}, {"p99-max", "100ms"}}), r, "drop").passed);
  CHECK_FALSE(evaluate(assertion("latency", {{"workload", "ingest"}, {"p99-max", "50ms"}}), r, "drop").passed);
  // the p99's trend: a queue that grows (811 ms/s, read-latency on one NIC) against a flat one
  r.phases[0].workloads[1].figures["p99_slope_ms_per_s"] = 811.1;
  CHECK(evaluate(assertion("latency", {{"workload", "ingest"}, {"slope-min", "400"}}), r, "drop").passed);
  CHECK_FALSE(evaluate(assertion("latency", {{"workload", "ingest"}, {"slope-max", "25"}}), r, "drop").passed);
  r.phases[0].workloads[1].figures["p99_slope_ms_per_s"] = -1.8;
  auto flat = evaluate(assertion("latency", {{"workload", "ingest"}, {"slope-min", "-25"}, {"slope-max", "25"}}), r, "drop");
  CHECK(flat.passed);
  CHECK(flat.expected == "p99 slope ≥ -25 ms/s, p99 slope ≤ 25 ms/s");
  CHECK_FALSE(evaluate(assertion("latency", {{"workload", "ingest"}, {"slope-min", "400"}}), r, "drop").passed);
  // an assertion that names no bound is no pass
  CHECK_FALSE(evaluate(assertion("latency", {{"workload", "ingest"}}), r, "drop").passed);
}

TEST_CASE("window means of a sampled series", "[unit]") {
  lanes::reports::Series s;
  s.interval_s = 0.1;
  s.values = {1, 1, 1, 1, 1, 3, 3, 3, 3, 3};  // 1 for the first 0.5 s, then 3
  CHECK(window_mean(s, 0, 0.5) == Approx(1));
  CHECK(window_mean(s, 0.5, 1.0) == Approx(3));
  CHECK(window_mean(s, 0, 1.0) == Approx(2));
  CHECK(window_mean(s, 2, 3) == 0);
}

namespace {

struct Cli {
  int status;
  std::string out, err;
};

Cli run_lanes(std::vector<std::string> args) {
  std::string log = std::filesystem::temp_directory_path() / ("lanes-cli-" + std::to_string(::getpid()) + ".err");
  std::filesystem::remove(log);
  args.insert(args.begin(), LANES_BIN);
  lanes::testbed::ProcessSpec spec{"lanes", args};
  spec.new_session = false;
  spec.log_path = log;
  auto r = lanes::testbed::run_capture(spec, std::chrono::seconds(30));
  REQUIRE(r.ok());
  std::ifstream in(log);
  std::string err((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(log);
  return {r.value().status, r.value().out, err};
}

}  // namespace

TEST_CASE("lanes run rejects bad input with exit 2 before anything is built", "[unit]") {
  auto dir = std::filesystem::temp_directory_path() / ("lanes-run-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string bad = (dir / "bad.xml").string();
  std::ofstream(bad) << "<scenario name=\"x\">\n<topology file=\"" << LANES_SOURCE_DIR
                     << "/topologies/laptop.xml\"/>\n<phase name=\"a\">\n<sleep duration=\"forever\"/>\n</phase>\n</scenario>\n";
  auto r = run_lanes({"run", bad, "--out", (dir / "out").string()});
  CHECK(r.status == 2);
  CHECK(r.err.find(bad + ":4: duration=\"forever\": expected a duration") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "out"));  // nothing made, not even the results directory
  CHECK(run_lanes({"run"}).status == 2);
  CHECK(run_lanes({"run", bad, "--seed", "many"}).status == 2);
  CHECK(run_lanes({"run", "no-such-scenario"}).status == 2);
  auto help = run_lanes({"run", "--help"});
  CHECK(help.status == 0);
  CHECK(help.out.find("--keep") != std::string::npos);
  auto list = run_lanes({"scenarios"});
  CHECK(list.status == 0);
  CHECK(list.out.find("nic-failover") != std::string::npos);
  CHECK(list.out.find("qualify") != std::string::npos);
  CHECK(list.out.find("does not load") == std::string::npos);
  auto rep = run_lanes({"report", dir.string()});
  CHECK(rep.status == 2);
  CHECK(rep.err.find("results.json: cannot open") != std::string::npos);
  CHECK(run_lanes({"compare", dir.string()}).status == 2);
  std::filesystem::remove_all(dir);
}

TEST_CASE("lanes compare exits 1 when a verdict flipped, 0 on drift alone, 2 on a bad threshold", "[unit]") {
  auto dir = std::filesystem::temp_directory_path() / ("lanes-compare-" + std::to_string(::getpid()));
  auto r = two_phases(0.48, 1.90, {25, 25, 25, 25});
  lanes::reports::ScenarioResult sc;
  sc.name = "throughput-4x";
  sc.phases = r.phases;
  sc.assertions = {{"throughput-ratio save", "four", 20, true, "≥ 3.8", "3.96", ""}};
  lanes::reports::RunResult a;
  a.scenarios = {sc};
  auto b = a;
  b.scenarios[0].assertions[0].measured = "3.70";  // 6.6% lower: drift, still passing
  auto c = a;
  c.scenarios[0].assertions[0].passed = false;  // a flip
  c.scenarios[0].assertions[0].measured = "3.12";
  for (auto [name, run] : {std::pair{"a", &a}, std::pair{"b", &b}, std::pair{"c", &c}}) {
    std::filesystem::create_directories(dir / name);
    lanes::reports::write_results_json(*run, (dir / name / "results.json").string());
  }
  auto same = run_lanes({"compare", (dir / "a").string(), (dir / "b").string()});
  CHECK(same.status == 0);
  CHECK(same.out.find("~ drift throughput-ratio save [four]") != std::string::npos);
  auto loose = run_lanes({"compare", (dir / "a").string(), (dir / "b").string(), "--drift", "10"});
  CHECK(loose.out.find("0 numbers drifted beyond 10%") != std::string::npos);
  auto flip = run_lanes({"compare", (dir / "a").string(), (dir / "c").string(), "--html", (dir / "c.html").string()});
  CHECK(flip.status == 1);
  CHECK(flip.out.find("✗ FLIP  throughput-ratio save [four]") != std::string::npos);
  CHECK(std::filesystem::exists(dir / "c.html"));
  CHECK(run_lanes({"compare", (dir / "a").string(), (dir / "b").string(), "--drift", "-1"}).status == 2);
  CHECK(run_lanes({"compare", (dir / "a").string(), (dir / "b").string(), "--drift", "x"}).status == 2);
  std::filesystem::remove_all(dir);
}

TEST_CASE("include cycles, missing includes and impossible values are reported at their line", "[unit]") {
  auto dir = std::filesystem::temp_directory_path() / ("lanes-includes-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream((dir / name).string()) << text;
    return (dir / name).string();
  };
  auto problems = [](const std::string& path) {
    try {
      load_scenarios(path);
    } catch (const InputError& e) {
      return e.problems();
    }
    return std::vector<std::string>{};
  };
  // a suite that includes itself, and two that include each other: before, a segfault
  std::string self = write("self.xml", "<suite name=\"s\">\n  <include file=\"self.xml\"/>\n</suite>\n");
  CHECK(has(problems(self), self + ":2: <include file=\"self.xml\">: an include cycle (self.xml -> self.xml)"));
  std::string a = write("a.xml", "<suite name=\"a\">\n  <include file=\"b.xml\"/>\n</suite>\n");
  std::string b = write("b.xml", "<suite name=\"b\">\n\n  <include file=\"./a.xml\"/>\n</suite>\n");
  auto pa = problems(a);
  CHECK(has(pa, a + ":2: <include file=\"b.xml\">: the included file has 1 problem"));
  CHECK(has(pa, b + ":3: <include file=\"./a.xml\">: an include cycle (a.xml -> b.xml -> a.xml)"));
  // a missing included file, at the line that names it
  std::string m = write("m.xml", "<suite name=\"m\">\n\n  <include file=\"nope.xml\"/>\n</suite>\n");
  CHECK(has(problems(m), m + ":3: <include file=\"nope.xml\">:"));
  std::string d = write("d.xml", "<suite name=\"d\">\n  <include file=\".\"/>\n</suite>\n");
  CHECK(has(problems(d), d + ":2: <include file=\".\">: ") );
  CHECK(has(problems(d), "is a directory"));
  std::filesystem::remove_all(dir);

  auto p = problems_of(
      "<scenario name=\"x\">\n<topology file=\"../topologies/laptop.xml\"/>\n<phase name=\"p\">\n"
      "<workload name=\"w\" type=\"checkpoint-save\" host=\"h1\" server=\"storage\" bytes=\"1M\" flows=\"0\"/>\n"
      "<workload name=\"i\" type=\"ingest\" host=\"h1\" server=\"storage\" conns=\"0\" requests=\"0\"/>\n"
      "<workload name=\"b\" type=\"bootstrap\" server=\"storage\" workers=\"0\"/>\n"
      "<workload name=\"q\" type=\"probe\" from=\"h1\" to=\"storage\" paths=\"0\" rate=\"0\"/>\n"
      "</phase>\n"
      "<assert type=\"throughput-ratio\" workload=\"w\" phase=\"p\" baseline=\"p\" min=\"4\" max=\"3\"/>\n"
      "<assert type=\"blackout\" workload=\"q\" phase=\"p\" min=\"2s\" max=\"500ms\"/>\n"
      "<assert type=\"nic-share\" workload=\"w\" phase=\"p\" name=\"a\" name=\"b\"/>\n"
      "</scenario>");
  CHECK(has(p, kFile + ":4: flows=\"0\": expected a whole number from 1"));
  CHECK(has(p, kFile + ":5: conns=\"0\""));
  CHECK(has(p, kFile + ":5: requests=\"0\""));
  CHECK(has(p, kFile + ":6: workers=\"0\""));
  CHECK(has(p, kFile + ":7: paths=\"0\""));
  CHECK(has(p, kFile + ":7: rate=\"0\": expected a number above 0"));
  CHECK(has(p, kFile + ":9: min=\"4\" is above max=\"3\""));
  CHECK(has(p, kFile + ":10: min=\"2s\" is above max=\"500ms\""));
  CHECK(has(p, kFile + ":11: <assert>: attribute 'name' is given twice"));
  CHECK(has(problems_of("<scenario name=\"x\"/>\n<scenario name=\"y\"/>"), kFile + ":2: a second root element"));
  CHECK(has(problems_of("<scenario name=\"x\">\n<topology file=\"../topologies/laptop.xml\"/>\n<phase name=\"p\">\n"
                        "<workload name=\"q\" type=\"probe\" from=\"h1\" to=\"storage\"/>\n<wait workload=\"q\"/>\n"
                        "</phase>\n</scenario>"),
            kFile + ":5: probe 'q' runs until <stop workload=\"q\"/>"));
}

TEST_CASE("lanes validate checks scenarios and suites, and bad command-line values are exit 2", "[unit]") {
  auto ok = run_lanes({"validate", kDir + "/qualify.xml", kDir + "/nic-failover.xml"});
  INFO(ok.err);
  CHECK(ok.status == 0);
  CHECK(ok.out.find("qualify.xml: ok, 23 scenarios") != std::string::npos);
  CHECK(ok.out.find("nic-failover.xml: ok, 1 scenario (nic-failover)") != std::string::npos);
  auto dir = std::filesystem::temp_directory_path() / ("lanes-validate-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string bad = (dir / "bad.xml").string();
  std::ofstream(bad) << "<scenario name=\"x\">\n<topology file=\"" << LANES_SOURCE_DIR
                     << "/topologies/laptop.xml\"/>\n<phase name=\"a\">\n<sleep duration=\"forever\"/>\n</phase>\n</scenario>\n";
  auto r = run_lanes({"validate", bad});
  CHECK(r.status == 2);
  CHECK(r.out.empty());  // no "ok" before the problem
  CHECK(r.err.find(bad + ":4: duration=\"forever\"") != std::string::npos);
  auto zero = run_lanes({"validate", "/dev/zero"});
  CHECK(zero.status == 2);
  CHECK(zero.err.find("larger than 16 MiB") != std::string::npos);
  auto seed = run_lanes({"run", bad, "--seed", "-5"});
  CHECK(seed.status == 2);
  CHECK(seed.err.find("--seed -5") != std::string::npos);
  CHECK(run_lanes({"run", bad, "--run-id", ""}).status == 2);
  CHECK(run_lanes({"run", bad, "--run-id", "waytoolong"}).status == 2);
  CHECK(run_lanes({"up", kDir + "/../topologies/laptop.xml", "--run-id", ""}).status == 2);
  CHECK(run_lanes({"status", "../.."}).status == 2);
  CHECK(run_lanes({"exec", "../..", "h1", "--", "true"}).status == 2);
  CHECK(run_lanes({"down", "../.."}).status == 2);
  // a results.json that is not one is said in words
  std::filesystem::create_directories(dir / "r");
  std::ofstream((dir / "r" / "results.json").string()) << "{\"format\":\"lanes-results/1\",\"scenarios\":\"x\"}";
  auto rep = run_lanes({"report", (dir / "r").string()});
  CHECK(rep.status == 2);
  CHECK(rep.err.find("a field is missing or has the wrong type") != std::string::npos);
  CHECK(rep.err.find("json.exception") == std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("exec workloads and faults: a command, where it runs, and its exit, checked at their line", "[unit]") {
  auto p = problems_of(R"(<scenario name="x">
  <topology file="../topologies/laptop.xml"/>
  <phase name="a">
    <workload name="ok" type="exec" node="h1" cmd="iperf3 -c ${addr:storage}" expect-exit="0" direction="rx"/>
    <workload name="srv" type="exec" node="storage" cmd="iperf3 -s -1" wait="false"/>
    <workload name="nocmd" type="exec" node="h1"/>
    <workload name="empty" type="exec" node="h1" cmd=""/>
    <workload name="nojob" type="exec" node="storage" in="job" cmd="true"/>
    <workload name="where" type="exec" node="nowhere" cmd="true"/>
    <workload name="exit" type="exec" node="h1" cmd="true" expect-exit="256"/>
    <fault type="exec" node="r1-tor" cmd="ip route" mark="f"/>
    <fault type="exec" node="storage" in="job" cmd="true"/>
    <fault type="exec" node="h1"/>
  </phase>
</scenario>)");
  std::string f = kFile + ":";
  CHECK_FALSE(has(p, f + "4:"));
  CHECK_FALSE(has(p, f + "5:"));
  CHECK(has(p, f + "6: <workload type=\"exec\"> needs cmd="));
  CHECK(has(p, f + "7: cmd=\"...\" is empty"));
  CHECK(has(p, f + "8: in=\"job\": storage has no job container"));
  CHECK(has(p, f + "9: node=\"nowhere\""));
  CHECK(has(p, f + "10: expect-exit=\"256\": an exit status is 0 to 255"));
  CHECK_FALSE(has(p, f + "11:"));
  CHECK(has(p, f + "12: in=\"job\": storage has no job container"));
  CHECK(has(p, f + "13: <fault type=\"exec\"> needs cmd="));
}
