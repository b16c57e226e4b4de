#pragma once
// What a run over several machines asks of Slurm, its engine: the
// allocation it runs in (the machines, in the order Slurm numbers them, and
// each one's address on the cluster's own network, the tunnels' underlay),
// and the words that pass between the first rank and the shards (the
// machine list on `lanes shard`'s command line, the shards' status lines).
// lanes starts, signals and ends its processes on the other machines only
// through Slurm's commands (srun, scancel, squeue, scontrol).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lanes/testbed/address.hpp"
#include "lanes/testbed/result.hpp"

namespace lanes::testbed {

struct Machine {
  std::string name;  // Slurm's node name
  IpAddr addr;       // its NodeAddr, resolved: the tunnels' far end
};

struct Allocation {
  std::string job_id;
  std::vector<Machine> machines;  // in Slurm's order: SLURM_NODEID is the index
};

// One hostname per line (`scontrol show hostnames`).
std::vector<std::string> parse_hostnames(const std::string& text);
// NodeAddr= and State= of one node's `scontrol show node -o NAME` line.
std::optional<std::string> parse_node_addr(const std::string& line);
std::optional<std::string> parse_node_state(const std::string& line);
// Machine NAME's state as the controller has it ("IDLE", "ALLOCATED",
// "DOWN+NOT_RESPONDING", ...); "" when it cannot be asked.
std::string node_state(const std::string& name);
// "m1=198.18.8.11,m2=..." and back; the parse throws InputError naming
// what it cannot read.
std::string machines_arg(const std::vector<Machine>& machines);
std::vector<Machine> parse_machines_arg(const std::string& arg);

// A Slurm command (scontrol, squeue, scancel, srun) run to its end, its
// stdout; an error when it cannot start, times out or exits non-zero.
Result<std::string> slurm_command(const std::vector<std::string>& argv,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(30));

// The allocation this process runs in (SLURM_JOB_ID, SLURM_JOB_NODELIST),
// its node addresses read from scontrol and resolved. An error says what
// is missing: not inside an allocation, scontrol not found, a node without
// an address.
Result<Allocation> read_allocation();
// This machine's index in MACHINES: SLURMD_NODENAME's place (nullopt when
// the list does not name it), else SLURM_NODEID; nullopt when neither says.
std::optional<int> this_machine(const std::vector<Machine>& machines);
// The MTU of the interface holding ADDR in this network namespace (the
// machine's own network: read, never changed); an error when no interface
// holds it.
Result<uint32_t> mtu_of_address(const IpAddr& addr);

// Does the controller still list job step STEP ("12.0")? nullopt when it
// cannot be asked (the controller unreachable): a shard asks it, not its
// machine's slurmd, so a shard whose slurmd is gone still learns that the
// controller ended its step.
std::optional<bool> step_listed(const std::string& step);
// The parse of `squeue -h -s -o %i`: is STEP among its lines?
bool steps_list_has(const std::string& text, const std::string& step);

// A shard's status line on its stdout (srun brings every shard's to the
// first rank): one JSON object per line.
struct ShardEvent {
  int machine = -1;
  std::string name;   // the machine's
  std::string event;  // "up", "progress", "converged", "failed", "down"
  nlohmann::json detail = nlohmann::json::object();
};
std::string to_line(const ShardEvent& e);
// nullopt for a line that is not a shard's (srun's own words, a daemon's)
std::optional<ShardEvent> parse_shard_line(const std::string& line);

}  // namespace lanes::testbed
