#pragma once
// Workloads and faults are plug-ins: one file per type under
// scenarios/src/workloads/ and scenarios/src/faults/, each declaring its
// attributes (the loader checks steps against them) and doing its work
// through a StepContext. Adding one is adding a file and a line in its
// registry (workloads() or faults()).

#include <fmt/format.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lanes/reports/result.hpp"
#include "lanes/scenarios/schema.hpp"
#include "lanes/scenarios/step_context.hpp"
#include "lanes/testbed/cpu_load.hpp"

namespace lanes::scenarios {

// A workload once started: its lanes-traffic processes and what its figures
// are computed from.
struct WorkloadRun {
  Step step;
  int port = 0;          // its first port
  double start_s = 0;    // when its clients got going, seconds into the phase
  double started_in_s = 0;  // a burst: how long starting its clients took before their go
  std::vector<std::string> hosts;  // its job hosts, in the order of servers and clients where one each
  std::vector<Proc> servers;  // receivers and servers: stopped (or awaited) after the clients
  std::vector<Proc> clients;
  std::vector<Proc> failed;  // clients a job failure killed (fault job-fail); their output stays
  int incarnations = 1;      // the job's starts: 1 + its failures
  std::vector<double> failed_at_s;  // when each failure struck (the monotonic clock)
  std::optional<testbed::CpuTimes> cpu_at_start;  // the machine's CPU counters as its clients got going
  bool finished = false;
};

class Workload {
 public:
  virtual ~Workload() = default;
  virtual const char* type() const = 0;
  virtual const Attrs& attrs() const = 0;
  // A problem of STEP in TOPO the attribute declarations cannot say ("" if none).
  virtual std::string check(const Step&, const testbed::Topology&) const { return ""; }
  // Runs until <stop> or the phase's end (a probe): it cannot be waited for.
  virtual bool open_ended() const { return false; }
  // Its servers end by themselves once every client is done (a checkpoint's receivers).
  virtual bool servers_end() const { return false; }
  // The job hosts whose NICs the phase samples for it (default: host=, rack=, from=, to=).
  virtual std::vector<std::string> sampled_hosts(const Step& st, const testbed::Topology& topo) const;
  // The NIC counters that carry it, as the job sees them: "tx", "rx", or "" (no share).
  virtual const char* nic_direction() const { return "rx"; }
  // Its rate on the wire (from the NIC counters) is a figure of its own.
  virtual bool wire_rate() const { return false; }

  // Starts its processes into W (servers first, listening, then clients).
  virtual void start(WorkloadRun& w, StepContext& ctx) const = 0;
  // Its figures from its processes' results once they ended (its clients at END_S).
  virtual nlohmann::json figures(const WorkloadRun& w, double end_s, StepContext& ctx) const = 0;
  // One sentence of what it measured, from its figures: the progress
  // line, the report and the summary say it ("3.100 Gbit/s · 2.01 s · ...")
  virtual std::string summary(const nlohmann::json& figures) const = 0;
  // The figures it declares (reports::FigureDecl): their units, how
  // repeat="N" runs combine, which lanes compare judges
  virtual std::vector<reports::FigureDecl> declared_figures() const = 0;
  // A short run of it in the combination matrix's world (matrix.hpp: one
  // rack, job hosts h1 and h2, a server named storage), as a phase's
  // steps, the workload named "w"
  virtual std::string matrix_steps() const = 0;
  // Whether the matrix judges it by its bytes (no connection error, every
  // byte verified) or, where it verifies none (a probe), by its gaps
  virtual bool verifies_bytes() const { return true; }
  // A job failure (fault job-fail, JobFailure): its clients killed at
  // once, then the job started again where it resumes. "" once done;
  // otherwise why this type cannot.
  // Its verdict on itself once it ended, reported beside the scenario's
  // assertions (an exec workload's exit status against expect-exit=);
  // none by default: scenarios judge workloads with <assert>
  virtual std::optional<reports::Assertion> verdict(const reports::WorkloadResult&) const { return std::nullopt; }
  virtual std::string fail(WorkloadRun&, StepContext&, const JobFailure&) const {
    return fmt::format("a {} workload does not fail and resume (a training workload does)", type());
  }
};

class Fault {
 public:
  virtual ~Fault() = default;
  virtual const char* type() const = 0;
  virtual const Attrs& attrs() const = 0;
  // A problem of STEP in TOPO the attribute declarations cannot say ("" if none).
  virtual std::string check(const Step&, const testbed::Topology&) const { return ""; }
  // Applies the fault; LABEL is its mark= (or its type), under which it
  // marks the timeline and records what it measured.
  virtual void apply(const Step& st, const std::string& label, StepContext& ctx) const = 0;
};

// Every workload and fault type, registered once.
const std::vector<const Workload*>& workloads();
// The one result of a workload with repeat="N" from its runs (each named
// name#k): the run of median seconds, with each figure PLUGIN declares
// combined as declared (summed, or true only if true in every run), every
// run's seconds (seconds_runs), each failed run's reason (verify_note) and
// the plug-in's sentence of the whole. It keeps the median run's name.
reports::WorkloadResult combine_runs(const std::vector<reports::WorkloadResult>& runs, const Workload& plugin);
const Workload* find_workload(const std::string& type);
const std::vector<const Fault*>& faults();
const Fault* find_fault(const std::string& type);

}  // namespace lanes::scenarios
