#pragma once
// A run over the machines of a Slurm allocation, seen from the first rank
// (`lanes up --over-slurm`, and `lanes run --over-slurm` per phase): one
// job step runs `lanes shard` on every machine (srun); the shards' status
// lines come back through srun into the run's log; the step ends with
// scancel. The first rank keeps the run in <state dir>-slurm/<run>/:
// slurm.json (the job, the machines, srun's pid) and shards.log.
// Processes in another machine's namespaces are job steps too
// (remote_argv): srun is their handle here, carrying their output back
// and signals to them.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lanes/testbed/overrides.hpp"
#include "lanes/testbed/result.hpp"
#include "lanes/testbed/slurm.hpp"

namespace lanes::testbed {

struct SlurmRunOptions {
  std::string run_id;         // "" = a fresh one
  std::string topology_file;  // at the same path on every machine
  Overrides overrides;        // a scenario phase's, set on every machine alike
  uint16_t port = 0;          // the tunnels' UDP port; 0 = kVxlanPort
  uint32_t underlay_mtu = 0;  // 0 = read on this machine
  uint64_t bfd_cpus = 0;      // what BFD's default interval is fitted to; 0 = this machine's CPUs
  std::string lanes;          // the lanes executable on every machine; "" = this one's path
  // the run lives only as long as this process (lanes run): srun ends with
  // it (and with srun every shard), and lanes clean takes down what a
  // killed one left
  bool held = false;
};

struct MachineWord {
  std::string last = "starting";
  nlohmann::json detail = nlohmann::json::object();
  bool up = false, converged = false, down = false, failed = false;
};
// W after E, a status line of W's shard: its last word and detail; up,
// down and failed once said stay; converged holds from "converged" until a
// "progress" (the machine's switches lost something again)
void apply(MachineWord& w, const ShardEvent& e);

struct SlurmDownReport {
  int namespaces = 0, processes = 0;
  std::vector<std::string> cleaned;  // what lanes clean said on a machine whose shard was silent
  std::vector<std::string> errors;
};

class SlurmRun {
 public:
  std::string run_id, job_id, topology_file, lanes;
  std::vector<Machine> machines;
  pid_t srun_pid = 0;
  uint64_t srun_start_time = 0;
  pid_t holder_pid = 0;  // held: the lanes process whose run it is
  uint64_t holder_start_time = 0;
  std::string dir;  // where the first rank keeps it

  static std::string base_dir();  // <state dir>-slurm
  static std::optional<SlurmRun> load(const std::string& run_id);
  static std::vector<std::string> list();
  // Starts the shards' step. The caller has placed the topology (a topology
  // that cannot be split is its error, before anything starts).
  static Result<SlurmRun> start(const Allocation& alloc, const SlurmRunOptions& opt);

  nlohmann::json to_json() const;
  bool step_running() const;
  // held by a lanes process that is gone (lanes clean takes it down)
  bool holder_dead() const;
  std::string log_path() const { return dir + "/shards.log"; }

  // Follows the shards until every machine is up (CONVERGED: converged),
  // one failed, the step ended, STOP says so or TIMEOUT passes. ON_EVENT
  // sees every status line as it comes. Returns "" when they got there,
  // else why not ("timeout" for the timeout).
  std::string follow(bool converged, std::optional<std::chrono::milliseconds> timeout,
                     const std::function<void(const ShardEvent&)>& on_event, const std::function<bool()>& stop,
                     std::vector<MachineWord>& words) const;
  // Every machine's last word so far.
  std::vector<MachineWord> words() const;
  // SIGTERM to the step (scancel), waits for every shard, and cleans a
  // machine whose shard said nothing through Slurm (lanes clean there);
  // the run's other steps (its processes on the machines) are cancelled;
  // the record goes when nothing failed.
  SlurmDownReport down() const;

  // The machine index of NAME (-1: none)
  int machine_index(const std::string& name) const;
  // srun argv running CMD in NETNS_NODE's namespace (a node name as lanes
  // exec takes it, "h1" or "h1.job") on machine M, as a step of its own;
  // HOLD_GO: the command starts with SIGUSR1 blocked (lanes-traffic --wait-go).
  // The step is named after the run, so down() ends what is left of it.
  std::vector<std::string> remote_argv(int m, const std::string& node, const std::vector<std::string>& cmd,
                                       bool hold_go = false) const;
  // srun argv running CMD on machine M (no namespace)
  std::vector<std::string> machine_argv(int m, const std::vector<std::string>& cmd) const;
};

}  // namespace lanes::testbed
