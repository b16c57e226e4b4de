#pragma once
// The post-run assertion types (one .cpp each), for the registry and the tests.

#include "lanes/scenarios/result_assertion.hpp"

namespace lanes::scenarios {

#define LANES_RESULT_ASSERTION(Class)                                              \
  class Class final : public ResultAssertion {                                     \
   public:                                                                         \
    const char* type() const override;                                             \
    const Attrs& attrs() const override;                                           \
    void check(const ResultContext& ctx, reports::Assertion& out) const override;  \
  };

// throughput-ratio / completion-ratio: a workload's rate (or time) in this
// phase against the same workload in baseline=, within min=/max=
// throughput-ratio: this phase's rate over the baseline's; completion-ratio:
// the baseline's time over this phase's; latency-ratio: the baseline's
// final p99 (dataload) over this phase's (above 1: lower latency here);
// busbw-ratio: a collective's bus bandwidth over the baseline's
class Ratio final : public ResultAssertion {
 public:
  enum class Of { throughput, completion, latency, busbw };
  explicit Ratio(Of of) : of_(of) {}
  const char* type() const override;
  const Attrs& attrs() const override;
  void check(const ResultContext& ctx, reports::Assertion& out) const override;

 private:
  Of of_;
};
LANES_RESULT_ASSERTION(NicShare)          // each NIC's share of a workload's bytes: expected= ± tolerance=
LANES_RESULT_ASSERTION(ConnectionErrors)  // connection errors of the workloads ≤ max=
LANES_RESULT_ASSERTION(BytesVerified)     // every byte of the workloads' streams arrived as sent
LANES_RESULT_ASSERTION(Blackout)          // a probe's longest gap within min=/max=
LANES_RESULT_ASSERTION(Latency)           // a fetch workload's p99 ≤ p99-max=
LANES_RESULT_ASSERTION(CompletionTime)    // a workload ended within max=
LANES_RESULT_ASSERTION(FigureBound)       // a workload's figure= within min=/max=
LANES_RESULT_ASSERTION(TransferFloor)     // a transfer took at least its bytes at rate= plus rtt=
LANES_RESULT_ASSERTION(WindowCeiling)     // no flow of a transfer beat its socket buffer per rtt=

#undef LANES_RESULT_ASSERTION

}  // namespace lanes::scenarios
