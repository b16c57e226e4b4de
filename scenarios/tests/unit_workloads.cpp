// unit tier: the workload and fault plug-ins without root — lanes-traffic's
// results read back as typed structs, the figures each workload computes
// from them, and what a nic-down fault records over a fake fabric.

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "nic_figures.hpp"
#include "fake_fabric.hpp"
#include "faults/faults.hpp"
#include "lanes/scenarios/steady.hpp"
#include "lanes/testbed/topology_loader.hpp"
#include "lanes/scenarios/arrivals.hpp"
#include "lanes/scenarios/live_assertion.hpp"
#include "lanes/scenarios/result_assertion.hpp"
#include "support.hpp"
#include "workload_runs.hpp"
#include "workloads/workloads.hpp"

using namespace lanes::scenarios;
using lanes::test::FakeFabric;
using nlohmann::json;
namespace tb = lanes::testbed;

namespace {

// A file in a directory of this test process's own, removed when it exits.
std::string write_temp(const std::string& name, const std::string& text) {
  struct Dir {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("lanes-unit-" + std::to_string(::getpid()));
    Dir() { std::filesystem::create_directories(path); }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static Dir dir;
  auto p = dir.path / name;
  std::ofstream(p) << text;
  return p.string();
}

traffic::SendResult sent(std::vector<uint64_t> per_flow, std::vector<int> ports = {}) {
  traffic::SendResult s;
  for (size_t i = 0; i < per_flow.size(); ++i) {
    s.flows.push_back({static_cast<uint32_t>(i), i < ports.size() ? ports[i] : 0, per_flow[i], 1, "", 1.0, {}});
    s.bytes += per_flow[i];
  }
  s.seconds = 2;
  s.gbps = 1.5;
  s.steady_gbps = 2.0;
  return s;
}
traffic::RecvResult received(std::vector<uint64_t> per_flow) {
  traffic::RecvResult r;
  for (size_t i = 0; i < per_flow.size(); ++i) {
    r.flows.push_back({static_cast<uint32_t>(i), ~uint64_t{0}, per_flow[i], true, 1.0, std::nullopt});
    r.verified_bytes += per_flow[i];
  }
  r.all_complete = true;
  return r;
}

// A phase over a fake fabric: what a fault does to the NICs is the test's
// on_set_nics; everything a fault here does not use fails the test.
class FakePhase final : public StepContext {
 public:
  tb::Topology topology;
  FakeFabric fake;
  std::function<void(const std::vector<std::string>&, int, bool)> on_set_nics;
  std::map<std::string, json> faults;
  std::vector<std::string> marks, said;

  explicit FakePhase(const char* file) : topology(tb::load_topology(lanes::test::topology(file))) {}
  const tb::Topology& topo() const override { return topology; }
  FabricView& fabric() override { return fake; }
  int node_ns(const std::string&) override { throw StepError("no namespaces here"); }
  int job_ns(const std::string&) override { throw StepError("no namespaces here"); }
  std::string server_addr(const std::string&, bool) const override { throw StepError("no servers here"); }
  int take_ports(int) override { return 5301; }
  std::string out_base(const std::string& name) const override { return "/nonexistent/" + name; }
  uint64_t seed() const override { return 1; }
  Proc start_traffic(const std::string&, int, std::vector<std::string>, const std::string&, bool) override {
    throw StepError("no processes here");
  }
  Proc start_command(const std::string&, int, const std::string&, const std::string&,
                     std::vector<std::pair<std::string, std::string>>) override {
    throw StepError("no processes here");
  }
  void start_helper(const std::string&, const std::string&, int, std::vector<std::string>, const std::string&) override {
    throw StepError("no processes here");
  }
  bool stop_helper(const std::string&) override { return false; }
  void go(std::vector<Proc>&) override {}
  void wait_listening(int, int, bool, const std::string&) override {}
  std::map<int, int> bpf_flow_nics(const std::string&, int) override { return {}; }
  void set_nics(const std::vector<std::string>& hosts, int nic, bool up) override {
    if (on_set_nics) on_set_nics(hosts, nic, up);
  }
  void nft(int, const std::string&, const std::string&) override { throw StepError("no nft here"); }
  pid_t daemon_pid(const std::string&, const std::string&) override { return 0; }
  bool kill_daemon(const std::string&, pid_t) override { return false; }
  bool daemon_running(const std::string&, pid_t) override { return false; }
  void claim_task_ips(const std::string&, const std::string&) override {}
  void fail_workload(const std::string& name, const JobFailure& f) override { failed_workloads.emplace_back(name, f); }
  std::vector<std::pair<std::string, JobFailure>> failed_workloads;
  double now_s() const override { return 1.0; }
  void mark(const std::string& label, const std::string&) override { marks.push_back(label); }
  void say(const std::string& s) override { said.push_back(s); }
  void figure(const std::string&, json) override {}
  void record_fault(const std::string& label, json record) override { faults[label] = std::move(record); }
  bool sleep(std::chrono::milliseconds) override { return true; }
  bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds, std::chrono::milliseconds) override {
    return pred();  // no clock: one look
  }

  // HOST's task group at its switch: MEMBERS, and BUCKETS naming them
  void group(const std::string& host, uint32_t id, std::vector<uint32_t> members, std::vector<uint32_t> buckets) {
    const auto& h = topology.nodes.at(static_cast<size_t>(topology.find_node(host)));
    int sw = topology.racks.at(static_cast<size_t>(h.rack)).switch_node;
    fake.fib[{sw, AF_INET}].clear();
    fake.groups[sw].clear();
    fake.group(sw, h.job->task_ip4.to_string() + "/32", id, std::move(members));
    fake.bucket_table[sw][id] = std::move(buckets);
  }
};

Step step(const char* element, const char* type, std::map<std::string, std::string> attrs) {
  Step s;
  s.element = element;
  s.type = type;
  s.attrs = std::move(attrs);
  return s;
}

}  // namespace

TEST_CASE("each workload type declares its figures and says them in its own sentence", "[unit]") {
  using C = lanes::reports::FigureDecl::Combine;
  for (const auto* w : workloads()) {
    std::set<std::string> keys;
    for (const auto& d : w->declared_figures()) CHECK(keys.insert(d.key).second);  // each once
    CHECK_FALSE(keys.empty());
  }
  auto decl = [](const char* type, const std::string& key) -> std::optional<lanes::reports::FigureDecl> {
    for (const auto& d : find_workload(type)->declared_figures())
      if (d.key == key) return d;
    return std::nullopt;
  };
  // repeated runs add their errors and bytes, and verify only if every run did
  CHECK(decl("checkpoint-save", "connection_errors")->combine == C::sum);
  CHECK(decl("ingest", "bytes_verified")->combine == C::all);
  CHECK(decl("checkpoint-restore", "throughput_gbps")->combine == C::median_run);
  CHECK(decl("collective", "busbw_gbps")->compared);
  CHECK(decl("dataload", "p99_final_ms")->unit == "ms");
  CHECK_FALSE(decl("probe", "seconds"));  // a probe runs until stopped: its time is no figure
  json coll = {{"op", "allreduce"}, {"bytes", 128 << 20},  {"ranks", 8},           {"time_s", 9.669},
               {"algbw_gbps", 0.1059}, {"busbw_gbps", 0.1853}, {"efficiency", 0.9266}, {"retransmits", 114088},
               {"bytes_verified", true}};
  CHECK(find_workload("collective")->summary(coll) ==
        "allreduce of 128 MiB among 8 ranks in 9.669 s · algbw 0.106 Gbit/s · busbw 0.185 Gbit/s (93% of the line) · "
        "0 errors · all bytes verified · 114088 retransmits");
  json train = {{"jct_s", 37.27}, {"steps_done", 12}, {"steps", 12},       {"wait_fraction", 0.839},
                {"saves", 3},     {"save_mean_s", 0.45}, {"steps_lost", 0}, {"bytes_verified", false}};
  std::string t = find_workload("training")->summary(train);
  CHECK(t.find("JCT 37.27 s · 12 of 12 steps") == 0);
  CHECK(t.find("GPUs idle 84% · 3 checkpoints (mean 0.45 s)") != std::string::npos);
  CHECK(t.find("NOT verified") != std::string::npos);  // said plainly
  // a data loader says its latency, not a fetch's connections
  json dl = {{"requests", 1114}, {"p99_first_ms", 1823.0}, {"p99_final_ms", 9057.0}, {"p99_slope_ms_per_s", 819.0}};
  CHECK(find_workload("dataload")->summary(dl).find("1114 requests · p99 1823 ms in the first quarter, 9057 ms in the last") == 0);
}

TEST_CASE("a workload run N times is one result: the median run, its errors and bytes summed, verified only if all were", "[unit]") {
  auto run = [](const char* name, double secs, int errors, bool verified, uint64_t bytes) {
    lanes::reports::WorkloadResult w;
    w.name = name;
    w.type = "dataload";
    w.start_s = secs;
    w.end_s = 2 * secs;
    w.figures = {{"seconds", secs}, {"connection_errors", errors}, {"bytes_verified", verified},
                 {"verified_bytes", bytes}, {"p99_final_ms", 10 * secs}};
    if (!verified) w.figures["verify_note"] = "3 bytes differ";
    return w;
  };
  const Workload& dl = *find_workload("dataload");
  auto r = combine_runs({run("w#1", 3, 0, true, 100), run("w#2", 1, 2, false, 50), run("w#3", 2, 1, true, 100)}, dl);
  CHECK(r.name == "w#3");  // the run of median seconds
  CHECK(r.figures["p99_final_ms"] == 20.0);
  CHECK(r.figures["connection_errors"] == 3);
  CHECK(r.figures["verified_bytes"] == 250);
  CHECK(r.figures["bytes_verified"] == false);  // one run was not: the whole is not
  CHECK(r.figures["verify_note"] == json::array({"run 2: \"3 bytes differ\""}));
  CHECK(r.figures["runs"] == 3);
  CHECK(r.figures["seconds_runs"] == json::array({3.0, 1.0, 2.0}));
  CHECK(r.start_s == 3.0);  // from the first run's start to the last run's end
  CHECK(r.end_s == 4.0);
  CHECK(r.declared == dl.declared_figures());
  CHECK(r.summary == dl.summary(r.figures));
  auto ok = combine_runs({run("w#1", 1, 0, true, 10), run("w#2", 2, 0, true, 10)}, dl);
  CHECK(ok.figures["bytes_verified"] == true);
  CHECK_FALSE(ok.figures.contains("verify_note"));
}

TEST_CASE("workload, fault and result-assertion plug-ins: every type registered once", "[unit]") {
  std::set<std::string> types;
  for (const auto* w : workloads()) {
    CHECK(types.insert(w->type()).second);
    CHECK_FALSE(w->attrs().empty());
    CHECK(find_workload(w->type()) == w);
  }
  CHECK(types == std::set<std::string>{"checkpoint-save", "checkpoint-restore", "ingest", "dataload", "bootstrap", "probe",
                                       "collective", "training", "exec", "trace"});
  CHECK(find_workload("probe")->open_ended());
  CHECK_FALSE(find_workload("ingest")->open_ended());
  CHECK(std::string(find_workload("checkpoint-save")->nic_direction()) == "tx");
  CHECK(std::string(find_workload("probe")->nic_direction()).empty());
  types.clear();
  for (const auto* f : faults()) {
    CHECK(types.insert(f->type()).second);
    CHECK(find_fault(f->type()) == f);
  }
  CHECK(types == std::set<std::string>{"nic-down", "nic-up", "nic-flap", "silent-drop", "clear-drop", "kill",
                                       "rogue-announce", "job-fail", "impair", "clear-impair", "exec"});
  CHECK(find_fault("nic-down") != nullptr);
  CHECK(find_workload("nic-down") == nullptr);
  types.clear();
  for (const auto* a : result_assertions()) {
    CHECK(types.insert(a->type()).second);
    CHECK(find_result_assertion(a->type()) == a);
    CHECK(find_live_assertion(a->type()) == nullptr);  // a type is judged live or afterwards, not both
  }
  CHECK(types == std::set<std::string>{"throughput-ratio", "completion-ratio", "latency-ratio", "busbw-ratio", "nic-share",
                                       "connection-errors",
                                       "bytes-verified", "blackout", "latency", "completion-time", "figure",
                                       "transfer-floor", "window-ceiling"});
}

TEST_CASE("lanes-traffic results: written and read back through one struct, anything else is no result", "[unit]") {
  auto s = sent({100, 200}, {40001, 40002});
  s.flows[1].error = "send: Connection reset by peer";
  s.flows[0].per_interval = {10, 90};
  auto back = traffic::read_result<traffic::SendResult>(write_temp("send.json", "noise\n" + traffic::line_of(s) + "\n"));
  REQUIRE(back);
  CHECK(back->bytes == 300);
  CHECK(back->flows.at(1).local_port == 40002);
  CHECK(back->flows.at(1).error == "send: Connection reset by peer");
  CHECK(back->flows.at(0).per_interval == std::vector<uint64_t>{10, 90});
  // first_bad_offset only when a byte was wrong
  auto r = received({100, 200});
  r.flows[1].first_bad_offset = 17;
  json j = r;
  CHECK_FALSE(j["flows"][0].contains("first_bad_offset"));
  auto rb = traffic::read_result<traffic::RecvResult>(write_temp("recv.json", j.dump()));
  REQUIRE(rb);
  CHECK_FALSE(rb->flows[0].first_bad_offset);
  CHECK(rb->flows[1].first_bad_offset == uint64_t{17});
  // another mode's line, a wrong type, a truncated line, no line, no file
  CHECK_FALSE(traffic::read_result<traffic::RecvResult>(write_temp("x1.json", traffic::line_of(s))));
  CHECK_FALSE(traffic::read_result<traffic::SendResult>(write_temp("x2.json", R"({"role":"send","bytes":"many"})")));
  CHECK_FALSE(traffic::read_result<traffic::SendResult>(write_temp("x3.json", R"({"role":"send","bytes":1)")));
  CHECK_FALSE(traffic::read_result<traffic::SendResult>(write_temp("x4.json", "lanes-traffic: port 5301: in use\n")));
  CHECK_FALSE(traffic::read_result<traffic::SendResult>("/nonexistent/lanes-send.json"));
  // fields an older lanes-traffic did not print read as their defaults
  auto old = traffic::read_result<traffic::FetchResult>(write_temp("x5.json", R"({"role":"fetch","connections":3})"));
  REQUIRE(old);
  CHECK(old->connections == 3);
  CHECK(old->latency_samples_ms.empty());
}

TEST_CASE("checkpoint figures: verified only when every flow's bytes arrived as sent", "[unit]") {
  std::map<int, int> nic_of = {{40001, 0}, {40002, 3}};
  auto ok = transfer_figures(sent({100, 200}, {40001, 40002}), received({100, 200}), 300, 2, nic_of, 4);
  CHECK(ok["bytes_verified"] == true);
  CHECK_FALSE(ok.contains("verify_note"));
  CHECK(ok["connection_errors"] == 0);
  CHECK(ok["retransmits"] == 2);
  CHECK(ok["sender_gbps"] == 2.0);  // the steady rate where there is one
  CHECK(ok["bpf_flows_per_nic"] == json::array({1, 0, 0, 1}));
  CHECK(ok["flow_records"][1]["bpf_nic"] == 3);
  CHECK_FALSE(ok.contains("family"));  // a sender that did not say where it sent
  auto s6 = sent({100, 200});
  s6.to = "2001:2:0:100::1";
  CHECK(transfer_figures(s6, received({100, 200}), 300, 2, {}, 4)["family"] == "ipv6");
  // the same total, split differently: a flow lost bytes another did not send
  auto swapped = transfer_figures(sent({100, 200}), received({150, 150}), 300, 2, {}, 4);
  CHECK(swapped["bytes_verified"] == false);
  CHECK(swapped["verify_note"] == "300 of 300 bytes sent, 300 verified, per-flow counts differ");
  CHECK_FALSE(swapped.contains("bpf_flows_per_nic"));
  // short of what was asked
  CHECK(transfer_figures(sent({100, 100}), received({100, 100}), 300, 2, {}, 4)["bytes_verified"] == false);
  // a receiver that printed nothing
  auto dead = transfer_figures(sent({100, 200}), std::nullopt, 300, 2, {}, 4);
  CHECK(dead["bytes_verified"] == false);
  CHECK(dead["verify_note"] == "a traffic endpoint printed no result");
  // a sender that printed nothing: every flow counts as a connection error
  CHECK(transfer_figures(std::nullopt, received({100, 200}), 300, 2, {}, 4)["connection_errors"] == 2);
  // a rack: sums, the slowest host's time, one failed host fails the whole
  auto rack = rack_transfer_figures({"h1", "h2"}, {ok, dead}, 2);
  CHECK(rack["bytes"] == 600);
  CHECK(rack["verified_bytes"] == 300);
  CHECK(rack["bytes_verified"] == false);
  CHECK(rack["verify_note"] == json::array({"h2: a traffic endpoint printed no result"}));
  CHECK(rack["flows"] == 4);
  CHECK(rack["per_host"].size() == 2);
  CHECK(rack_transfer_figures({"h1", "h2"}, {ok, ok}, 2)["bytes_verified"] == true);
}

TEST_CASE("fetch figures: percentiles over every fetcher's samples, a silent fetcher fails the check", "[unit]") {
  traffic::FetchResult a, b;
  a.connections = b.connections = 2;
  a.completed = b.completed = 2;
  a.all_verified = b.all_verified = true;
  a.requests = b.requests = 5;
  a.latency_samples_ms = {1, 2, 3, 4, 5};
  b.latency_samples_ms = {6, 7, 8, 9, 100};
  a.seconds = 1.0;
  b.seconds = 3.0;
  auto f = fetch_figures({a, b});
  CHECK(f["bytes_verified"] == true);
  CHECK(f["connections"] == 4);
  CHECK(f["requests"] == 10);
  CHECK(f["seconds"] == 3.0);
  CHECK(f["p50_ms"] == 6.0);  // the median of all ten, not of the two fetchers' medians
  CHECK(f["max_ms"] == 100.0);
  auto short_one = fetch_figures({a, std::nullopt});
  CHECK(short_one["bytes_verified"] == false);
  CHECK(short_one["verify_note"] == "2 of 2 connections completed");
  auto none = fetch_figures({});
  CHECK(none["connection_errors"] == 1);  // no connection at all is an error, not a pass
  CHECK(none["bytes_verified"] == false);
}

TEST_CASE("probe figures: a path nothing arrived on was blacked out for the whole probe", "[unit]") {
  traffic::ProbeSendResult s;
  s.paths = 4;
  s.sent_per_path = 1000;
  traffic::ProbeRecvResult r;
  r.paths = {{0, 1000, 0, 2.0, 0.5}, {1, 950, 50, 60.0, 3.0}, {3, 1000, 0, 1.5, 0.1}};
  auto f = probe_figures(s, r, 4, true, 1.2, 1000);
  CHECK(f["lost"] == 1050);  // 50 on nic1, all 1000 of nic2
  CHECK(f["worst_path"] == "nic2");
  CHECK(f["blackout_ms"] == Approx(1200.0));
  CHECK(f["paths"].size() == 4);
  r.paths.push_back({2, 1000, 0, 3.0, 0.2});
  auto all = probe_figures(s, r, 4, false, 1.2, 1000);
  CHECK(all["worst_path"] == "flow1");
  CHECK(all["blackout_ms"] == 60.0);
  CHECK(all["lost"] == 50);
  // a path that went dark and stayed dark: its last 400 probes (0.4 s at
  // 1000 a second) are its blackout, though no gap between two arrivals was long
  r.paths[3] = {2, 600, 0, 3.0, 0.2};
  auto dark = probe_figures(s, r, 4, false, 1.2, 1000);
  CHECK(dark["worst_path"] == "flow2");
  CHECK(dark["blackout_ms"] == Approx(400.0));
  CHECK(dark["lost"] == 450);
}

TEST_CASE("fault nic-down: records the buckets and the flows of healthy NICs that moved, over a fake fabric", "[unit]") {
  FakePhase ph("laptop.xml");
  const std::vector<uint32_t> members = {1000, 1002, 1004, 1006};
  std::vector<uint32_t> buckets;
  for (int i = 0; i < 16; ++i) buckets.push_back(members[static_cast<size_t>(i % 4)]);
  ph.group("h1", 100001, members, buckets);
  // the switch forwards a flow by its bucket: the flow's port is the
  // bucket's next hop; the flows enter by the storage server's port
  std::set<std::string> entered;
  ph.fake.flow_port = [&](int node, const tb::FlowKey& f) {
    entered.insert(f.iif + " " + f.src.to_string() + " " + f.dst.to_string());
    const auto& b = ph.fake.bucket_table[node][100001];
    return b.empty() ? 0 : static_cast<int>(b[f.sport % b.size()]);
  };
  // a resilient group: only the failed NIC's buckets move
  ph.on_set_nics = [&](const std::vector<std::string>& hosts, int nic, bool up) {
    CHECK(hosts == std::vector<std::string>{"h1"});
    CHECK(nic == 2);
    CHECK_FALSE(up);
    auto after = buckets;
    for (auto& b : after)
      if (b == 1004) b = 1000;
    ph.group("h1", 100001, {1000, 1002, 1006}, after);
  };
  NicChange down(true);
  down.apply(step("fault", "nic-down", {{"host", "h1"}, {"nic", "2"}}), "down", ph);
  REQUIRE(ph.faults.count("down"));
  const auto& rec = ph.faults["down"];
  CHECK(rec["group_shrunk"] == true);
  CHECK(rec["buckets"] == 16);
  CHECK(rec["healthy_buckets"] == 12);
  CHECK(rec["moved_healthy"] == 0);
  CHECK(rec["flows"] == 256);
  CHECK(rec["healthy_flows"].get<int>() > 150);
  CHECK(rec["moved_flows"] == 0);
  CHECK(entered == std::set<std::string>{"swp9 198.18.128.17 198.19.0.1"});
  CHECK(rec["members_after"] == 3);
  CHECK(ph.marks == std::vector<std::string>{"down"});
  // a group rehashed over the rest: healthy flows move, and it says how many
  ph.group("h1", 100001, members, buckets);
  ph.on_set_nics = [&](const std::vector<std::string>&, int, bool) {
    std::vector<uint32_t> rehashed;
    const std::vector<uint32_t> rest = {1000, 1002, 1006};
    for (int i = 0; i < 16; ++i) rehashed.push_back(rest[static_cast<size_t>(i % 3)]);
    ph.group("h1", 100001, rest, rehashed);
  };
  down.apply(step("fault", "nic-down", {{"host", "h1"}, {"nic", "2"}}), "again", ph);
  CHECK(ph.faults["again"]["moved_healthy"] == 7);  // of the 12 healthy buckets, 7 now name another NIC
  CHECK(ph.faults["again"]["moved_flows"].get<int>() > 0);  // and the flows in them moved with them
  // the switch never dropped the NIC: no shrink recorded
  ph.group("h1", 100001, members, buckets);
  ph.on_set_nics = nullptr;
  down.apply(step("fault", "nic-down", {{"host", "h1"}, {"nic", "2"}}), "stuck", ph);
  CHECK(ph.faults["stuck"]["group_shrunk"] == false);
  CHECK_FALSE(ph.faults["stuck"].contains("shrunk_ms"));
  // nic-up records nothing
  NicChange(false).apply(step("fault", "nic-up", {{"host", "h1"}, {"nic", "2"}}), "up", ph);
  CHECK_FALSE(ph.faults.count("up"));
}

TEST_CASE("fault job-fail: fails the named workload at its step, marked, restarting it after restart-after", "[unit]") {
  FakePhase ph("laptop.xml");
  const Fault* f = find_fault("job-fail");
  REQUIRE(f != nullptr);
  f->apply(step("fault", "job-fail", {{"workload", "job"}, {"after-step", "5"}, {"restart-after", "2500ms"}}), "crash",
           ph);
  REQUIRE(ph.failed_workloads.size() == 1);
  CHECK(ph.failed_workloads[0].first == "job");
  CHECK(ph.failed_workloads[0].second.after_step == 5);
  CHECK(ph.failed_workloads[0].second.restart_after == std::chrono::milliseconds(2500));
  CHECK(ph.failed_workloads[0].second.mark == "crash");  // the workload marks it when it kills
  f->apply(step("fault", "job-fail", {{"workload", "job"}}), "again", ph);
  CHECK(ph.failed_workloads.at(1).second.after_step == -1);  // at once
  CHECK(ph.failed_workloads.at(1).second.restart_after == std::chrono::milliseconds(1000));  // the default
  // a workload type that cannot resume says so
  WorkloadRun w;
  CHECK(find_workload("collective")->fail(w, ph, JobFailure{}).find("does not fail and resume") != std::string::npos);
}

TEST_CASE("bucket moves: failed NICs' buckets are not healthy ones", "[unit]") {
  auto m = bucket_moves({1, 2, 3, 1, 2, 3}, {1, 2, 1, 1, 2, 2});
  CHECK(m.buckets == 6);
  CHECK(m.healthy == 4);
  CHECK(m.moved_healthy == 0);
  auto moved = bucket_moves({1, 2, 3, 1}, {2, 1, 1, 1});
  CHECK(moved.healthy == 3);
  CHECK(moved.moved_healthy == 2);
  CHECK(bucket_moves({}, {}).healthy == 0);
}

TEST_CASE("open-loop arrivals: the rate asked for, evenly or as a Poisson process", "[unit]") {
  auto even = arrival_times(100, 10, Arrival::constant, 1);
  REQUIRE(even.size() == 1000);
  CHECK(even[1] - even[0] == Approx(0.01));
  CHECK(even.back() < 10);
  // 10^5 Poisson arrivals: the count within 1% of rate x duration, gaps
  // exponential (mean 1/rate, as many above the mean as e^-1 of them)
  auto p = arrival_times(1000, 100, Arrival::poisson, 7);
  CHECK(static_cast<double>(p.size()) == Approx(100'000).epsilon(0.01));
  size_t above = 0;
  double sum = 0;
  for (size_t i = 1; i < p.size(); ++i) {
    double gap = p[i] - p[i - 1];
    CHECK(gap >= 0);
    sum += gap;
    above += gap > 0.001;
  }
  CHECK(sum / static_cast<double>(p.size() - 1) == Approx(0.001).epsilon(0.02));
  CHECK(static_cast<double>(above) / static_cast<double>(p.size() - 1) == Approx(std::exp(-1.0)).epsilon(0.02));
  CHECK(arrival_times(1000, 100, Arrival::poisson, 7) == p);  // the seed decides
  CHECK(arrival_times(0, 10, Arrival::poisson, 1).empty());
}

TEST_CASE("dataload figures: latency that grows through the run has a slope and a final p99 above its first", "[unit]") {
  // one request a second for 8 s; the queue grows: latency 100 ms more each second
  traffic::FetchResult r;
  r.connections = 1;
  r.completed = 1;
  r.requests = 8;
  r.all_verified = true;
  r.issued = 8;
  for (int i = 0; i < 8; ++i) {
    r.issue_s.push_back(i + 0.5);
    r.latency_samples_ms.push_back(100.0 * (i + 1));
  }
  auto f = dataload_figures(r, 8);
  CHECK(f["p99_slope_ms_per_s"] == Approx(100.0));
  CHECK(f["p99_first_ms"] == Approx(200.0));  // issued in the first 2 s
  CHECK(f["p99_final_ms"] == Approx(800.0));
  CHECK(f["p99_per_s_ms"].size() == 8);
  CHECK(f["connection_errors"] == 0);
  // flat: no slope; and a request never answered is an error
  for (auto& l : r.latency_samples_ms) l = 50;
  r.outstanding = 2;
  auto flat = dataload_figures(r, 8);
  CHECK(flat["p99_slope_ms_per_s"] == Approx(0.0).margin(1e-9));
  CHECK(flat["connection_errors"] == 1);
}

TEST_CASE("dataload figures: one second's stall moves the final p99, not a typical second's", "[unit]") {
  // 100 requests a second for 8 s at 2 ms; in second 7 they take 40 ms
  traffic::FetchResult r;
  r.connections = 1;
  r.completed = 1;
  r.all_verified = true;
  for (int s = 0; s < 8; ++s)
    for (int i = 0; i < 100; ++i) {
      r.issue_s.push_back(s + i / 100.0);
      r.latency_samples_ms.push_back(s == 7 ? 40.0 : 2.0);
    }
  r.requests = r.issued = r.issue_s.size();
  auto f = dataload_figures(r, 8);
  CHECK(f["p99_final_ms"] == Approx(40.0));
  CHECK(f["p99_typical_ms"] == Approx(2.0));
  // an even count of seconds: the middle two's mean
  r.latency_samples_ms.assign(r.issue_s.size(), 2.0);
  for (size_t i = 400; i < 800; ++i) r.latency_samples_ms[i] = 4.0;
  CHECK(dataload_figures(r, 8)["p99_typical_ms"] == Approx(3.0));
}

TEST_CASE("a workload's NIC figures come from its hosts' series, by host, NIC and direction", "[unit]") {
  auto topo = lanes::testbed::load_topology(lanes::test::topology("laptop.xml"));  // h1, h2: 4 NICs of 500 Mbit/s
  const auto* restore = lanes::scenarios::find_workload("checkpoint-restore");  // rx, judged by its wire rate
  REQUIRE(restore);
  // 0.1 s samples over 4 s: h1's NIC k receives (k + 1) * 0.1 Gbit/s; its
  // tx and h2's rx are busy too, and must not count
  std::vector<lanes::reports::Series> series;
  for (const char* host : {"h1", "h2"})
    for (int k = 0; k < 4; ++k)
      for (const char* dir : {"rx", "tx"}) {
        lanes::reports::Series s;
        s.host = host, s.nic = k, s.direction = dir;
        s.name = fmt::format("{} nic{} {}", host, k, dir);
        bool mine = std::string(host) == "h1" && std::string(dir) == "rx";
        s.values.assign(40, mine ? 0.1 * (k + 1) : 5.0);
        series.push_back(s);
      }
  lanes::reports::WorkloadResult w;
  w.type = "checkpoint-restore";
  w.host = "h1";
  w.start_s = 0.5;
  w.end_s = 3.5;
  lanes::scenarios::add_nic_figures(w, *restore, series, topo);
  REQUIRE(w.nic_share.size() == 4);
  CHECK(w.nic_share[0] == Approx(10.0));
  CHECK(w.nic_share[3] == Approx(40.0));
  CHECK(w.figures.value("wire_gbps", 0.0) == Approx(1.0));
  CHECK(w.figures.value("line_gbps", 0.0) == Approx(2.0));  // 4 x 500 Mbit/s
  // a host that is no job host, or a type with no NIC direction: nothing
  lanes::reports::WorkloadResult none = w;
  none.nic_share.clear();
  none.figures = nlohmann::json::object();
  none.host = "nosuch";
  lanes::scenarios::add_nic_figures(none, *restore, series, topo);
  CHECK(none.nic_share.empty());
  CHECK_FALSE(none.figures.contains("wire_gbps"));
}

TEST_CASE("exec: ${addr:NODE} becomes the node's address, anything else is the shell's", "[unit]") {
  FakePhase ph("laptop.xml");
  const auto& h1 = ph.topology.nodes.at(static_cast<size_t>(ph.topology.find_node("h1")));
  const auto& h2 = ph.topology.nodes.at(static_cast<size_t>(ph.topology.find_node("h2")));
  using lanes::scenarios::expand_addresses;
  CHECK(expand_addresses("ping -c1 ${addr:h1}", ph) == "ping -c1 " + h1.job->task_ip4.to_string());
  CHECK(expand_addresses("echo ${HOME} ${addr6:h2}.", ph) == "echo ${HOME} " + h2.job->task_ip6.to_string() + ".");
  CHECK(expand_addresses("no placeholders", ph) == "no placeholders");
  CHECK(expand_addresses("${addr:h1", ph) == "${addr:h1");  // unclosed: left as it is
  CHECK_THROWS_WITH(expand_addresses("x ${addr:nosuch} y", ph), Catch::Contains("no node named 'nosuch'"));
}

TEST_CASE("exec: ${addr:...} names a job host or a server, the shell's own ${addr:-x} is left alone", "[unit]") {
  FakePhase ph("laptop.xml");
  using lanes::scenarios::expand_addresses;
  CHECK(expand_addresses("echo ${addr:-none}", ph) == "echo ${addr:-none}");
  CHECK_THROWS_WITH(expand_addresses("ping ${addr:r1-tor}", ph), Catch::Contains("neither a job host nor a server"));
}

TEST_CASE("a workload's CPU figures: the machine's busy seconds while it ran, and per Gbit it verified", "[unit]") {
  double hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
  lanes::testbed::CpuTimes a{1000, 5000}, b{1000 + static_cast<uint64_t>(hz), 5000 + 2 * static_cast<uint64_t>(hz)};
  nlohmann::json f = {{"verified_bytes", 500'000'000}};  // 4 Gbit
  add_cpu_figures(f, a, b);
  CHECK(f["machine_cpu_s"].get<double>() == Approx(1.0));
  CHECK(f["machine_cpu_s_per_gbit"].get<double>() == Approx(0.25));
  nlohmann::json none;  // no bytes: no rate; no reading: nothing
  add_cpu_figures(none, a, b);
  CHECK(none.contains("machine_cpu_s"));
  CHECK_FALSE(none.contains("machine_cpu_s_per_gbit"));
  nlohmann::json unread;
  add_cpu_figures(unread, std::nullopt, b);
  CHECK(unread.empty());
}

TEST_CASE("the line a job can use: every NIC's, or NIC 0's where its egress mode goes through one", "[unit]") {
  using lanes::testbed::EgressMode;
  auto t = lanes::testbed::load_topology(lanes::test::topology("laptop.xml"));  // 4 x 500 Mbit/s
  auto h = t.nodes.at(static_cast<size_t>(t.find_node("h1")));
  auto line = [&](EgressMode m, const char* dir) {
    h.job->egress = m;
    return host_line_bps(h, dir);
  };
  CHECK(line(EgressMode::ecmp, "tx") == Approx(2e9));
  CHECK(line(EgressMode::bind, "rx") == Approx(2e9));
  CHECK(line(EgressMode::single, "tx") == Approx(5e8));
  CHECK(line(EgressMode::single, "rx") == Approx(2e9));  // its ingress still arrives on every NIC
  CHECK(line(EgressMode::active_backup, "tx") == Approx(5e8));
  CHECK(line(EgressMode::active_backup, "rx") == Approx(5e8));
}

TEST_CASE("egress bind: the job's NIC addresses of a family in NIC order, for the flows and connections it binds",
          "[unit]") {
  auto t = tb::load_topology(lanes::test::topology("laptop.xml"));
  auto& h = t.nodes.at(static_cast<size_t>(t.find_node("h1")));
  CHECK(lanes::scenarios::bound_nic_addresses(h, false).empty());  // laptop's job is on ecmp
  h.job->egress = tb::EgressMode::bind;
  std::string want4, want6;
  for (const auto& nic : h.nics) {
    want4 += (want4.empty() ? "" : ",") + nic.job_addr4.addr.to_string();
    want6 += (want6.empty() ? "" : ",") + nic.job_addr6.addr.to_string();
  }
  CHECK(lanes::scenarios::bound_nic_addresses(h, false) == want4);
  CHECK(lanes::scenarios::bound_nic_addresses(h, true) == want6);
  CHECK(std::count(want4.begin(), want4.end(), ',') == 3);
}

TEST_CASE("egress mptcp: a flow's subflows by the job's address, the task IP's pinned to no NIC", "[unit]") {
  auto t = tb::load_topology(lanes::test::topology("laptop.xml"));
  auto& h = t.nodes.at(static_cast<size_t>(t.find_node("h1")));
  h.job->egress = tb::EgressMode::mptcp;
  auto flow = [&](std::vector<int> nics, bool task, uint64_t each) {
    traffic::SendFlow f;
    int port = 40000;
    if (task) f.subflows.push_back({h.job->task_ip4.to_string(), "198.18.128.17", port++, 5301, each, 0});
    for (int k : nics)
      f.subflows.push_back({h.nics.at(static_cast<size_t>(k)).job_addr4.addr.to_string(), "198.18.128.17", port++, 5301,
                            each, 0});
    return f;
  };
  traffic::SendResult s;
  s.flows = {flow({1, 2, 3}, true, 100), flow({1, 2, 3}, true, 100)};
  auto f = lanes::scenarios::mptcp_figures(s, h, true);
  CHECK(f["mptcp_subflows_per_nic"] == json::array({0, 2, 2, 2}));
  CHECK(f["mptcp_task_ip_subflows"] == 2);
  CHECK(f["mptcp_flows_with_all_subflows"] == 2);
  CHECK(f["mptcp_min_pinned_nics_per_flow"] == 3);
  CHECK(f["mptcp_bytes_share_task_ip"].get<double>() == Approx(25.0));
  CHECK(f["mptcp_bytes_share_per_nic"] == json::array({0.0, 25.0, 25.0, 25.0}));
  CHECK_FALSE(f.contains("mptcp_subflows_elsewhere"));
  // a flow that lost a NIC's subflow, one without the task IP's: neither had all
  s.flows = {flow({1, 3}, true, 100), flow({1, 2, 3}, false, 100), flow({1, 2, 3}, true, 100)};
  f = lanes::scenarios::mptcp_figures(s, h, true);
  CHECK(f["mptcp_flows_with_all_subflows"] == 1);
  CHECK(f["mptcp_min_pinned_nics_per_flow"] == 2);
  // the receiver's side of a restore: the job's addresses are the remote ones
  traffic::SendResult r;
  r.flows = {flow({1, 2, 3}, true, 10)};
  for (auto& sf : r.flows[0].subflows) std::swap(sf.local, sf.remote);
  CHECK(lanes::scenarios::mptcp_figures(r, h, false)["mptcp_flows_with_all_subflows"] == 1);
  CHECK(lanes::scenarios::mptcp_figures(r, h, true)["mptcp_subflows_elsewhere"] == 4);  // read from the wrong side
}
