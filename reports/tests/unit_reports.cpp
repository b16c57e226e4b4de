// unit tier: the report writers — JUnit XML against the JUnit schema CI
// reporters read (tests/data/junit.xsd, checked with xmllint), the JSON
// round trip, and the HTML report's content.

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <regex>

#include "lanes/testbed/process.hpp"
#include "lanes/reports/result.hpp"
#include "lanes/reports/compare.hpp"
#include "lanes/reports/writers.hpp"

using namespace lanes::reports;

namespace {

RunResult sample() {
  RunResult r;
  r.lanes_version = "0.1.0";
  r.kernel = "6.18.0";
  r.gobgpd = "gobgpd version 3.10.0";
  r.features = {{"bpf", true}, {"netkit", false}};
  r.seed = 7;
  r.started = "2026-11-29T10:00:00Z";
  r.duration_s = 42.5;
  ScenarioResult ok;
  ok.name = "nic-failover";
  ok.description = "a NIC fails <during> a restore & more";
  ok.file = "scenarios/nic-failover.xml";
  ok.passed = true;
  ok.duration_s = 12;
  ok.topology = {"laptop",
                 {{"r1-tor", "switch", "r1"}, {"h1", "host", "r1"}, {"storage", "server", "r1"}},
                 {{"r1-tor", "h1", "host-nic"}, {"r1-tor", "h1", "host-nic"}, {"r1-tor", "storage", "server"}}};
  PhaseResult ph;
  ph.name = "failover";
  ph.run_id = "ab12";
  ph.duration_s = 10;
  for (int nic = 0; nic < 2; ++nic)
    for (const char* dir : {"tx", "rx"}) {
      Series s;
      s.name = "h1 nic" + std::to_string(nic) + " " + dir;
      s.unit = "Gbit/s";
      for (int i = 0; i < 100; ++i) s.values.push_back(std::string(dir) == "rx" ? 0.48 - (nic == 1 && i > 30 ? 0.48 : 0) : 0.01);
      ph.series.push_back(s);
    }
  ph.markers = {{3.0, "down", "fault"}, {6.0, "up", "fault"}, {0.1, "restore", "workload"}};
  WorkloadResult w;
  w.name = "restore";
  w.type = "checkpoint-restore";
  w.host = "h1";
  w.start_s = 0.1;
  w.end_s = 9.5;
  w.figures = {{"throughput_gbps", 0.72}, {"seconds", 9.4}, {"connection_errors", 0}, {"bytes_verified", true},
               {"verified_bytes", 600000000}};
  // what its plug-in declares and says (scenarios/src/workloads/checkpoint.cpp)
  w.declared = {{"throughput_gbps", "Gbit/s"}, {"seconds", "s"}, {"connection_errors", "", FigureDecl::Combine::sum}};
  w.summary = "0.720 Gbit/s · 9.40 s · 0 errors · all bytes verified · 0 retransmits";
  w.nic_share = {66.0, 34.0};
  ph.workloads.push_back(w);
  WorkloadResult p;
  p.name = "probe";
  p.type = "probe";
  p.host = "storage";
  p.figures = {{"blackout_ms", 2832.0},
               {"worst_path", "flow3"},
               {"lost", 2800},
               {"paths", {{{"path", "flow0"}, {"longest_gap_ms", 1.2}}, {{"path", "flow3"}, {"longest_gap_ms", 2832.0}}}}};
  ph.workloads.push_back(p);
  ok.phases.push_back(ph);
  ok.assertions = {{"healthy-flows-kept down", "failover", 14, true, "no bucket of a healthy NIC moves", "0 of 96", ""},
                   {"rate-ratio h1", "failover", 18, true, "≥ 0.65", "0.75", ""}};
  ok.log_tail = "0.000 failover phase failover: bringing up laptop\n";
  ScenarioResult bad;
  bad.name = "throughput-4x";
  bad.file = "scenarios/throughput-4x.xml";
  bad.passed = false;
  bad.error = "phase four-nics: bringing the topology up: File exists";
  bad.assertions = {{"throughput-ratio save four-nics vs one-nic", "four-nics", 20, false, "≥ 3.8", "2.01",
                     "0.96 Gbit/s against 0.48 Gbit/s"}};
  r.scenarios = {ok, bad};
  return r;
}

std::string tmp_dir() {
  auto d = std::filesystem::temp_directory_path() / ("lanes-reports-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d.string();
}

int xmllint(const std::string& xml_path) {
  lanes::testbed::ProcessSpec spec{
      "xmllint", {"xmllint", "--noout", "--schema", std::string(LANES_REPORTS_TEST_DATA) + "/junit.xsd", xml_path}};
  spec.new_session = false;
  auto r = lanes::testbed::run_capture(spec, std::chrono::seconds(20));
  REQUIRE(r.ok());
  return r.value().status;
}

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("JUnit XML validates against the JUnit schema and says expected and measured", "[unit]") {
  auto dir = tmp_dir();
  std::string xml = junit_xml(sample());
  {
    std::ofstream(dir + "/junit.xml") << xml;
  }
  CHECK(xmllint(dir + "/junit.xml") == 0);
  CHECK(count(xml, "<testsuite ") == 2);
  CHECK(count(xml, "<testcase ") == 4);  // three assertions and the scenario that could not run
  CHECK(xml.find("expected ≥ 3.8, measured 2.01") != std::string::npos);
  CHECK(xml.find("<error message=\"phase four-nics") != std::string::npos);
  CHECK(xml.find("bringing up laptop") != std::string::npos);  // the log tail in system-out
  CHECK(xml.find("failures=\"1\"") != std::string::npos);
  // the schema is not a rubber stamp: a suite without its hostname fails
  std::string broken = std::regex_replace(xml, std::regex(" hostname=\"[^\"]*\""), "");
  {
    std::ofstream(dir + "/broken.xml") << broken;
  }
  CHECK(xmllint(dir + "/broken.xml") != 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a scenario not run here is neither passed nor failed and says why", "[unit]") {
  auto dir = tmp_dir();
  RunResult r;
  r.started = "2026-12-03T08:00:00Z";
  ScenarioResult ran;
  ran.name = "lossy-nic";
  ran.passed = true;
  ran.assertions.push_back({});
  ran.assertions.back().name = "bytes-verified";
  ran.assertions.back().passed = true;
  ScenarioResult skipped;
  skipped.name = "far-nic";
  skipped.not_run = "it asks for delay at far-nic.xml:20; that needs the netem qdisc";
  r.scenarios = {skipped};
  CHECK_FALSE(r.passed());  // nothing ran
  CHECK(r.not_run() == 1);
  r.scenarios.push_back(ran);
  CHECK(r.passed());  // what ran passed
  std::string xml = junit_xml(r);
  {
    std::ofstream(dir + "/junit.xml") << xml;
  }
  CHECK(xmllint(dir + "/junit.xml") == 0);
  CHECK(xml.find("<skipped message=\"it asks for delay at far-nic.xml:20") != std::string::npos);
  std::ostringstream out;
  terminal_summary(r, "", out);
  CHECK(out.str().find("NOT RUN far-nic: it asks for delay") != std::string::npos);
  CHECK(out.str().find("PASSED: 2 scenarios (1 not run here)") != std::string::npos);
  write_results_json(r, dir + "/results.json");
  CHECK(read_results_json(dir + "/results.json").scenarios.at(0).not_run == skipped.not_run);
  std::filesystem::remove_all(dir);
}

TEST_CASE("results.json reads back to the same result", "[unit]") {
  auto dir = tmp_dir();
  RunResult r = sample();
  write_results_json(r, dir + "/results.json");
  RunResult back = read_results_json(dir + "/results.json");
  CHECK(nlohmann::json(back) == nlohmann::json(r));
  CHECK(back.scenarios.at(0).phases.at(0).series.size() == 4);
  CHECK(back.passed() == false);
  CHECK(back.assertions_failed() == 1);
  {
    std::ofstream(dir + "/other.json") << R"({"hello": 1})";
  }
  CHECK_THROWS_WITH(read_results_json(dir + "/other.json"), Catch::Contains("not a lanes results file"));
  CHECK_THROWS_WITH(read_results_json(dir + "/missing.json"), Catch::Contains("cannot open"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("HTML report holds every assertion and chart and needs nothing from the network", "[unit]") {
  RunResult r = sample();
  std::string html = html_report(r);
  for (const auto& s : r.scenarios)
    for (const auto& a : s.assertions) CHECK(html.find(a.name) != std::string::npos);
  CHECK(count(html, "class=\"assertion\"") == 3);
  CHECK(html.find("a NIC fails &lt;during&gt; a restore &amp; more") != std::string::npos);  // escaped
  CHECK(count(html, "<polygon class=\"area\"") == 2);    // h1's two NICs, stacked
  CHECK(count(html, "<polyline class=\"total\"") == 1);  // and its total
  CHECK(count(html, "class=\"marker\"") == 2);            // the two faults
  CHECK(count(html, "<rect class=\"bar\"") == 2);         // blackout per path
  CHECK(count(html, "<rect class=\"node\"") == 3);        // the topology
  CHECK(html.find("×2") != std::string::npos);            // h1's two links
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("src=") == std::string::npos);
  CHECK(std::regex_search(html, std::regex("href=\"https?:")) == false);
  CHECK(html.find("could not run") == std::string::npos);
  CHECK(html.find("phase four-nics: bringing the topology up") != std::string::npos);
}

TEST_CASE("HTML report: what assertions read is outlined and named, labels fit, many NICs get small multiples",
          "[unit]") {
  auto r = sample();
  auto& sc = r.scenarios[0];
  sc.assertions[1].windows = {{"h1", 1.0, 3.0, "base"}, {"h1", 4.0, 9.0, "measured"}, {"h2", 1.0, 2.0, "base"}};
  // a path whose name is long: its bar's label must fit left of the bar
  std::string long_name(60, 'p');
  sc.phases[0].workloads[1].figures["paths"].push_back({{"path", long_name}, {"longest_gap_ms", 10.0}});
  std::string html = html_report(r);
  CHECK(count(html, "<rect class=\"window\"") == 2);  // h1's two; h2 drew no chart
  CHECK(html.find(">rate-ratio h1 · base</text>") != std::string::npos);
  CHECK(html.find(">rate-ratio h1 · measured</text>") != std::string::npos);
  // the label ends where the bars begin: at least 60 glyphs at 11 px
  // (0.55 em each, a narrow font's average) from the chart's left edge
  std::smatch m;
  REQUIRE(std::regex_search(html, m, std::regex("<text x=\"([0-9.]+)\"[^>]*text-anchor=\"end\"[^>]*>" + long_name)));
  CHECK(std::stod(m[1]) >= 60 * 0.55 * 11);
  CHECK(html.find("class=\"multiple\"") == std::string::npos);  // two NICs: the stacked chart says it all

  // six NICs: stacked, and a small chart each
  auto& ph = sc.phases[0];
  for (int nic = 2; nic < 6; ++nic) {
    Series x;
    x.name = "h1 nic" + std::to_string(nic) + " rx";
    x.values.assign(100, 0.1);
    ph.series.push_back(x);
  }
  html = html_report(r);
  CHECK(count(html, "<polygon class=\"area\"") == 6);
  CHECK(count(html, "<svg class=\"multiple\"") == 6);
}

TEST_CASE("HTML report draws an open-loop workload's latency over the run, a line per phase", "[unit]") {
  auto r = sample();
  auto& sc = r.scenarios[0];
  WorkloadResult d;
  d.name = "dataload";
  d.type = "dataload";
  d.figures = {{"p99_per_s_ms", {1400.0, 2580.0, 3210.0}}, {"p99_ms", 9000.0}};
  PhaseResult one;
  one.name = "one-nic";
  one.workloads.push_back(d);
  d.figures["p99_per_s_ms"] = {55.0, 70.0, 60.0};
  PhaseResult four;
  four.name = "four-nics";
  four.workloads.push_back(d);
  sc.phases = {one, four};
  std::string html = html_report(r);
  CHECK(html.find("Latency over the run — dataload") != std::string::npos);
  CHECK(count(html, "<polyline class=\"series\"") == 2);
  CHECK(html.find(">one-nic</text>") != std::string::npos);
  CHECK(html.find(">four-nics</text>") != std::string::npos);
}

TEST_CASE("HTML report: each workload's figures as its plug-in said them, never another type's", "[unit]") {
  auto r = sample();
  auto& sc = r.scenarios[0];
  WorkloadResult c;
  c.name = "allreduce";
  c.type = "collective";
  c.figures = {{"op", "allreduce"}, {"ranks", 8}, {"time_s", 9.669}, {"busbw_gbps", 0.1853}, {"bytes_verified", true}};
  c.summary = "allreduce of 128 MiB among 8 ranks in 9.669 s · busbw 0.185 Gbit/s";
  WorkloadResult old;  // a results file from before lanes wrote the sentence: its figures
  old.name = "job";
  old.type = "training";
  old.figures = {{"jct_s", 37.27}, {"steps", 12}, {"bytes_verified", false}};
  PhaseResult ph;
  ph.name = "four-nics";
  ph.workloads = {c, old};
  sc.phases = {ph};
  std::string html = html_report(r);
  CHECK(html.find("allreduce of 128 MiB among 8 ranks in 9.669 s · busbw 0.185 Gbit/s") != std::string::npos);
  CHECK(html.find("bytes_verified false · jct_s 37.3 · steps 12") != std::string::npos);
  CHECK(html.find("p50 0.00 ms") == std::string::npos);
  // the sentence and the declarations are in results.json, read back whole
  auto back = nlohmann::json(r).get<RunResult>();
  CHECK(back.scenarios[0].phases[0].workloads[0].summary == c.summary);
  auto w = nlohmann::json(sample()).get<RunResult>().scenarios[0].phases[0].workloads[0];
  CHECK(w.declared == sample().scenarios[0].phases[0].workloads[0].declared);
  CHECK(nlohmann::json(w)["declared"][2]["combine"] == "sum");
}

TEST_CASE("report: a training job's step timeline, a row per phase on one scale, the steps a failure lost outlined", "[unit]") {
  RunResult r;
  r.scenarios.emplace_back();
  auto& sc = r.scenarios.back();
  sc.name = "training-jct";
  auto step = [](int inc, int s, double a, double m, double e) {
    return nlohmann::json{{"incarnation", inc}, {"step", s}, {"start_s", a}, {"compute_end_s", m}, {"end_s", e}};
  };
  WorkloadResult job;
  job.name = "job";
  job.type = "training";
  nlohmann::json tl = nlohmann::json::array({step(0, 0, 0, 0.5, 2), step(0, 1, 2, 2.5, 4), step(0, 2, 4, 4.5, 6)});
  tl[1]["save_end_s"] = 4.5;
  job.figures = {{"jct_s", 6.0}, {"timeline", tl}};
  PhaseResult four;
  four.name = "four-nics";
  four.workloads.push_back(job);
  // the failed phase: checkpoint after step 1, step 2 done, the job killed
  // in step 3 and resumed at step 2 (from step 1's checkpoint) after a gap
  tl = nlohmann::json::array(
      {step(0, 0, 0, 0.5, 2), step(0, 1, 2, 2.5, 4), step(0, 2, 4.5, 5, 6.5), step(1, 2, 8, 8.5, 10)});
  tl[1]["save_end_s"] = 4.5;
  job.figures = {{"jct_s", 10.0}, {"timeline", tl}};
  PhaseResult failures;
  failures.name = "failures";
  failures.workloads.push_back(job);
  sc.phases = {four, failures};
  std::string html = html_report(r);
  CHECK(html.find("Step timeline — job") != std::string::npos);
  CHECK(count(html, "<svg class=\"timeline\"") == 1);
  CHECK(count(html, "<rect class=\"compute\"") == 7);
  CHECK(count(html, "<rect class=\"comm\"") == 7);
  CHECK(count(html, "<rect class=\"save\"") == 2);
  // only the step done again is outlined red (its compute and all-reduce):
  // steps 0 and 1 were kept by the checkpoint
  CHECK(count(html, "stroke=\"#d62728\" stroke-width=\"1.5\"") == 2);
  CHECK(html.find(">JCT 6.0 s</text>") != std::string::npos);
  CHECK(html.find(">JCT 10.0 s</text>") != std::string::npos);
  CHECK(html.find(">failures</text>") != std::string::npos);
}

TEST_CASE("compare classifies a flipped verdict, a fix, drift beyond the threshold and what one run lacks", "[unit]") {
  CompareThresholds t;  // 5%
  auto n = [](double v) { return std::optional<double>(v); };
  CHECK(classify(true, true, true, false, n(0.75), n(0.76), true, t) == Change::flip);  // the number barely moved
  CHECK(classify(true, true, false, true, n(0.98), n(0.75), true, t) == Change::fixed);
  CHECK(classify(true, true, true, true, n(3.96), n(3.80), true, t) == Change::same);   // 4.0% < 5%
  CHECK(classify(true, true, true, true, n(3.96), n(3.70), true, t) == Change::drift);  // 6.6%
  CHECK(classify(true, true, false, false, n(2.0), n(3.0), true, t) == Change::drift);  // both failed, moved
  CHECK(classify(true, true, true, true, n(0), n(0), false, t) == Change::same);
  CHECK(classify(true, true, true, true, n(0), n(1), true, t) == Change::drift);
  CHECK(classify(true, true, true, true, std::nullopt, std::nullopt, true, t) == Change::drift);  // text only
  CHECK(classify(true, true, true, true, std::nullopt, std::nullopt, false, t) == Change::same);
  CHECK(classify(true, false, true, true, n(1), std::nullopt, false, t) == Change::only_a);
  CHECK(classify(false, true, true, true, std::nullopt, n(1), false, t) == Change::only_b);
  CHECK(classify(true, true, true, true, n(1.0), n(1.3), true, CompareThresholds{0.5}) == Change::same);
  CHECK(first_number("0.75 (1.439 Gbit/s against 1.920)") == 0.75);
  CHECK(first_number("3 of 96 healthy buckets moved") == 3);
  CHECK(first_number("-1.5e2 ms") == -150);
  CHECK(first_number("after 0.35 s") == 0.35);
  CHECK(first_number("h1 tx filled 73% of its line") == 73);
  CHECK(first_number("ipv6: .5 s") == 0.5);
  CHECK_FALSE(first_number("nothing"));
  CHECK_FALSE(first_number(""));
  CHECK_FALSE(first_number("nan"));
}

TEST_CASE("comparison of two runs: flips, drift and the configurations side by side", "[unit]") {
  RunResult a = sample(), b = sample();
  b.kernel = "6.19.0";
  a.scenarios[0].phases[0].config = {{"topology", "laptop"}, {"egress", "bpf"}, {"cpu_busy_before", 0.02}};
  b.scenarios[0].phases[0].config = {{"topology", "laptop"}, {"egress", "ecmp"}, {"cpu_busy_before", 0.40}};
  b.scenarios[0].assertions[1].measured = "0.70";                       // rate-ratio drifts 6.7%, still passes
  b.scenarios[0].assertions[0].passed = false;                          // healthy-flows-kept flips
  b.scenarios[0].phases[0].workloads[0].figures["throughput_gbps"] = 0.73;  // 1.4%: the same
  b.scenarios[0].phases[0].workloads[0].figures["seconds"] = 12.0;          // 21.7%: drift
  auto c = compare_runs(a, b);
  CHECK(c.flips == 1);
  CHECK(c.fixes == 0);
  CHECK(c.drifts == 2);  // the rate-ratio and the seconds
  CHECK(c.unmatched == 0);
  auto row = [&](const std::string& field) -> const ConfigRow* {
    for (const auto& r : c.config)
      if (r.field == field) return &r;
    return nullptr;
  };
  REQUIRE(row("kernel"));
  CHECK(row("kernel")->differs);
  REQUIRE(row("nic-failover/failover egress"));
  CHECK(row("nic-failover/failover egress")->a == "bpf");
  CHECK(row("nic-failover/failover egress")->b == "ecmp");
  CHECK_FALSE(row("nic-failover/failover topology")->differs);
  CHECK_FALSE(row("nic-failover/failover cpu_busy_before"));  // the machine's state, not the setup
  CHECK(row("feature bpf"));
  std::ostringstream out;
  compare_text(c, "A", a.started, "B", b.started, out);
  std::string s = out.str();
  CHECK(s.find("✗ FLIP  healthy-flows-kept down [failover]") != std::string::npos);
  CHECK(s.find("~ drift rate-ratio h1 [failover]") != std::string::npos);
  CHECK(s.find("(-6.7%)") != std::string::npos);
  CHECK(s.find("≠ kernel") != std::string::npos);
  CHECK(s.find("≠ nic-failover/failover egress") != std::string::npos);
  CHECK(s.find("failover/restore seconds") != std::string::npos);
  CHECK(s.find("failover/restore throughput_gbps") == std::string::npos);  // moved less than 5%
  CHECK(s.find("1 verdicts flipped (pass → fail), 0 fixed (fail → pass), 2 numbers drifted beyond 5%") !=
        std::string::npos);
  std::string html = html_compare(c, "A", a.started, "B", b.started);
  CHECK(count(html, "<tr class=\"flip\"") == 1);
  CHECK(count(html, "<tr class=\"drift\"") == 4);  // 2 drifts, the kernel and the egress
  CHECK(html.find("<script") == std::string::npos);
  // the other way round, the flip is a fix
  auto back = compare_runs(b, a);
  CHECK(back.flips == 0);
  CHECK(back.fixes == 1);
  // a scenario B could not run to its end
  RunResult broken = a;
  broken.scenarios[0].passed = false;
  broken.scenarios[0].error = "bringing the topology up: File exists";
  broken.scenarios[0].assertions.clear();
  auto c2 = compare_runs(a, broken);
  CHECK(c2.flips == 1);
  CHECK(c2.unmatched == 2);  // its two assertions are in A only
}

TEST_CASE("terminal summary has a line per assertion and says where the report is", "[unit]") {
  std::ostringstream out;
  terminal_summary(sample(), "out", out);
  std::string s = out.str();
  CHECK(count(s, "  ✓ ") == 2);
  CHECK(count(s, "  ✗ ") == 4);  // the failed assertion and the error, each twice
  auto verdict = s.find("FAILED: 2 scenarios, 2 of 3 assertions passed");
  REQUIRE(verdict != std::string::npos);
  // and again after the verdict, naming their scenario: a log that keeps
  // only its last lines (CI's) still says what failed
  CHECK(count(s.substr(verdict), "  ✗ ") == 2);
  CHECK(s.find("out/report.html") != std::string::npos);
  // a scenario's failed assertions come after its passed ones, next to
  // the verdict, where a log cut to its tail still shows them
  auto r = sample();
  r.scenarios[0].assertions[0].passed = false;
  std::ostringstream out2;
  terminal_summary(r, "", out2);
  std::string s2 = out2.str();
  CHECK(s2.find("✗ healthy-flows-kept down") > s2.find("✓ rate-ratio h1"));
}

TEST_CASE("phases side by side: each workload in two phases or more against the first phase's, in results.json and "
          "the report", "[unit]") {
  ScenarioResult s;
  s.name = "roads";
  auto phase = [](const std::string& name, const std::string& egress) {
    PhaseResult p;
    p.name = name;
    p.config = {{"egress", egress}};
    return p;
  };
  auto workload = [](const std::string& name, double gbps, std::vector<double> share, nlohmann::json more = {}) {
    WorkloadResult w;
    w.name = name;
    w.figures = {{"throughput_gbps", gbps}, {"seconds", 1.0 / gbps}, {"connection_errors", 0}, {"bytes_verified", true}};
    if (!more.is_null()) w.figures.update(more);
    w.nic_share = std::move(share);
    return w;
  };
  PhaseResult one = phase("single", "single"), ab = phase("active-backup", "active-backup"), mp = phase("mptcp", "mptcp");
  one.workloads = {workload("save-1", 0.48, {100}), workload("only-here", 1, {100})};
  ab.workloads = {workload("save-1", 0.48, {100, 0, 0, 0}), workload("failover", 0.47, {40, 60, 0, 0})};
  mp.workloads = {workload("save-1", 1.92, {25, 25, 25, 25}, {{"machine_cpu_s_per_gbit", 0.73}}),
                  workload("failover", 1.9, {38, 22, 23, 17}, {{"connection_errors", 2}})};
  // a workload with no rate and no bytes of its own (a probe): neither a rate nor a ✗
  WorkloadResult probe;
  probe.name = "probe";
  probe.figures = {{"paths", 8}, {"connection_errors", 0}};
  one.workloads.push_back(probe);
  mp.workloads.push_back(probe);
  s.phases = {one, ab, mp};
  auto t = phase_table(s);
  CHECK(t.baseline == "single");
  CHECK(t.workloads == std::vector<std::string>{"save-1", "probe", "failover"});  // only-here ran once
  CHECK_FALSE(t.rows[2].cells.at("probe").gbps);
  CHECK_FALSE(t.rows[2].cells.at("probe").ratio);
  CHECK_FALSE(t.rows[2].cells.at("probe").bytes_verified);
  REQUIRE(t.rows.size() == 3);
  CHECK(t.rows[2].egress == "mptcp");
  const auto& c = t.rows[2].cells.at("save-1");
  REQUIRE(c.ratio);
  CHECK(*c.ratio == Approx(4.0));
  CHECK(c.nic_share == std::vector<double>{25, 25, 25, 25});
  REQUIRE(c.cpu_s_per_gbit);
  CHECK(*c.cpu_s_per_gbit == Approx(0.73));
  CHECK_FALSE(t.rows[1].cells.at("save-1").cpu_s_per_gbit);
  CHECK_FALSE(t.rows[1].cells.at("failover").ratio);  // the first phase has no failover
  CHECK(t.rows[0].cells.count("failover") == 0);
  CHECK(t.rows[2].cells.at("failover").connection_errors == 2);
  CHECK(t.rows[2].cells.at("failover").bytes_verified == true);
  // results.json carries it; a single phase has none
  RunResult r;
  r.scenarios = {s};
  nlohmann::json j = r;
  const auto& row = j["scenarios"][0]["by_phase"]["rows"][2];
  CHECK(row["phase"] == "mptcp");
  CHECK(row["workloads"]["save-1"]["ratio"].get<double>() == Approx(4.0));
  CHECK(row["workloads"]["save-1"]["nic_share"].size() == 4);
  CHECK(j["scenarios"][0]["by_phase"]["rows"][1]["workloads"]["failover"]["ratio"].is_null());
  ScenarioResult lone = s;
  lone.phases.resize(1);
  CHECK(phase_table(lone).empty());
  // the report draws it: a row per phase, the failed failover marked
  std::string html = html_report(r);
  auto at = html.find("Phases side by side");
  REQUIRE(at != std::string::npos);
  std::string table = html.substr(at, html.find("</table>", at) - at);
  CHECK(count(table, "<tr>") == 4);
  CHECK(table.find("<b>4.00x</b>") != std::string::npos);
  CHECK(table.find("25/25/25/25 %") != std::string::npos);
  CHECK(table.find("0.73 CPU-s/Gbit") != std::string::npos);
  CHECK(count(table, "class=\"fail\">✗") == 1);
  CHECK(count(table, "no rate") == 2);
}

TEST_CASE("delays: every delayed link end, configured against measured, in results.json and the report", "[unit]") {
  ScenarioResult s;
  s.name = "scale-across";
  PhaseResult p;
  p.name = "replicate";
  // a topology link's two ends (its delay lines still running: no percentiles), one not readable
  p.config["delay_lines"] = nlohmann::json::array(
      {{{"link", "east-spine1 west-spine1"}, {"where", "east-spine1:eth2"}, {"engine", "lanes-delay"},
        {"configured_delay_us", 20000}, {"configured_jitter_us", 0}, {"packets", 5000}, {"held_min_us", 20004.0},
        {"held_mean_us", 20031.0}, {"held_max_us", 20410.0}, {"held_p50_us", 0.0}, {"tap_drops", 1}, {"queue_drops", 2}},
       {{"link", "east-spine1 west-spine1"}, {"where", "west-spine1:eth2"}, {"error", "unreadable: x.json"}}});
  // an impair fault set and cleared: both sides, with percentiles
  p.config["fault_far"] = {{"impairment",
                            {{"tx", {{"packets", 10}, {"delay", {{"where", "h1:eth3"}, {"configured_delay_us", 1000},
                                                                 {"configured_jitter_us", 100}, {"packets", 10},
                                                                 {"held_p50_us", 1040.0}, {"held_p99_us", 1190.0}}}}},
                             {"rx", {{"packets", 10}, {"lost", 0}}}}}};  // rx: no delay line (loss only)
  p.config["egress"] = "ecmp";
  s.phases = {p};
  auto rows = delay_table(s);
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].what == "link east-spine1 west-spine1");
  CHECK(rows[0].delay_us == 20000);
  CHECK(rows[0].held_mean_us == Approx(20031.0));
  CHECK(rows[0].held_p50_us < 0);  // 0: not computed yet, not "held nothing"
  CHECK(rows[0].drops == 3);
  CHECK(rows[1].error == "unreadable: x.json");
  CHECK(rows[2].what == "fault far (tx)");
  CHECK(rows[2].jitter_us == 100);
  CHECK(rows[2].held_p99_us == Approx(1190.0));
  CHECK(rows[2].held_mean_us < 0);
  RunResult r;
  r.scenarios = {s};
  nlohmann::json j = r;
  REQUIRE(j["scenarios"][0]["delays"].size() == 3);
  CHECK(j["scenarios"][0]["delays"][0]["held_p99_us"].is_null());
  CHECK(j["scenarios"][0]["delays"][2]["held_p99_us"] == 1190.0);
  std::string html = html_report(r);
  auto at = html.find("Delay, configured and measured");
  REQUIRE(at != std::string::npos);
  std::string table = html.substr(at, html.find("</table>", at) - at);
  CHECK(table.find("20.000") != std::string::npos);    // configured, ms
  CHECK(table.find("20.031") != std::string::npos);    // mean held
  CHECK(table.find("1.000 ± 0.100") != std::string::npos);
  CHECK(table.find("unreadable: x.json") != std::string::npos);
  // a scenario without delays has no such table
  s.phases[0].config = {{"egress", "ecmp"}};
  r.scenarios = {s};
  CHECK(html_report(r).find("Delay, configured and measured") == std::string::npos);
}
