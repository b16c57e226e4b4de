#pragma once
// A run over the machines of a Slurm allocation, seen from the first rank:
// `lanes up FILE --over-slurm` starts one job step, `lanes shard` on every
// machine (srun), and follows the shards' status lines; `lanes down` ends
// the step (scancel) and gathers what each machine took down; `lanes
// status` shows each machine's last word. What the first rank keeps of
// such a run is in <state dir>-slurm/<run>/: slurm.json (the job, the
// machines, srun's pid) and shards.log (every shard's output, as srun
// brought it).

#include <sys/types.h>

#include <chrono>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "lanes/cli/cli.hpp"
#include "lanes/testbed/slurm.hpp"

namespace lanes::cli::commands {

struct SlurmRun {
  std::string run_id, job_id, topology_file;
  std::vector<testbed::Machine> machines;
  pid_t srun_pid = 0;
  uint64_t srun_start_time = 0;
  std::string dir;  // where the first rank keeps it
};

std::string slurm_runs_dir();
std::optional<SlurmRun> load_slurm_run(const std::string& run_id);
std::vector<std::string> list_slurm_runs();

struct OverSlurmUp {
  std::string file, run_id;
  std::optional<std::chrono::milliseconds> wait;
  uint16_t port = 0;
  uint32_t underlay_mtu = 0;  // 0: read from this machine
  bool json = false;
};
int up_over_slurm(const OverSlurmUp& o, std::ostream& out, std::ostream& err);
int down_over_slurm(const SlurmRun& r, std::ostream& out, std::ostream& err);
void status_over_slurm(const SlurmRun& r, bool json, std::ostream& out);

int cmd_shard(const CliContext& cli, const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace lanes::cli::commands
