// multi-machine tier: runs over the machines of a Slurm allocation on the
// lab (scripts/slurm-lab). fabric-256 split over four machines converges,
// read from every machine's switches, no spine holds a per-task route, a
// job reaches a rack on another machine through the tunnels with
// full-size frames, and down leaves nothing on any machine. Then the
// cluster's own faults: the job cancelled under a run, and a machine's
// shard killed (SIGKILL), each leave nothing behind.
//
// Serial: each emulates a cluster of two or four machines carrying
// fabric-256 on this box's cores; beside another such run the CPUs are
// oversubscribed many times over and what a scenario measures (shares,
// timeouts) is the box, not the network (run beside the faults test, a
// four-machine scenario timed out twice in ten runs).

#include <signal.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <map>
#include <regex>
#include <sstream>
#include <thread>
#include <chrono>

#include "lanes/hostnet/hostnet.hpp"
#include "lanes/testbed/partition.hpp"
#include "lanes/testbed/run_registry.hpp"
#include "lanes/testbed/topology_loader.hpp"
#include "slurm_lab.hpp"

using namespace lanes::testbed;
using lanes::test::Lab;

namespace {

// An allocation of the lab's machines that outlives the command making it
// (salloc --no-shell), as an sbatch script's would: the environment lanes
// reads inside one, and the job cancelled at the end.
struct Allocation {
  const Lab& lab;
  std::string job, nodes, env;
  Allocation(const Lab& l, int machines) : lab(l) {
    auto r = lab.on("m1", "salloc --no-shell -N" + std::to_string(machines));
    std::smatch m;
    if (std::regex_search(r.out, m, std::regex("Granted job allocation ([0-9]+)"))) job = m[1];
    // the machines Slurm gave it, as an sbatch script's environment names them
    nodes = lab.on("m1", "squeue -h -j " + job + " -o %N").out;
    while (!nodes.empty() && (nodes.back() == '\n' || nodes.back() == ' ')) nodes.pop_back();
    env = "SLURM_JOB_ID=" + job + " SLURM_JOB_NODELIST=" + nodes + " ";
  }
  ~Allocation() {
    if (!job.empty()) (void)lab.on("m1", "scancel " + job);
  }
  lanes::test::CommandResult lanes(const std::string& args) const {
    return lab.on("m1", env + lanes::test::lanes_bin() + " " + args);
  }
};

// What of run ID is left on machine M: its namespaces and run directory
// (in the machine's own /run) and its processes (anywhere, by the run's
// names in their command lines).
std::string left_of(const Lab& lab, const std::string& m, const std::string& id) {
  std::string left;
  auto ns = lab.on(m, "ip netns list");
  if (ns.out.find(RunRegistry::netns_prefix(id)) != std::string::npos) left += m + " has namespaces: " + ns.out;
  if (lab.on(m, "test -e /run/lanes/" + id).status == 0) left += m + " has /run/lanes/" + id + "\n";
  return left;
}
std::string processes_of(const std::string& id) {
  std::string left;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::string pid = e.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "cmdline", std::ios::binary);
    std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.find("/lanes/" + id + "/") != std::string::npos || cmd.find("--run-id " + id + " ") != std::string::npos ||
        cmd.find("lanes-" + id + "-") != std::string::npos || cmd.find("supervise " + id + " ") != std::string::npos)
      left += pid + ": " + cmd + "\n";
  }
  return left;
}

// per-task (host) routes in `ip route` output: a destination without a prefix length
int host_routes(const std::string& routes) {
  int n = 0;
  std::istringstream in(routes);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == ' ' || line[0] == '\t') continue;  // a multipath route's next hops
    std::string dst = line.substr(0, line.find(' '));
    if (!dst.empty() && dst != "default" && dst.find('/') == std::string::npos) ++n;
  }
  return n;
}

std::string run_tag() { return std::to_string(::getpid() % 100000); }

}  // namespace

TEST_CASE("over slurm: fabric-256 over four machines converges, no spine holds a task IP, jobs reach across "
          "machines, down leaves nothing",
          "[multi-machine][serial]") {
  lanes::test::require_root();
  lanes::test::require_slurm();
  Lab lab("over-slurm");
  auto st = lab.run("start 4");
  INFO(st.out);
  REQUIRE(st.status == 0);
  Allocation alloc(lab, 4);
  REQUIRE(!alloc.job.empty());
  REQUIRE(alloc.nodes == "m[1-4]");  // the placement's machine i is m(i+1)
  const std::string id = "ms" + run_tag();
  struct DownAtEnd {
    const Allocation& a;
    std::string id;
    ~DownAtEnd() { (void)a.lanes("down " + id); }
  } down_at_end{alloc, id};

  const std::string file = lanes::test::topology("fabric-256.xml");
  auto up = alloc.lanes("up " + file + " --over-slurm --run-id " + id + " --wait 600s");
  INFO(up.out);
  REQUIRE(up.status == 0);
  CHECK(up.out.find("BGP converged on every machine's switches") != std::string::npos);

  // each machine's shard says so in its next status line: on a machine
  // busy with other tests that can come a while after up's word (a full
  // run once read one machine still at "progress", 384 task IPs of 512)
  lanes::test::CommandResult status;
  nlohmann::json sj;
  size_t task_ips = 0;
  bool all_converged = false;
  for (int tries = 0; tries < 120 && !(all_converged && task_ips == 512); ++tries) {
    if (tries > 0) std::this_thread::sleep_for(std::chrono::seconds(1));
    status = alloc.lanes("status " + id + " --json");
    if (status.status != 0) continue;
    sj = nlohmann::json::parse(status.out, nullptr, false);
    if (!sj.is_object() || !sj.contains("machines")) continue;
    task_ips = 0;
    all_converged = sj["machines"].size() == 4;
    for (const auto& m : sj["machines"]) {
      all_converged = all_converged && m.value("last", "") == "converged";
      task_ips += m.contains("detail") ? m["detail"].value("task_ips_full", 0) : 0;
    }
  }
  INFO(status.out);
  REQUIRE(status.status == 0);
  CHECK(sj["step_running"] == true);
  REQUIRE(sj["machines"].size() == 4);
  CHECK(all_converged);
  CHECK(task_ips == 512);  // 256 job hosts, IPv4 and IPv6, every one full on its own machine

  Topology t = load_topology(file);
  Placement p = place(t, 4);
  auto machine = [&](int node) { return "m" + std::to_string(p.machine_of.at(static_cast<size_t>(node)) + 1); };
  std::set<std::string> spine_machines;
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    if (t.nodes[i].kind != NodeKind::spine) continue;
    spine_machines.insert(machine(static_cast<int>(i)));
    const std::string in = "nsenter --net=/run/netns/" + RunRegistry::netns_name(id, t.nodes[i].name) + " ";
    auto r4 = lab.on(machine(static_cast<int>(i)), in + "ip -4 route show");
    auto r6 = lab.on(machine(static_cast<int>(i)), in + "ip -6 route show");
    INFO(t.nodes[i].name << " on " << machine(static_cast<int>(i)) << ":\n" << r4.out << r6.out);
    REQUIRE(r4.status == 0);
    CHECK(r4.out.find("nhid") != std::string::npos);  // the racks' blocks, learned over BGP
    CHECK(host_routes(r4.out) == 0);
    CHECK(host_routes(r6.out) == 0);
  }
  CHECK(spine_machines.size() == 4);  // one spine per machine: every machine's tunnels carry BGP

  // a job on one machine reaches a job on another through the tunnels:
  // the first host of the first rack to the first host of a rack elsewhere
  int from = -1, to = -1;
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    if (t.nodes[i].kind != NodeKind::host || !t.nodes[i].job) continue;
    if (from < 0) from = static_cast<int>(i);
    else if (to < 0 && machine(static_cast<int>(i)) != machine(from)) to = static_cast<int>(i);
  }
  REQUIRE(to >= 0);
  const std::string job = "nsenter --net=/run/netns/" + lanes::hostnet::job_netns(id, t.nodes[from].name) + " ";
  for (const std::string& target : {t.nodes[to].job->task_ip4.to_string(), t.nodes[to].job->task_ip6.to_string()}) {
    // full-size frames, never fragmented: the tunnels keep 1500 bytes inside
    std::string size = target.find(':') == std::string::npos ? "1472" : "1452";
    auto ping = lab.on(machine(from), job + "ping -c 3 -i 0.2 -W 2 -M do -s " + size + " " + target);
    INFO(t.nodes[from].name << " on " << machine(from) << " to " << t.nodes[to].name << " on " << machine(to) << ": "
                            << ping.out);
    CHECK(ping.status == 0);
  }

  auto down = alloc.lanes("down " + id);
  INFO(down.out);
  CHECK(down.status == 0);
  CHECK(down.out.find("down over 4 machines") != std::string::npos);
  for (const char* m : {"m1", "m2", "m3", "m4"}) CHECK(left_of(lab, m, id).empty());
  CHECK(processes_of(id).empty());
  CHECK(alloc.lanes("status " + id).status != 0);  // forgotten on the first rank too
}

TEST_CASE("over slurm: a scenario across four machines: save and restore between machines, an all-reduce whose "
          "ring crosses all four, a NIC failing under a restore from another machine, every byte verified",
          "[multi-machine][serial]") {
  lanes::test::require_root();
  lanes::test::require_slurm();
  Lab lab("over-slurm-run");
  auto st = lab.run("start 4");
  INFO(st.out);
  REQUIRE(st.status == 0);
  Allocation alloc(lab, 4);
  REQUIRE(!alloc.job.empty());
  REQUIRE(alloc.nodes == "m[1-4]");
  const std::string out = lab.dir + "/results";
  const std::string id = "mr" + run_tag();
  auto run = alloc.lanes("run cross-machine --over-slurm --quiet --run-id " + id + " --out " + out);
  INFO(run.out);
  CHECK(run.status == 0);
  std::ifstream in(out + "/results.json");
  REQUIRE(in);
  auto j = nlohmann::json::parse(in);
  const auto& sc = j["scenarios"].at(0);
  CHECK(sc["name"] == "cross-machine");
  const auto& ph = sc["phases"].at(0);
  CHECK(ph["config"]["machines"] == nlohmann::json::array({"m1", "m2", "m3", "m4"}));
  std::map<std::string, nlohmann::json> w;
  for (const auto& x : ph["workloads"]) w[x["name"]] = x;
  REQUIRE(w.count("save"));
  REQUIRE(w.count("restore"));
  REQUIRE(w.count("allreduce"));
  REQUIRE(w.count("failover"));
  for (const char* name : {"save", "restore", "allreduce", "failover"}) {
    INFO(name << ": " << w[name].dump());
    CHECK(w[name]["figures"].value("bytes_verified", false) == true);
    CHECK(w[name]["figures"].value("connection_errors", -1) == 0);
  }
  CHECK(w["allreduce"]["figures"].value("busbw_gbps", 0.0) > 0);
  int passed = 0;
  for (const auto& a : sc["assertions"]) passed += a.value("passed", false) ? 1 : 0;
  CHECK(passed == 9);  // the failover's three and the hijack's among them
  // the phase's run is gone from every machine
  for (const char* m : {"m1", "m2", "m3", "m4"}) CHECK(lab.on(m, "ip netns list").out.empty());
  CHECK(processes_of(id + "1").empty());
}

TEST_CASE("over slurm: the job cancelled under a run and under a scenario, a machine's shard killed, and a "
          "machine's slurmd killed, leave nothing on any machine",
          "[multi-machine][serial]") {
  lanes::test::require_root();
  lanes::test::require_slurm();
  Lab lab("over-slurm-faults");
  auto st = lab.run("start 2");
  INFO(st.out);
  REQUIRE(st.status == 0);
  const std::string file = lanes::test::topology("two-racks-8.xml");
  const auto inodes = lab.netns_inodes();

  {  // scancel of the whole job: every shard takes its part down
    Allocation alloc(lab, 2);
    REQUIRE(!alloc.job.empty());
    REQUIRE(alloc.nodes == "m[1-2]");
    const std::string id = "mc" + run_tag();
    auto up = alloc.lanes("up " + file + " --over-slurm --run-id " + id + " --wait 300s");
    INFO(up.out);
    REQUIRE(up.status == 0);
    REQUIRE(lab.on("m1", "scancel " + alloc.job).status == 0);
    CHECK(lanes::test::eventually([&] { return left_of(lab, "m1", id).empty() && left_of(lab, "m2", id).empty(); },
                                  std::chrono::seconds(60), std::chrono::milliseconds(200)));
    CHECK(lanes::test::eventually([&] { return processes_of(id).empty(); }, std::chrono::seconds(30)));
    auto status = alloc.lanes("status " + id);
    INFO(status.out);
    CHECK(status.out.find("step has ended") != std::string::npos);
    CHECK(status.out.find(" down") != std::string::npos);
    auto down = alloc.lanes("down " + id);
    INFO(down.out);
    CHECK(down.status == 0);
  }

  {  // the job cancelled in the middle of a scenario's workload: the run
     // fails saying so, and nothing is left
    Allocation alloc(lab, 2);
    REQUIRE(!alloc.job.empty());
    REQUIRE(alloc.nodes == "m[1-2]");
    const std::string log = lab.dir + "/cancelled-run.log";
    const std::string id = "mw" + run_tag();
    std::string bg = "(" + lab.cmd("exec m1 -- env " + alloc.env + lanes::test::lanes_bin() +
                                   " run cross-machine --over-slurm --run-id " + id + " --out " + lab.dir +
                                   "/cancelled") +
                     "; echo exit=$?) > " + log + " 2>&1 &";
    REQUIRE(lanes::test::run_command(bg).status == 0);
    auto text = [&] {
      std::ifstream in(log);
      return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    };
    REQUIRE(lanes::test::eventually([&] { return text().find("workload save (checkpoint-save) started") != std::string::npos; },
                                    std::chrono::seconds(180), std::chrono::milliseconds(200)));
    REQUIRE(lab.on("m1", "scancel " + alloc.job).status == 0);
    REQUIRE(lanes::test::eventually([&] { return text().find("exit=") != std::string::npos; }, std::chrono::seconds(120),
                                    std::chrono::milliseconds(200)));
    INFO(text());
    CHECK(text().find("exit=1") != std::string::npos);
    // gone, or CANCELLED while the controller still lists it
    CHECK(text().find("the run's shards ended under it (Slurm job " + alloc.job + " is ") != std::string::npos);
    for (const char* m : {"m1", "m2"})
      CHECK(lanes::test::eventually([&] { return left_of(lab, m, id + "1").empty(); }, std::chrono::seconds(60),
                                    std::chrono::milliseconds(500)));
    CHECK(lanes::test::eventually([&] { return processes_of(id + "1").empty(); }, std::chrono::seconds(30)));
  }

  {  // one machine's shard killed: the step ends, the other shard takes its
     // part down, and down cleans the dead shard's machine through Slurm
    Allocation alloc(lab, 2);
    REQUIRE(!alloc.job.empty());
    REQUIRE(alloc.nodes == "m[1-2]");
    const std::string id = "mk" + run_tag();
    auto up = alloc.lanes("up " + file + " --over-slurm --run-id " + id + " --wait 300s");
    INFO(up.out);
    REQUIRE(up.status == 0);
    // the shard on m2: a lanes process in m2's network namespace
    std::string m2_inode;
    {
      struct stat info {};
      for (const auto& n : lab.netns())
        if (n.size() > 3 && n.compare(n.size() - 3, 3, "-m2") == 0 && ::stat(("/run/netns/" + n).c_str(), &info) == 0)
          m2_inode = std::to_string(info.st_ino);
    }
    REQUIRE(!m2_inode.empty());
    pid_t shard = 0;
    for (const auto& pid : lanes::test::in_namespaces({m2_inode}, "lanes")) {
      std::ifstream in("/proc/" + pid + "/cmdline", std::ios::binary);
      std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (cmd.find(std::string("shard\0", 6)) != std::string::npos && cmd.find(id) != std::string::npos)
        shard = std::stoi(pid);
    }
    REQUIRE(shard > 0);
    REQUIRE(::kill(shard, SIGKILL) == 0);
    // m1's shard is told (the step ends: srun --kill-on-bad-exit) and takes its part down
    CHECK(lanes::test::eventually([&] { return left_of(lab, "m1", id).empty(); }, std::chrono::seconds(60),
                                  std::chrono::milliseconds(200)));
    auto status = alloc.lanes("status " + id);
    INFO(status.out);
    CHECK(status.out.find("step has ended") != std::string::npos);
    auto down = alloc.lanes("down " + id);
    INFO(down.out);
    CHECK(down.status == 0);
    CHECK(down.out.find("m2: its shard did not report its teardown") != std::string::npos);
    for (const char* m : {"m1", "m2"}) CHECK(left_of(lab, m, id).empty());
    CHECK(lanes::test::eventually([&] { return processes_of(id).empty(); }, std::chrono::seconds(30)));
  }
  {  // one machine's slurmd killed: the controller gives the machine up and
     // ends the job; the shard there, no longer finding its step, takes
     // its part down on its own; down names the machine and its state
    Allocation alloc(lab, 2);
    REQUIRE(!alloc.job.empty());
    const std::string id = "md" + run_tag();
    auto up = alloc.lanes("up " + file + " --over-slurm --run-id " + id + " --wait 300s");
    INFO(up.out);
    REQUIRE(up.status == 0);
    std::string m2;
    {
      std::ifstream in(lab.dir + "/pids/m2");
      in >> m2;
    }
    REQUIRE(!m2.empty());
    REQUIRE(lanes::test::run_command("kill -KILL " + m2).status == 0);
    // the lab's SlurmdTimeout is 30 s; the shards look every 5 s
    CHECK(lanes::test::eventually([&] { return processes_of(id).empty(); }, std::chrono::seconds(120),
                                  std::chrono::milliseconds(500)));
    CHECK(left_of(lab, "m1", id).empty());
    auto status = alloc.lanes("status " + id);
    INFO(status.out);
    CHECK(status.out.find("m2") != std::string::npos);
    CHECK(status.out.find("lost (Slurm: DOWN") != std::string::npos);
    auto down = alloc.lanes("down " + id);
    INFO(down.out);
    CHECK(down.out.find("m2 (Slurm: DOWN") != std::string::npos);
  }
  auto stop = lab.run("stop");
  CHECK(stop.status == 0);
  CHECK(lanes::test::in_namespaces(inodes).empty());
}
