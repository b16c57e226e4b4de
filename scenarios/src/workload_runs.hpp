#pragma once
// The workloads of one phase, from their start to their figures: a
// workload's plug-in starts its processes, the runs wait for (or end) its
// clients and then its servers, and record what the plug-in measured, its
// NIC figures and its marks. repeat="N" runs it N times back to back and
// reports the runs combined as the plug-in declares (combine_runs).

#include <functional>
#include <map>
#include <string>

#include "lanes/reports/result.hpp"
#include "lanes/scenarios/step_context.hpp"
#include "lanes/scenarios/workload.hpp"

namespace lanes::scenarios {

// The machine's CPU while a workload ran (every process's: workloads that
// overlap share it), from /proc/stat at its start and end: machine_cpu_s,
// and per Gbit it verified (machine_cpu_s_per_gbit), what a road costs the
// host beside what it carries.
void add_cpu_figures(nlohmann::json& f, const std::optional<testbed::CpuTimes>& before,
                     const std::optional<testbed::CpuTimes>& after);

class WorkloadRuns {
 public:
  // the NIC figures of a workload that ended at END_S (the phase's sampler)
  using NicFigures = std::function<void(reports::WorkloadResult&, double end_s)>;
  // a workload's verdict on itself (Workload::verdict: an exec's exit status)
  using Report = std::function<void(reports::Assertion)>;
  // CTX: the live phase; MARKS and PR: where the workloads' marks, markers
  // and results go
  WorkloadRuns(StepContext& ctx, std::map<std::string, double>& marks, reports::PhaseResult& pr, NicFigures nic,
               Report report)
      : ctx_(ctx), marks_(marks), pr_(pr), nic_(std::move(nic)), report_(std::move(report)) {}

  // <workload>: starts it and, unless it is open-ended or wait="false", waits for its end
  void start(const Step& st);
  // <wait workload=>: waits for its end; <stop workload=>: ends it
  void wait(const std::string& name) { finish_if_running(name, false); }
  void stop(const std::string& name) { finish_if_running(name, true); }
  // the phase's end, whatever happened: ends what still runs, keeping what it measured
  void end_all();
  // the workload NAME of this phase (a job failure's target); nullptr if none started
  WorkloadRun* find(const std::string& name);

 private:
  void start_once(const Step& st);
  void finish_if_running(const std::string& name, bool stop);
  void finish(WorkloadRun& w, bool stop);

  StepContext& ctx_;
  std::map<std::string, double>& marks_;
  reports::PhaseResult& pr_;
  NicFigures nic_;
  Report report_;
  std::map<std::string, WorkloadRun> running_;
};

}  // namespace lanes::scenarios
