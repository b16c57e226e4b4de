#pragma once
// A run over the machines of a Slurm allocation, seen from the first rank:
// `lanes up FILE --over-slurm` starts one job step, `lanes shard` on every
// machine (srun), and follows the shards' status lines; `lanes down` ends
// the step (scancel) and gathers what each machine took down; `lanes
// status` shows each machine's last word (testbed/slurm_run.hpp keeps the
// run's record and talks to Slurm).

#include <sys/types.h>

#include <chrono>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "lanes/cli/cli.hpp"
#include "lanes/switches/convergence.hpp"
#include "lanes/testbed/slurm_run.hpp"

namespace lanes::cli::commands {

using testbed::SlurmRun;

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

int cmd_nic_counters(const CliContext& cli, const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int cmd_fabric_query(const CliContext& cli, const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// What a shard says after a convergence check (NOW; LAST: the check before,
// none for the first): "converged" each time it becomes done — again after
// a flap and its repair, so that a busy machine's transient loss does not
// leave "progress" as its last word for good — "progress" while it is not
// done and the counts moved, "" otherwise.
std::string shard_word(const std::optional<switches::Convergence>& last, const switches::Convergence& now);

int cmd_shard(const CliContext& cli, const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace lanes::cli::commands
