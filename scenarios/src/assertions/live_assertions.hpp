#pragma once
// The live assertion types (one .cpp each), for the registry and the tests.

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
