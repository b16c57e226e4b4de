// root tier: the user's own commands in lanes' world. An exec workload runs
// iperf3 through the stack (server on storage, client in h1's job) and gets
// its exit judged and h1's four NIC shares reported; an exec fault runs on
// the timeline; a command that does not exist fails its verdict with exit
// 127, and a fault that exits otherwise fails the phase with its output.

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lanes/testbed/netns.hpp"
#include "lanes/testbed/process.hpp"
#include "lanes/testbed/run_registry.hpp"
#include "root_support.hpp"

using namespace lanes::testbed;

namespace {

// lanes run SCENARIO_TEXT (its topology: laptop.xml); its results
lanes::test::ScenarioRun run_text(const std::filesystem::path& dir, const std::string& name, const std::string& body) {
  std::ofstream(dir / (name + ".xml")) << "<scenario name=\"" << name << "\" description=\"the user's own commands\">\n"
                                       << "<topology file=\"" << LANES_SOURCE_DIR << "/topologies/laptop.xml\" egress=\"bpf\"/>\n"
                                       << body << "</scenario>\n";
  return lanes::test::lanes_run(dir, name + ".xml");
}

const nlohmann::json* assertion(const nlohmann::json& sc, const std::string& name) {
  for (const auto& a : sc["assertions"])
    if (a.value("name", "") == name) return &a;
  return nullptr;
}

}  // namespace

TEST_CASE("exec: iperf3 through the stack as a workload, with its exit judged and four NIC shares", "[root]") {
  lanes::test::require_root();
  if (::access("/usr/bin/iperf3", X_OK) != 0) lanes::test::not_run("iperf3 is not installed (scripts/setup installs it)");
  auto dir = std::filesystem::temp_directory_path() / ("lanes-exec-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  // the client retries until the server listens: no sleep guesses when
  auto ran = run_text(dir, "own",
                      R"(<phase name="p"><converge/>
  <workload name="srv" type="exec" node="storage" cmd="exec iperf3 -s -1 -p 5999" wait="false"/>
  <workload name="ipc" type="exec" node="h1" timeout="60s"
            cmd="until iperf3 -c ${addr:storage} -p 5999 -P 8 -t 3; do sleep 0.2; done"/>
  <wait workload="srv"/>
  <fault type="exec" node="h2" cmd="ip -o link show | grep -c . ; echo on $LANES_NODE" mark="own-fault"/>
</phase>
)");
  CHECK(ran.status == 0);
  CHECK(ran.scenario["passed"] == true);
  const auto* ipc = assertion(ran.scenario, "workload ipc: exit status");
  REQUIRE(ipc);
  CHECK((*ipc)["passed"] == true);
  CHECK(assertion(ran.scenario, "workload srv: exit status"));
  const auto& phase = ran.scenario["phases"].at(0);
  nlohmann::json w;
  for (const auto& x : phase["workloads"])
    if (x["name"] == "ipc") w = x;
  REQUIRE(w.is_object());
  CHECK(w["figures"]["exit_status"] == 0);
  REQUIRE(w["nic_share"].size() == 4);  // h1's four NICs, from its counters like any workload's
  for (const auto& share : w["nic_share"]) CHECK(share.get<double>() > 5.0);
  std::ifstream out(w["figures"]["output"].get<std::string>());
  std::string said((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
  CHECK(said.find("receiver") != std::string::npos);  // iperf3's own summary
  CHECK(phase["config"]["fault_own-fault"]["exit_status"] == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("exec: a missing command fails its verdict, a fault that exits otherwise fails the phase", "[root]") {
  lanes::test::require_root();
  auto dir = std::filesystem::temp_directory_path() / ("lanes-exec-bad-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  // beside it: a command that leaves a child in the background does not
  // hold its fault up (timeout 5 s, the child sleeps 60), and one that
  // lanes stops is not a failure
  auto missing = run_text(dir, "missing", R"(<phase name="p">
  <workload name="nope" type="exec" node="h1" cmd="no-such-command-of-lanes --x"/>
  <fault type="exec" node="h2" cmd="sleep 60 &amp; echo left in the background" timeout="5s" mark="bg"/>
  <workload name="long" type="exec" node="h2" cmd="sleep 60" wait="false"/>
  <stop workload="long"/>
</phase>
)");
  CHECK(missing.status == 1);
  const auto* a = assertion(missing.scenario, "workload nope: exit status");
  REQUIRE(a);
  CHECK((*a)["passed"] == false);
  CHECK((*a)["measured"] == "exit 127");
  CHECK((*a)["message"].get<std::string>().find("no-such-command-of-lanes") != std::string::npos);
  CHECK(missing.scenario["phases"].at(0)["config"]["fault_bg"]["exit_status"] == 0);
  const auto* stopped = assertion(missing.scenario, "workload long: exit status");
  REQUIRE(stopped);
  CHECK((*stopped)["passed"] == true);
  CHECK((*stopped)["measured"] == "ended by lanes (signal 15)");
  auto fault = run_text(dir, "fault", R"(<phase name="p">
  <fault type="exec" node="storage" cmd="echo broken >&2; exit 3"/>
</phase>
)");
  CHECK(fault.status == 1);
  std::string error = fault.scenario.value("error", "");
  CHECK(error.find("exited 3 (expected exit 0)") != std::string::npos);
  CHECK(error.find("broken") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("exec injector: the user's own program announces the task IPs from the configuration lanes names", "[root]") {
  lanes::test::require_root();
  auto dir = std::filesystem::temp_directory_path() / ("lanes-exec-inj-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  // "your own injector": a program of the user's that reads
  // $LANES_INJECTOR_CONFIG and speaks BGP; here lanes' own speaker, started
  // the way a user's would be (a state file of its own choosing)
  std::string bin = std::filesystem::path(lanes::test::lanes_bin()).parent_path().string();
  std::string topo = (dir / "own-injector.xml").string();
  std::ofstream(topo) << "<topology name=\"own-injector\"><rack name=\"r1\">\n"
                      << "<host name=\"h\" count=\"2\" nics=\"4\" rate=\"500mbit\">\n"
                      << "<job name=\"train\" egress=\"bpf\" injector=\"exec\" injector-cmd=\"exec " << bin
                      << "/lanes-vip-injector --config $LANES_INJECTOR_CONFIG --state " << dir.string()
                      << "/state-$LANES_NODE.json\"/>\n"
                      << "</host><server name=\"storage\" role=\"storage\"/></rack></topology>\n";
  std::string file = (dir / "ingress.xml").string();
  std::ofstream(file) << "<scenario name=\"ingress\" description=\"ingress through the user's injector\">\n"
                      << "<topology file=\"" << topo << "\"/>\n"
                      << "<phase name=\"p\"><converge timeout=\"60s\"/>\n"
                      << "<workload name=\"restore\" type=\"checkpoint-restore\" host=\"h1\" server=\"storage\" "
                         "bytes=\"100M\" flows=\"8\"/>\n"
                      << "</phase><assert type=\"bytes-verified\"/></scenario>\n";
  auto ran = lanes::test::lanes_run(dir, "ingress.xml");
  CHECK(ran.status == 0);
  CHECK(ran.scenario["passed"] == true);
  // it ran with the configuration lanes wrote: its own state file names the task IP it announced
  std::ifstream st((dir / "state-h1.json").string());
  REQUIRE(st);
  auto state = nlohmann::json::parse(st);
  CHECK(!state.value("task4", "").empty());
  std::filesystem::remove_all(dir);
}
