#pragma once
// The live assertion types (one .cpp each), for the registry and the tests.

#include <optional>
#include <string>
#include <vector>

#include "lanes/scenarios/live_assertion.hpp"
#include "lanes/scenarios/step_context.hpp"

namespace lanes::scenarios {

// every task IP of host= (or of each job host of rack=) has count= next hops at its switch
class MembersAssertion final : public LiveAssertion {
 public:
  const char* type() const override;
  const Attrs& attrs() const override;
  reports::Assertion check(const Step& st, LiveContext& ctx) const override;
};

// the fault marked fault= moved no bucket of a healthy NIC
class HealthyFlowsKept final : public LiveAssertion {
 public:
  const char* type() const override;
  const Attrs& attrs() const override;
  reports::Assertion check(const Step& st, LiveContext& ctx) const override;
};

// host='s NIC rate between from= and to= against base-from= .. base-to=
class RateRatio final : public LiveAssertion {
 public:
  const char* type() const override;
  const Attrs& attrs() const override;
  reports::Assertion check(const Step& st, LiveContext& ctx) const override;
};

// after=, how long until host='s NIC rate (means over window=) is back at
// fraction= (0.95) of its rate between base-from= and base-to=; at most max=
class RateRecovery final : public LiveAssertion {
 public:
  const char* type() const override;
  const Attrs& attrs() const override;
  reports::Assertion check(const Step& st, LiveContext& ctx) const override;
};
// The first sample index's time after AFTER_S at which the mean of TOTAL
// over WINDOW_S reaches TARGET, as seconds after AFTER_S; none if never.
std::optional<double> recovery_time(const std::vector<double>& total, double interval_s, double after_s,
                                    double target, double window_s);

// each NIC's share of host='s rate between from= and to= is expected= (100/NICs) ± tolerance= (3)
class RateShare final : public LiveAssertion {
 public:
  const char* type() const override;
  const Attrs& attrs() const override;
  reports::Assertion check(const Step& st, LiveContext& ctx) const override;
};

// the clear-impair marked fault= saw loss= of each side's packets lost
// (within 4 standard deviations), on at least min-packets= (1000) a side
class ImpairmentLoss final : public LiveAssertion {
 public:
  const char* type() const override;
  const Attrs& attrs() const override;
  reports::Assertion check(const Step& st, LiveContext& ctx) const override;
};

// host='s nic= carried at most max-share= (2) percent of its rate between
// from= and to=; in the bpf modes, its flows moved (none active on it, at
// least one moved off it)
class NicOut final : public LiveAssertion {
 public:
  const char* type() const override;
  const Attrs& attrs() const override;
  reports::Assertion check(const Step& st, LiveContext& ctx) const override;
};

// every neighbour entry of node= (or of every node and job container) was
// put there by lanes (permanent): none was learned through ARP or ND, so
// the run leaves the kernel-wide neighbour limit to the others
class NeighborsPermanent final : public LiveAssertion {
 public:
  const char* type() const override;
  const Attrs& attrs() const override;
  reports::Assertion check(const Step& st, LiveContext& ctx) const override;
};

// node= holds no per-task route (on a rack switch: of another rack) in its FIB or its BGP RIB
class NoTaskRoutes final : public LiveAssertion {
 public:
  const char* type() const override;
  const Attrs& attrs() const override;
  reports::Assertion check(const Step& st, LiveContext& ctx) const override;
};

// rogue='s announcements of victim='s task IP are rejected and the victim keeps every path
class HijackRejected final : public LiveAssertion {
 public:
  const char* type() const override;
  const Attrs& attrs() const override;
  reports::Assertion check(const Step& st, LiveContext& ctx) const override;
};

}  // namespace lanes::scenarios
