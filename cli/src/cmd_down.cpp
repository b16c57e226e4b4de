// `lanes down and clean`.

#include "commands.hpp"
#include "over_slurm.hpp"

#include <unistd.h>

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <chrono>
#include <filesystem>
#include <iostream>

#include "lanes/testbed/cleanup.hpp"
#include "lanes/testbed/netns.hpp"
#include "lanes/testbed/run_registry.hpp"
#include "lanes/testbed/fabric.hpp"
#include "lanes/testbed/wait.hpp"

namespace po = boost::program_options;

namespace lanes::cli::commands {

std::string pids_text(const std::vector<pid_t>& pids) {
  std::string s;
  for (pid_t p : pids) s += (s.empty() ? "" : " ") + std::to_string(p);
  return s;
}

int cmd_down([[maybe_unused]] const CliContext& cli, const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description desc("options");
  std::string run;
  desc.add_options()("run", po::value(&run), "run id (may be omitted when only one run exists)")(
      "all", "take every run down that no lanes process is using");
  po::positional_options_description pos;
  pos.add("run", 1);
  po::variables_map vm;
  if (!parse(args, cmd_named("down"), desc, pos, vm, out)) return kExitOk;
  if (vm.count("run") && !RunRegistry::valid_id(run))
    throw UsageError(fmt::format("'{}' is not a run id (1-8 of a-z, 0-9)", run));
  if (!have_privileges(err, "down")) return kExitFailure;
  if (!run.empty())
    if (auto r = SlurmRun::load(run)) return down_over_slurm(*r, out, err);  // a run over several machines
  RunRegistry reg;
  std::vector<std::string> ids;
  if (vm.count("all")) {
    if (!run.empty()) throw UsageError("give either RUN or --all");
    ids = reg.list();
  } else if (run.empty()) {
    ids = reg.list();
    if (ids.size() > 1) {
      err << "lanes down: " << ids.size() << " runs exist; name one or use --all:";
      for (const auto& i : ids) err << " " << i;
      err << "\n";
      return kExitBadInput;
    }
  } else {
    auto o = reg.owner_of(run);
    if (!reg.exists(run) && o && o->state_dir != reg.base() && RunRegistry(o->state_dir).exists(run)) {
      err << "lanes down: run '" << run << "' belongs to state dir " << o->state_dir << " (LANES_STATE_DIR="
          << o->state_dir << " lanes down " << run << ")\n";
      return kExitBadInput;
    }
    if (!reg.exists(run) && (list_netns(RunRegistry::netns_prefix(run)).empty() || !o)) {
      err << "lanes down: no run '" << run << "' (lanes status lists the runs)\n";
      return kExitBadInput;
    }
    ids = {run};
  }
  if (ids.empty()) {
    out << "no runs to take down\n";
    return kExitOk;
  }
  int rc = kExitOk;
  for (const auto& id : ids) {
    // a lanes clean locks a run it took for dead to judge it again; a down
    // waits out that look (2 s at most) instead of failing beside it
    RemoveResult r = poll_until([&] { return remove_run(reg, id); }, [](const RemoveResult& x) { return !x.busy; },
                                std::chrono::seconds(2), std::chrono::milliseconds(100))
                         .last;
    for (const auto& e : r.errors) err << "lanes: " << e << "\n";
    if (!r.ok) rc = kExitFailure;
    out << fmt::format("run {} {}: {} namespaces, {} processes removed in {}\n", id,
                       r.ok ? "down" : "partly down", r.report.namespaces, r.report.processes, fmt_ms(r.took));
  }
  return rc;
}

int cmd_clean([[maybe_unused]] const CliContext& cli, const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description desc("options");
  desc.add_options()("all", "also take down runs that are up (every run no lanes process is using)")(
      "dry-run,n", "list what a clean would remove, and remove nothing");
  po::positional_options_description pos;
  po::variables_map vm;
  if (!parse(args, cmd_named("clean"), desc, pos, vm, out,
             "Removes what dead runs of this state dir left behind: runs whose lanes process died\n"
             "(while building, tearing down, or running a scenario), runs whose supervisor died,\n"
             "and the namespaces and processes of runs whose directory is gone. Runs\n"
             "that are up stay unless --all is given; runs a live lanes process holds, runs of\n"
             "other state dirs and objects no owner record proves to be lanes' are never touched."))
    return kExitOk;
  bool dry = vm.count("dry-run");
  bool all = vm.count("all");
  if (!dry && !have_privileges(err, "clean")) return kExitFailure;
  RunRegistry reg;
  CleanPlan plan = plan_clean(reg, all);
  int rc = kExitOk;
  int namespaces = 0, processes = 0;
  for (const auto& t : plan.targets) {
    if (dry) {
      out << fmt::format("would remove run {} ({}): {} namespaces, {} processes{}{}\n", t.id, t.why,
                         t.namespaces.size(), t.processes.size(),
                         t.processes.empty() ? "" : " (pids " + pids_text(t.processes) + ")",
                         t.has_dir ? ", its directory" : "");
      continue;
    }
    auto r = remove_run(reg, t.id, !all);
    if (r.busy) {  // it came to life (or another clean took it) since the plan
      out << fmt::format("left alone: run {}: a lanes process took it since this clean looked; not touched\n",
                         t.id);
      continue;
    }
    if (r.alive) {  // its creator finished between this clean's look and its lock
      out << fmt::format("left alone: run {}: it is up (it came up while this clean looked); not touched\n", t.id);
      continue;
    }
    for (const auto& e : r.errors) err << "lanes: " << e << "\n";
    if (!r.ok) rc = kExitFailure;
    namespaces += r.report.namespaces;
    processes += r.report.processes;
    out << fmt::format("removed run {} ({}): {} namespaces, {} processes\n", t.id, t.why, r.report.namespaces,
                       r.report.processes);
  }
  for (const auto& id : plan.stale_records) {
    if (dry) {
      out << fmt::format("would remove the owner record of run {} (the run exists nowhere)\n", id);
    } else {
      reg.forget(id);
      out << fmt::format("removed the owner record of run {} (the run exists nowhere)\n", id);
    }
  }
  for (const auto& path : plan.hidden_dirs) {
    std::error_code ec;
    if (!dry) std::filesystem::remove_all(path, ec);
    out << fmt::format("{} {} (a lanes process died creating or removing a run there)\n",
                       dry ? "would remove" : "removed", path);
  }
  // runs over several machines that a lanes run held and that died with it:
  // their shards' step, and what is left on each machine, through Slurm
  for (const auto& id : SlurmRun::list()) {
    auto r = SlurmRun::load(id);
    if (!r || !r->holder_dead()) continue;
    if (dry) {
      out << fmt::format("would take down run {} over {} machines (the lanes process that held it is gone)\n", id,
                         r->machines.size());
      continue;
    }
    out << fmt::format("run {} over {} machines: the lanes process that held it is gone; ", id, r->machines.size());
    if (down_over_slurm(*r, out, err) != kExitOk) rc = kExitFailure;
  }
  for (const auto& why : plan.left_alone) out << "left alone: " << why << "\n";
  if (!dry)
    out << fmt::format("clean: {} runs removed ({} namespaces, {} processes)", plan.targets.size(), namespaces,
                       processes);
  else
    out << fmt::format("clean --dry-run: {} runs would be removed", plan.targets.size());
  if (plan.kept_up)
    out << fmt::format("; {} run{} up kept (--all removes them)", plan.kept_up, plan.kept_up == 1 ? "" : "s");
  if (plan.live) out << fmt::format("; {} run{} in use by a lanes process", plan.live, plan.live == 1 ? "" : "s");
  out << "\n";
  return rc;
}

}  // namespace lanes::cli::commands
