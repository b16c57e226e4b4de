// root tier, alone on the machine: SIGKILL of `lanes up`, `lanes run` and
// `lanes down` at random moments (bring-up, daemons starting, mid-workload,
// teardown), each followed by `lanes clean`. Afterwards nothing of those
// runs may be left: no namespace, no process, no run directory, no owner
// record, no BPF program, and the root namespace is as it was.
//
// The kill moments are random on purpose (the seed is printed, and
// LANES_CHAOS_SEED replays a run); what is checked holds for every moment.

#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "lanes/testbed/netns.hpp"
#include "lanes/testbed/process.hpp"
#include "lanes/testbed/run_registry.hpp"
#include "root_snapshot.hpp"
#include "support.hpp"

namespace tb = lanes::testbed;
using lanes::test::lanes_bin;
using lanes::test::run_command;

namespace {

// The kernel's BPF programs, by id. A bpftool that cannot run or answers
// what is not its list fails the test: an empty set on both sides would
// pass "no program outlives its run" without looking.
std::set<int> bpf_prog_ids() {
  std::set<int> ids;
  auto r = run_command("bpftool prog show --json");
  INFO("bpftool prog show --json: exit " << r.status << ": " << r.out.substr(0, 400));
  REQUIRE(r.status == 0);
  nlohmann::json list;
  REQUIRE_NOTHROW(list = nlohmann::json::parse(r.out));
  REQUIRE(list.is_array());
  for (const auto& p : list) {
    REQUIRE(p.contains("id"));
    ids.insert(p.at("id").get<int>());
  }
  return ids;
}

// Processes whose command line mentions ROOT (the state dir and the results
// dir of this test live under it: every daemon and traffic endpoint of its
// runs names a file there).
std::vector<std::string> processes_mentioning(const std::string& root) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::string n = e.path().filename().string();
    if (n.find_first_not_of("0123456789") != std::string::npos) continue;
    pid_t pid = std::stoi(n);
    if (pid == ::getpid()) continue;
    std::string cmd;
    for (const auto& a : tb::process_cmdline(pid)) cmd += a + " ";
    if (cmd.find(root) != std::string::npos) out.push_back(n + ": " + cmd);
  }
  return out;
}

struct Outcome {
  int cleans_failed = 0;
  std::vector<std::string> left;  // what one kill left after its clean
};

}  // namespace

TEST_CASE("SIGKILL of lanes up, run and down at random moments, then lanes clean, leaves nothing", "[root]") {
  lanes::test::require_root();
  uint64_t seed = std::random_device{}();
  if (const char* s = std::getenv("LANES_CHAOS_SEED")) seed = std::stoull(s);
  std::printf("chaos seed %llu (LANES_CHAOS_SEED=%llu replays it)\n", static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  auto root = std::filesystem::temp_directory_path() / ("lanes-chaos-" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root / "state");
  std::string state = (root / "state").string();
  std::string env = "LANES_STATE_DIR=" + state + " ";
  // a short scenario: bring-up, convergence, a restore through the BPF
  // datapath, a NIC failure, teardown
  std::string scenario = (root / "chaos.xml").string();
  std::ofstream(scenario) << "<scenario name=\"chaos\" description=\"killed at a random moment\">\n"
                          << "  <topology file=\"" << lanes::test::topology("laptop.xml") << "\" egress=\"bpf\"/>\n"
                          << "  <phase name=\"p\">\n"
                          << "    <converge/>\n"
                          << "    <workload name=\"restore\" type=\"checkpoint-restore\" host=\"h1\" server=\"storage\""
                          << " bytes=\"400M\" flows=\"8\" wait=\"false\"/>\n"
                          << "    <sleep duration=\"0.6s\"/>\n"
                          << "    <fault type=\"nic-down\" host=\"h1\" nic=\"1\"/>\n"
                          << "    <wait workload=\"restore\"/>\n"
                          << "  </phase>\n"
                          << "</scenario>\n";
  auto root_before = lanes::test::snapshot_root_ns();
  auto progs_before = bpf_prog_ids();

  Outcome out;
  int kills = 0, finished_first = 0;
  // ALL: clean with --all (a killed lanes up may have finished building,
  // a killed lanes down may not have begun: those runs are up). MAX_S is
  // the window of kill moments; a command that finishes inside it narrows
  // it to how long the command took, so on any machine the kills land
  // while the command still runs.
  auto one = [&](const std::string& id, const std::vector<std::string>& argv, double& max_s, bool all) {
    std::uniform_real_distribution<double> at(0.0, max_s);
    double t = at(rng);
    auto started = std::chrono::steady_clock::now();
    tb::ProcessSpec spec{argv[1], argv};
    spec.env = {{"LANES_STATE_DIR", state}};
    spec.log_path = (root / (id + ".log")).string();
    auto d = tb::Daemon::start(spec);
    REQUIRE(d.ok());
    std::this_thread::sleep_for(std::chrono::duration<double>(t));
    if (d.value().running()) {
      ::kill(d.value().pid(), SIGKILL);
      ++kills;
    } else {
      ++finished_first;
      max_s = std::min(max_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    }
    d.value().wait();
    // a lanes up that finished left a run up on purpose: take it down as a user would
    auto clean = run_command(env + lanes_bin() + " clean" + (all ? " --all" : ""));
    if (clean.status != 0) {
      ++out.cleans_failed;
      UNSCOPED_INFO(id << " killed at " << t << " s: lanes clean exited " << clean.status << ":\n" << clean.out);
    }
    std::vector<std::string> left;
    for (const auto& ns : tb::list_netns(tb::RunRegistry::netns_prefix(id))) left.push_back("namespace " + ns);
    for (const auto& p : processes_mentioning(root.string())) left.push_back("process " + p);
    if (std::filesystem::exists(root / "state" / id)) left.push_back("run directory " + id);
    if (std::filesystem::exists(tb::RunRegistry::default_owners() + "/" + id + ".json"))
      left.push_back("owner record " + id);
    for (const auto& l : left) out.left.push_back(id + " (killed at " + std::to_string(t) + " s): " + l);
  };

  std::string lanes = lanes_bin();
  std::string laptop = lanes::test::topology("laptop.xml");
  int commands = 0;
  // each kind until it was killed QUOTA times (a command that finishes
  // before its moment is not a kill), at most 3 x QUOTA attempts
  auto until_killed = [&](int quota, const std::function<void(int)>& attempt) {
    int start = kills;
    for (int i = 0; i < 3 * quota && kills - start < quota; ++i, ++commands) attempt(i);
  };
  double up_window = 1.5, run_window = 8.0, down_window = 0.2;
  until_killed(10, [&](int i) {  // bring-up: namespaces, links, daemons starting
    std::string id = "cu" + std::to_string(i);
    one(id, {lanes, "up", laptop, "--run-id", id}, up_window, true);
  });
  until_killed(10, [&](int i) {  // bring-up, convergence, the workload, the fault, teardown
    std::string id = "cr" + std::to_string(i);
    one(id + "1", {lanes, "run", scenario, "--run-id", id, "-q", "--out", (root / ("out-" + id)).string()},
        run_window, false);
  });
  until_killed(4, [&](int i) {  // teardown by lanes down
    std::string id = "cd" + std::to_string(i);
    auto up = run_command(env + lanes + " up " + laptop + " --run-id " + id);
    REQUIRE(up.status == 0);
    one(id, {lanes, "down", id}, down_window, true);
  });
  std::printf("chaos: %d of %d commands killed (%d finished first); cleans failed: %d; objects left: %zu\n", kills,
              commands, finished_first, out.cleans_failed, out.left.size());
  for (const auto& l : out.left) UNSCOPED_INFO(l);
  CHECK(out.cleans_failed == 0);
  CHECK(out.left.empty());
  CHECK(kills >= 20);
  // no BPF program outlives its run (bpffs is not mounted here: ask the
  // kernel). A socket's filter (lanes-bfdd's) goes with the socket, which a
  // killed process's exit frees only after an RCU grace period and the
  // kernel's deferred put: the programs are given until they are gone, a
  // bound for a loaded machine, not a pace
  std::vector<int> new_progs;
  auto none_new = [&] {
    new_progs.clear();
    for (int id : bpf_prog_ids())
      if (!progs_before.count(id)) new_progs.push_back(id);
    return new_progs.empty();
  };
  lanes::test::eventually(none_new, std::chrono::seconds(30), std::chrono::milliseconds(100));
  INFO("BPF programs loaded since the test began: " << new_progs.size());
  CHECK(new_progs.empty());
  auto root_after = lanes::test::snapshot_root_ns();
  for (const auto& [k, v] : root_before) {
    INFO(k);
    CHECK(root_after[k] == v);
  }
  CHECK(root_after.size() == root_before.size());
  std::filesystem::remove_all(root);
}
