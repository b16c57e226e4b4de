#pragma once
// Assertions on measured results (no live testbed needed: inside a phase
// after its workloads, or at the scenario's end across phases) are
// plug-ins like the live ones: one file per type under
// scenarios/src/assertions/, each declaring its attributes and judging a
// ResultContext. evaluate() (runner.hpp) finds the plug-in, the phase and
// the workloads the step names, and fills in the line and the phase.

#include <string>
#include <vector>

#include "lanes/reports/result.hpp"
#include "lanes/scenarios/scenario.hpp"
#include "lanes/scenarios/schema.hpp"

namespace lanes::scenarios {

struct ResultContext {
  const Step& step;
  const reports::ScenarioResult& result;
  const reports::PhaseResult* phase;  // phase= or the current one (null: not run)
  // workload= of that phase, or every workload of it (of every phase when
  // the step names none): the first one is "the" workload
  std::vector<const reports::WorkloadResult*> workloads;
  const reports::WorkloadResult* workload() const { return workloads.empty() ? nullptr : workloads.front(); }
  // a figure of W, 0 when it has none
  static double figure(const reports::WorkloadResult& w, const char* key);
};

class ResultAssertion {
 public:
  virtual ~ResultAssertion() = default;
  virtual const char* type() const = 0;
  virtual const Attrs& attrs() const = 0;
  // Judges into OUT, whose name ("TYPE WORKLOAD"), line and phase are set;
  // it sets expected, measured, the verdict and may extend the name.
  virtual void check(const ResultContext& ctx, reports::Assertion& out) const = 0;
};

// Every post-run assertion type, registered once.
const std::vector<const ResultAssertion*>& result_assertions();
const ResultAssertion* find_result_assertion(const std::string& type);

// OUT failed because what it looks at never happened (WHY).
void nothing_measured(reports::Assertion& out, const std::string& why);

}  // namespace lanes::scenarios
