#include "live_assertions.hpp"

namespace lanes::scenarios {

const std::vector<const LiveAssertion*>& live_assertions() {
  static const MembersAssertion members;
  static const HealthyFlowsKept healthy;
  static const RateRatio rate;
  static const NoTaskRoutes containment;
  static const HijackRejected hijack;
  static const std::vector<const LiveAssertion*> all = {&rate, &healthy, &members, &containment, &hijack};
  return all;
}

const LiveAssertion* find_live_assertion(const std::string& type) {
  for (const auto* a : live_assertions())
    if (type == a->type()) return a;
  return nullptr;
}

}  // namespace lanes::scenarios
