// multi-machine tier: the Slurm lab that runs over several machines are
// tested on (scripts/slurm-lab). Four emulated machines come up idle, a
// job step runs on all four, each machine has its own hostname, address
// and /run/netns, and stop leaves nothing: no process in a lab namespace,
// no namespace, no file, even after a slurmd was killed mid-step.

#include <catch2/catch.hpp>
#include <set>
#include <sstream>
#include <string>

#include "slurm_lab.hpp"

namespace {

std::set<std::string> lines(const std::string& text) {
  std::set<std::string> s;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) s.insert(l);
  return s;
}

}  // namespace

using lanes::test::in_namespaces;

TEST_CASE("slurm lab: four machines, a step on each, their own /run, and nothing left after stop",
          "[multi-machine]") {
  lanes::test::require_root();
  lanes::test::require_slurm();
  lanes::test::Lab lab("lab");
  auto st = lab.run("start 4");
  INFO(st.out);
  REQUIRE(st.status == 0);
  CHECK(st.out.find("4 machines idle") != std::string::npos);

  auto step = lab.run("exec m1 -- srun -N4 sh -c 'echo $(hostname) $(ip -o -4 addr show eth0 | cut -d\" \" -f7)'");
  INFO(step.out);
  CHECK(step.status == 0);
  CHECK(lines(step.out) == std::set<std::string>{"m1 198.18.8.11/24", "m2 198.18.8.12/24", "m3 198.18.8.13/24",
                                                  "m4 198.18.8.14/24"});
  // /run is each machine's own: a namespace made on m1 is not on m2
  CHECK(lab.run("exec m1 -- ip netns add lab-probe").status == 0);
  CHECK(lab.run("exec m1 -- ip netns list").out.find("lab-probe") != std::string::npos);
  CHECK(lab.run("exec m2 -- ip netns list").out.find("lab-probe") == std::string::npos);
  CHECK(lanes::test::run_command("ip netns list").out.find("lab-probe") == std::string::npos);
  // a jumbo underlay: lanes' tunnels keep 1500 bytes inside
  CHECK(lab.run("exec m3 -- ip link show eth0").out.find("mtu 9000") != std::string::npos);

  // the lab's namespaces, to find what might be left in them
  auto names = lab.netns();
  REQUIRE(names.size() == 6);  // the lab network, the controller, 4 machines
  auto inodes = lab.netns_inodes();
  REQUIRE(inodes.size() == 6);

  // a step under way on every machine, then m2's slurmd killed: stop must
  // end what it left there too
  std::string bg = lab.cmd("exec m1 -- srun -N4 sleep 600") + " > /dev/null 2>&1 &";
  REQUIRE(lanes::test::run_command(bg).status == 0);
  REQUIRE(lanes::test::eventually(
      [&] { return lab.run("exec ctl -- squeue -h -t R -o %A").out.find_first_of("0123456789") != std::string::npos; },
      std::chrono::seconds(20)));
  // the step's four tasks, one in each machine
  REQUIRE(lanes::test::eventually([&] { return in_namespaces(inodes, "sleep").size() == 4; },
                                  std::chrono::seconds(20)));
  std::string m2;
  {
    std::ifstream in(lab.dir + "/pids/m2");
    in >> m2;
  }
  REQUIRE(!m2.empty());
  CHECK(lanes::test::run_command("kill -KILL " + m2).status == 0);

  auto stop = lab.run("stop");
  INFO(stop.out);
  CHECK(stop.status == 0);
  CHECK(lanes::test::eventually([&] { return in_namespaces(inodes).empty(); }, std::chrono::seconds(5)));
  auto left = lanes::test::run_command("ip netns list").out;
  for (const auto& n : names) CHECK(left.find(n) == std::string::npos);
  CHECK_FALSE(std::filesystem::exists(lab.dir));
}
