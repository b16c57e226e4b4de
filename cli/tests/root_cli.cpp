// The lanes command end to end: isolation of the root namespace, up/down
// leaving nothing behind, and clean after a kill -9 mid-way.

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>
#include <atomic>

#include "lanes/testbed/netns.hpp"
#include "lanes/testbed/process.hpp"
#include "lanes/testbed/run_registry.hpp"
#include "lanes/testbed/fabric.hpp"
#include "root_snapshot.hpp"
#include "support.hpp"

using namespace lanes::testbed;
using lanes::test::eventually;
using lanes::test::lanes_bin;
using lanes::test::OwnStateDir;
using lanes::test::require_root;
using lanes::test::run_command;
using lanes::test::topology;
using lanes::test::source_dir;
using lanes::test::snapshot_root_ns;

namespace {

std::string run_id_of(const std::string& json_out) {
  auto j = nlohmann::json::parse(json_out.substr(json_out.find('{')));
  return j.at("run_id").get<std::string>();
}

}  // namespace

// The fleet tests (root_fleet.cpp) check the same of fabric-256 and of a
// 576-host fabric; fabric-1k, a minute on two cores, is left to the fleet
// scenarios.
TEST_CASE("up and down of the laptop, rack and two-rack topologies leave the root namespace unchanged",
          "[root][serial]") {
  require_root();
  OwnStateDir state("root-unchanged");  // a failure below still takes its runs down
  auto before = snapshot_root_ns();
  REQUIRE(before.size() > 100);  // the sysctls were read
  for (const char* f : {"laptop.xml", "two-racks.xml", "two-racks-8.xml", "rack-64.xml"}) {
    INFO(f);
    auto up = run_command(state.env() + lanes_bin() + " up " + topology(f) + " --json");
    REQUIRE(up.status == 0);
    std::string id = run_id_of(up.out);
    auto st = run_command(state.env() + lanes_bin() + " status " + id + " --json");
    CHECK(st.status == 0);
    auto j = nlohmann::json::parse(st.out);
    CHECK(j["phase"] == "up");
    for (const auto& n : j["nodes"]) CHECK(n["present"] == true);
    auto down = run_command(state.env() + lanes_bin() + " down " + id);
    CHECK(down.status == 0);
    // nothing of the run remains
    CHECK(list_netns(RunRegistry::netns_prefix(id)).empty());
    CHECK_FALSE(RunRegistry(state.path).exists(id));
  }
  auto after = snapshot_root_ns();
  for (const auto& [k, v] : before) {
    INFO(k);
    CHECK(after[k] == v);
  }
  CHECK(after.size() == before.size());
}

TEST_CASE("lanes clean removes every object of a lanes up killed mid-way", "[root]") {
  require_root();
  OwnStateDir state("killed-midway");
  RunRegistry reg(state.path);
  std::string id = reg.new_id();
  std::string prefix = RunRegistry::netns_prefix(id);
  std::string root_links = run_command("ip -o link show").out;
  ProcessSpec spec{"lanes up", {lanes_bin(), "up", topology("rack-64.xml"), "--run-id", id}};
  spec.env = {{"LANES_STATE_DIR", state.path}};
  spec.log_path = "/dev/null";
  auto up = Daemon::start(spec);
  REQUIRE(up.ok());
  // kill it while it is building: some namespaces exist, not all
  REQUIRE(eventually([&] { return list_netns(prefix).size() >= 8; }, std::chrono::seconds(20),
                     std::chrono::milliseconds(1)));
  ::kill(up.value().pid(), SIGKILL);
  CHECK(up.value().wait() == 128 + SIGKILL);
  size_t left_by_kill = list_netns(prefix).size();
  CHECK(left_by_kill >= 8);
  CHECK(left_by_kill < 67);  // it really was mid-way
  // the run is dead: its directory says "creating" and nobody holds its lock
  REQUIRE(reg.exists(id));
  CHECK_FALSE(reg.in_use(id));
  auto st = run_command(state.env() + lanes_bin() + " status --json");
  CHECK(st.out.find("\"dead\"") != std::string::npos);

  auto clean = run_command(state.env() + lanes_bin() + " clean");
  INFO(clean.out);
  CHECK(clean.status == 0);
  size_t objects_left = list_netns(prefix).size() + (reg.exists(id) ? 1 : 0);
  std::printf("kill -9 mid-way: %zu namespaces existed; objects left after lanes clean: %zu\n",
              left_by_kill, objects_left);
  CHECK(objects_left == 0);
  CHECK(run_command("ip -o link show").out == root_links);
}

TEST_CASE("lanes up exec status and down work together and a run id is never reused", "[root]") {
  require_root();
  OwnStateDir state("up-exec-down");
  RunRegistry reg(state.path);
  std::string id = reg.new_id();
  const std::string lanes = state.env() + lanes_bin();
  auto up = run_command(lanes + " up " + topology("laptop.xml") + " --run-id " + id);
  REQUIRE(up.status == 0);
  CHECK(up.out.find("run " + id + " is up: 6 namespaces, 9 links") != std::string::npos);
  auto again = run_command(lanes + " up " + topology("laptop.xml") + " --run-id " + id);
  CHECK(again.status == 2);
  CHECK(again.out.find("already in use") != std::string::npos);
  auto ex = run_command(lanes + " exec " + id + " h2 -- sh -c 'echo $LANES_NODE; exit 7'");
  CHECK(ex.status == 7);
  CHECK(ex.out.find("h2") != std::string::npos);
  auto st = run_command(lanes + " status " + id);
  CHECK(st.status == 0);
  CHECK(st.out.find("r1-tor:swp1") != std::string::npos);
  CHECK(st.out.find("500mbit") != std::string::npos);
  // a run that is up survives a plain clean (4 nodes and 2 job containers)
  size_t before_clean = list_netns(RunRegistry::netns_prefix(id)).size();
  CHECK(before_clean == 6);
  auto clean = run_command(lanes + " clean");
  CHECK(clean.status == 0);
  CHECK(list_netns(RunRegistry::netns_prefix(id)).size() == before_clean);
  auto down = run_command(lanes + " down " + id);
  CHECK(down.status == 0);
  CHECK(list_netns(RunRegistry::netns_prefix(id)).empty());
  CHECK(run_command(lanes + " down " + id).status == 2);
}

TEST_CASE("lanes up --wait bounds the daemons' start too: it gives up saying how far they got, and leaves nothing",
          "[root]") {
  require_root();
  OwnStateDir state("up-wait");
  RunRegistry reg(state.path);
  std::string id = reg.new_id();
  // no run's daemons are ready within a millisecond of the start (a gobgpd
  // alone takes longer to answer); before, --wait began counting only once
  // every daemon was up, however long that took
  auto up = run_command(state.env() + lanes_bin() + " up " + topology("laptop.xml") + " --run-id " + id + " --wait 1ms");
  CHECK(up.status == 1);
  CHECK(up.out.find("lanes up: gave up after --wait 1ms while starting the daemons: the wait ran out while the "
                    "daemons were starting (") != std::string::npos);
  INFO(up.out);
  CHECK((up.out.find("daemons ready") != std::string::npos || up.out.find("none started yet") != std::string::npos));
  // the words of an errno are not the reason given
  CHECK(up.out.find("Connection timed out") == std::string::npos);
  CHECK(up.out.find("Input/output error") == std::string::npos);
  CHECK(list_netns(RunRegistry::netns_prefix(id)).empty());
  CHECK_FALSE(reg.exists(id));
  std::error_code ec;
  std::filesystem::remove_all("/tmp/lanes-failed-" + id, ec);
}

TEST_CASE("lanes run --deadline stops a scenario as Ctrl-C does: failed by name, results written, nothing left",
          "[root][serial]") {
  require_root();
  OwnStateDir state("deadline");
  std::string out = state.path + "/out";
  auto r = run_command(state.env() + lanes_bin() + " run " + source_dir() + "/scenarios/lossy-nic.xml --out " + out +
                       " --deadline 6s --run-id dl");
  INFO(r.out);
  CHECK(r.status == 1);
  CHECK(r.out.find("the deadline (6s) passed; everything it built is torn down") != std::string::npos);
  CHECK(r.out.find("stopped at lanes run --deadline 6s") != std::string::npos);
  auto results = nlohmann::json::parse(std::ifstream(out + "/results.json"));
  CHECK(results["scenarios"][0]["passed"] == false);
  CHECK(results["scenarios"][0]["error"].get<std::string>().find("--deadline 6s") != std::string::npos);
  CHECK(list_netns(RunRegistry::netns_prefix("dl1")).empty());
  CHECK_FALSE(RunRegistry(state.path).exists("dl1"));
}

TEST_CASE("lanes features agrees with what iproute2 can create in a scratch namespace", "[root]") {
  require_root();
  auto r = run_command(lanes_bin() + " features --json");
  REQUIRE(r.status == 0);
  auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  auto can = [](const std::string& cmds) { return run_command("unshare -n sh -c '" + cmds + "'").status == 0; };
  // an iproute2 older than 6.7 does not know netkit, and its failure says
  // nothing of the kernel: then netkit is not compared, and the log says so
  bool ip_knows_netkit = run_command("ip link help netkit").out.find("netkit") != std::string::npos;
  bool ip_made_netkit = can("ip link add nk0 type netkit");
  if (ip_knows_netkit || ip_made_netkit)
    CHECK(j["netkit"].get<bool>() == ip_made_netkit);
  else
    WARN("not compared: this iproute2 does not know netkit (lanes says netkit=" << j["netkit"].get<bool>() << ")");
  CHECK(j["dummy"].get<bool>() == can("ip link add d0 type dummy"));
  CHECK(j["netem"].get<bool>() ==
        can("ip link add v0 type veth peer name v1 && tc qdisc add dev v0 root netem delay 1ms"));
  CHECK(j["resilient_groups"].get<bool>() ==
        can("ip link add v0 type veth peer name v1 && ip link set v0 up && ip link set v1 up && "
            "ip nexthop add id 1 dev v0 && ip nexthop add id 2 group 1 type resilient buckets 8"));
  // MPTCP: the path manager takes an endpoint only where the kernel has it
  CHECK(j["mptcp"].get<bool>() == can("ip mptcp endpoint add 198.18.0.1 id 1 subflow"));
  CHECK(j["tbf"] == true);
  CHECK(j["bpf"] == true);  // root can load BPF programs
  // the components a user may bring: installed as the shell finds them
  const auto& c = j["components"];
  auto installed = [](const std::string& prog) { return run_command("command -v " + prog).status == 0; };
  CHECK(c["switch_stacks"]["gobgp"]["installed"].get<bool>() == installed("gobgpd"));
  CHECK(c["switch_stacks"]["gobgp"]["lanes_deploys"] == true);
  bool frr = ::access("/usr/lib/frr/bgpd", X_OK) == 0 && ::access("/usr/lib/frr/zebra", X_OK) == 0 &&
             ::access("/usr/lib/frr/staticd", X_OK) == 0;
  CHECK(c["switch_stacks"]["frr"]["installed"].get<bool>() == frr);
  CHECK(c["switch_stacks"]["frr"]["lanes_deploys"] == true);
  CHECK(c["injectors"]["exabgp"]["installed"].get<bool>() == installed("exabgp"));
  CHECK(c["injectors"]["bird"]["installed"].get<bool>() == installed("bird"));
  CHECK(c["injectors"]["exabgp"]["lanes_deploys"] == true);
  CHECK(c["injectors"]["bird"]["lanes_deploys"] == true);
  CHECK(c["egress_programs"]["yours"]["lanes_deploys"] == true);
  CHECK(c["injectors"]["lanes"]["installed"] == true);  // beside lanes
  CHECK(c["workloads_and_faults"]["exec"]["lanes_deploys"] == true);
  CHECK(c["injectors"]["exec"]["lanes_deploys"] == true);
}

TEST_CASE("a clean of another state dir leaves a live run and its supervisor alone", "[root]") {
  require_root();
  auto tmp = std::filesystem::temp_directory_path() / ("lanes-two-dirs-" + std::to_string(::getpid()));
  std::filesystem::remove_all(tmp);
  std::string a = (tmp / "a").string(), b = (tmp / "b").string();
  RunRegistry ra(a);
  std::string id = ra.new_id();
  auto up = run_command("LANES_STATE_DIR=" + a + " " + lanes_bin() + " up " + topology("laptop.xml") + " --run-id " + id);
  lanes::test::DownAtEnd gone("LANES_STATE_DIR=" + a + " ", id);
  REQUIRE(up.status == 0);
  size_t namespaces = list_netns(RunRegistry::netns_prefix(id)).size();
  CHECK(namespaces == 6);
  auto sups = find_supervisors(id, ra.base());
  REQUIRE(sups.size() == 1);
  // another state dir cannot see the run's directory: before, it took the
  // namespaces for orphans; the owner record says whose they are
  for (const char* args : {" clean --dry-run", " clean", " clean --all"}) {
    auto c = run_command("LANES_STATE_DIR=" + b + " " + lanes_bin() + args);
    INFO(args << ": " << c.out);
    CHECK(c.status == 0);
    CHECK(c.out.find("belongs to state dir " + ra.base()) != std::string::npos);
    CHECK(c.out.find("removed run " + id) == std::string::npos);
  }
  auto other_down = run_command("LANES_STATE_DIR=" + b + " " + lanes_bin() + " down " + id);
  CHECK(other_down.status == 2);
  CHECK(list_netns(RunRegistry::netns_prefix(id)).size() == namespaces);
  CHECK(is_supervisor_of(sups[0].first, sups[0].second, id, ra.base()));
  CHECK(ra.assess(id).phase == "up");
  // the same id cannot be taken from the other state dir either
  auto again = run_command("LANES_STATE_DIR=" + b + " " + lanes_bin() + " up " + topology("laptop.xml") + " --run-id " + id);
  CHECK(again.status == 2);
  auto down = run_command("LANES_STATE_DIR=" + a + " " + lanes_bin() + " down " + id);
  CHECK(down.status == 0);
  CHECK(list_netns(RunRegistry::netns_prefix(id)).empty());
  CHECK_FALSE(ra.owner_of(id).has_value());
  std::filesystem::remove_all(tmp);
}

TEST_CASE("lanes clean never signals a process a forged state file names", "[root]") {
  require_root();
  auto tmp = std::filesystem::temp_directory_path() / ("lanes-forged-" + std::to_string(::getpid()));
  std::filesystem::remove_all(tmp);
  RunRegistry reg((tmp / "state").string());
  ProcessSpec spec{"bystander", {"sleep", "60"}};
  auto bystander = Daemon::start(spec);
  REQUIRE(bystander.ok());
  pid_t pid = bystander.value().pid();
  std::string id = reg.new_id();
  {
    auto lock = reg.create(id);
    REQUIRE(lock.ok());
    RunState s;
    s.id = id;
    s.phase = "creating";  // a dead run: clean removes it
    for (const char* name : {"supervisor", "gobgpd", "fib-agent"})
      s.daemons.push_back({name, "r1-tor", pid, process_start_time(pid), ""});
    REQUIRE(reg.save(s).ok());
  }
  auto c = run_command("LANES_STATE_DIR=" + reg.base() + " " + lanes_bin() + " clean");
  INFO(c.out);
  CHECK(c.status == 0);
  CHECK(c.out.find("removed run " + id) != std::string::npos);
  CHECK(bystander.value().running());  // pid and start time matched; what it is did not
  CHECK_FALSE(reg.exists(id));
  CHECK_FALSE(reg.owner_of(id).has_value());
  std::filesystem::remove_all(tmp);
}

TEST_CASE("lanes clean beside ups and downs of the same state dir never fails and never touches them", "[root]") {
  // CI once saw a clean take a run in creation for a dead one and exit 1
  // when it could not lock it
  require_root();
  // half the runs in the clean's state dir, half in another: a run of
  // another state dir going down once looked orphaned for a moment
  OwnStateDir state("clean-beside"), other("clean-beside-other");
  const std::string lanes = state.env() + lanes_bin();
  std::atomic<bool> done{false};
  std::atomic<int> cleans{0};
  std::vector<std::string> clean_failures;
  std::thread cleaner([&] {
    while (!done) {
      auto c = run_command(lanes + " clean");
      ++cleans;
      if (c.status != 0 || c.out.find("removed run") != std::string::npos) clean_failures.push_back(c.out);
    }
  });
  int up_failures = 0, down_failures = 0;
  for (int i = 0; i < 12; ++i) {
    const std::string cmd = (i % 2 ? other.env() : state.env()) + lanes_bin();
    auto up = run_command(cmd + " up " + topology("laptop.xml") + " --json");
    if (up.status != 0) {
      ++up_failures;
      UNSCOPED_INFO("up: " << up.out);
      continue;
    }
    std::string id = run_id_of(up.out);
    if (run_command(cmd + " down " + id).status != 0) ++down_failures;
  }
  done = true;
  cleaner.join();
  std::printf("clean beside 12 up/down cycles: %d cleans, %zu failed or removed a run\n", cleans.load(),
              clean_failures.size());
  for (const auto& f : clean_failures) std::fprintf(stderr, "clean:\n%s\n", f.c_str());
  CHECK(cleans > 0);
  CHECK(up_failures == 0);
  CHECK(down_failures == 0);
  CHECK(clean_failures.empty());
  CHECK(run_command(lanes + " status --json").out.find("\"id\"") == std::string::npos);
}

TEST_CASE("lanes down stops a run whose lanes binary was replaced while it was up", "[root]") {
  // /proc/<pid>/exe of the supervisor then reads "lanes (deleted)": it was
  // not recognised, so down left it running, restarting every daemon
  require_root();
  OwnStateDir state("replaced-binary");
  auto bin = std::filesystem::path(state.path) / "bin";
  std::filesystem::create_directories(bin);
  auto built = std::filesystem::path(lanes_bin()).parent_path();
  for (const char* b : {"lanes", "lanes-fib-agent", "lanes-host-agent", "lanes-vip-injector", "lanes-traffic", "lanes-bfdd"})
    std::filesystem::copy_file(built / b, bin / b);
  RunRegistry reg(state.path);
  std::string id = reg.new_id();
  auto up = run_command(state.env() + (bin / "lanes").string() + " up " + topology("laptop.xml") + " --run-id " + id);
  REQUIRE(up.status == 0);
  auto sups = find_supervisors(id, reg.base());
  REQUIRE(sups.size() == 1);
  // the upgrade: a new file where the old one was
  std::filesystem::remove(bin / "lanes");
  std::filesystem::copy_file(built / "lanes", bin / "lanes");
  CHECK(find_supervisors(id, reg.base()).size() == 1);  // still known for what it is
  auto down = run_command(state.env() + lanes_bin() + " down " + id);
  INFO(down.out);
  CHECK(down.status == 0);
  CHECK(process_start_time(sups[0].first) != sups[0].second);  // gone
  CHECK(find_supervisors(reg.base()).empty());
  CHECK(list_netns(RunRegistry::netns_prefix(id)).empty());
}
