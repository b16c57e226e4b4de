#pragma once
// Runs a scenario: for each phase, brings its topology up (a LiveRun: the
// namespaces, hostnet, the injectors, the switches' gobgpd and FIB agents),
// samples the NIC counters of the job hosts its steps name (a workload's
// hosts as the workload says, a fault's or an assertion's host, victim,
// rogue, from, to or rack) every 100 ms, runs the steps —
// workloads through lanes-traffic, faults, waits, live assertions — and
// takes it down again; then evaluates the scenario's assertions on what
// was measured.

#include <cstdint>
#include <iosfwd>
#include <string>

#include "lanes/testbed/role.hpp"
#include "lanes/testbed/slurm.hpp"
#include "lanes/reports/result.hpp"
#include "lanes/scenarios/scenario.hpp"

namespace lanes::scenarios {

struct RunOptions {
  std::string out_dir;         // per phase: workload outputs; "" = a temporary directory
  bool keep = false;           // leave the last phase's run up
  uint64_t seed = 1;           // of every traffic pattern
  std::string bin_dir;         // lanes' executables; "" = beside this program
  std::ostream* progress = nullptr;  // the live progress line and step log
  std::string* kept_run = nullptr;   // with keep: set to the id of the run left up
  std::string run_id_prefix;         // "" = fresh random run ids; else PREFIX1, PREFIX2, ... per phase
  int* phase_seq = nullptr;          // with a prefix: the last number used (shared by a suite's scenarios)
  testbed::Roles roles;              // what each phase's run is made of (the composition root's)
  // over the machines of this Slurm allocation (lanes run --over-slurm):
  // each phase's run is split over them (testbed/slurm_run.hpp), its
  // processes and NIC samplers run where their nodes are, as job steps
  const testbed::Allocation* over_slurm = nullptr;
};

reports::ScenarioResult run_scenario(const Scenario& sc, const RunOptions& opt);

// Evaluates an assertion that only needs measured results (not the live
// testbed) against RESULT; CURRENT_PHASE is the phase an in-phase assert
// sits in. Used by the runner and by the unit tests.
reports::Assertion evaluate(const Step& a, const reports::ScenarioResult& result, const std::string& current_phase);

// An assertion's min/max: as text ("≥ 3.8 and ≤ 4.2") and as a check.
std::string bounds_text(const Step& a);
bool within_bounds(const Step& a, double v);

// The average of SERIES between FROM_S and TO_S (seconds since the phase started).
double window_mean(const reports::Series& s, double from_s, double to_s);

}  // namespace lanes::scenarios
