// What a run over several machines reads from Slurm and passes between
// its first rank and its shards: scontrol's words, the machine list on
// the shard's command line, the shards' status lines, which machine a
// shard is.

#include <cstdlib>

#include <catch2/catch.hpp>

#include "lanes/testbed/slurm.hpp"
#include "lanes/testbed/slurm_run.hpp"
#include "lanes/testbed/topology_loader.hpp"

using namespace lanes::testbed;

TEST_CASE("slurm: scontrol's host names and a node's address are read", "[unit]") {
  CHECK(parse_hostnames("m1\nm2\n\nm3  \n") == std::vector<std::string>{"m1", "m2", "m3"});
  CHECK(parse_hostnames("").empty());
  CHECK(parse_node_addr("NodeName=m2 Arch=x86_64 CPUTot=1 NodeAddr=198.18.8.12 NodeHostName=m2 Version=22.05.8") ==
        "198.18.8.12");
  CHECK(parse_node_addr("NodeName=gpu7 NodeAddr=gpu7.cluster NodeHostName=gpu7") == "gpu7.cluster");
  CHECK_FALSE(parse_node_addr("NodeName=m2 NodeAddr= State=IDLE"));
  CHECK_FALSE(parse_node_addr("Node m2 not found"));
  CHECK(parse_node_state("NodeName=m2 NodeAddr=198.18.8.12 State=DOWN+NOT_RESPONDING ThreadsPerCore=1") ==
        "DOWN+NOT_RESPONDING");
  CHECK_FALSE(parse_node_state("NodeName=m2 NodeAddr=198.18.8.12"));
}

TEST_CASE("slurm: the machine list survives the shard's command line, and bad lists are refused", "[unit]") {
  std::vector<Machine> ms{{"m1", *parse_ip("198.18.8.11")}, {"m2", *parse_ip("2001:2::12")}};
  auto text = machines_arg(ms);
  CHECK(text == "m1=198.18.8.11,m2=2001:2::12");
  auto back = parse_machines_arg(text);
  REQUIRE(back.size() == 2);
  CHECK(back[1].name == "m2");
  CHECK(back[1].addr == ms[1].addr);
  CHECK_THROWS_AS(parse_machines_arg(""), InputError);
  CHECK_THROWS_AS(parse_machines_arg("m1"), InputError);
  CHECK_THROWS_AS(parse_machines_arg("=198.18.8.11"), InputError);
  CHECK_THROWS_WITH(parse_machines_arg("m1=198.18.8.11,m2=nowhere"), Catch::Contains("'m2=nowhere'"));
}

TEST_CASE("slurm: a shard finds its machine by SLURMD_NODENAME, else by SLURM_NODEID", "[unit]") {
  std::vector<Machine> ms{{"m1", *parse_ip("198.18.8.11")}, {"m2", *parse_ip("198.18.8.12")}};
  ::unsetenv("SLURMD_NODENAME");
  ::unsetenv("SLURM_NODEID");
  CHECK_FALSE(this_machine(ms));
  ::setenv("SLURM_NODEID", "1", 1);
  CHECK(this_machine(ms) == 1);
  ::setenv("SLURM_NODEID", "2", 1);  // beyond the list
  CHECK_FALSE(this_machine(ms));
  ::setenv("SLURMD_NODENAME", "m1", 1);  // the name wins over the number
  CHECK(this_machine(ms) == 0);
  ::setenv("SLURMD_NODENAME", "m7", 1);  // a machine the list does not name is none of it
  CHECK_FALSE(this_machine(ms));
  ::unsetenv("SLURMD_NODENAME");
  ::unsetenv("SLURM_NODEID");
}

TEST_CASE("slurm: a shard's status line is read back, and other lines are not taken for one", "[unit]") {
  ShardEvent e{2, "m3", "converged", {{"task_ips", 128}, {"aggregates", 60}}};
  auto line = to_line(e);
  auto back = parse_shard_line(line);
  REQUIRE(back);
  CHECK(back->machine == 2);
  CHECK(back->name == "m3");
  CHECK(back->event == "converged");
  CHECK(back->detail.value("task_ips", 0) == 128);
  CHECK_FALSE(back->detail.contains("lanes_shard"));
  // srun's label before it
  CHECK(parse_shard_line("2: " + line));
  CHECK_FALSE(parse_shard_line("srun: error: m2: task 1: Exited with exit code 1"));
  CHECK_FALSE(parse_shard_line("{\"event\":\"up\"}"));  // no shard number
  CHECK_FALSE(parse_shard_line("{\"lanes_shard\":"));    // cut short
}

TEST_CASE("slurm: a shard finds its step in the controller's list of steps", "[unit]") {
  const std::string list = "12.0\n12.1\n7.batch\n13.0\n";
  CHECK(steps_list_has(list, "12.1"));
  CHECK(steps_list_has(list, "13.0"));
  CHECK_FALSE(steps_list_has(list, "12.2"));
  CHECK_FALSE(steps_list_has(list, "2.0"));  // not a part of another step's id
  CHECK_FALSE(steps_list_has("", "12.0"));
}

TEST_CASE("slurm: a machine is converged from its shard's 'converged' until a 'progress', then again", "[unit]") {
  MachineWord w;
  auto say = [&](const char* event) { apply(w, ShardEvent{0, "m1", event, {{"task_ips_full", 1}}}); };
  say("up");
  CHECK(w.up);
  CHECK_FALSE(w.converged);
  say("progress");
  say("converged");
  CHECK(w.converged);
  CHECK(w.last == "converged");
  say("progress");  // a session flapped: its routes went
  CHECK_FALSE(w.converged);
  CHECK(w.last == "progress");
  CHECK(w.up);  // up stays
  say("converged");
  CHECK(w.converged);
  say("down");
  CHECK(w.down);
  CHECK(w.converged);  // what it was when it went down
}
