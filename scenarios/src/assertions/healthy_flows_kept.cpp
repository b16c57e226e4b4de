#include <fmt/format.h>

#include "live_assertions.hpp"

namespace lanes::scenarios {

const char* HealthyFlowsKept::type() const { return "healthy-flows-kept"; }

const Attrs& HealthyFlowsKept::attrs() const {
  static const Attrs a = {{"fault", Kind::mark, true}};
  return a;
}

// The fault itself recorded, before and after (faults/nic_change.cpp), the
// port each of a set of flows leaves the switch by, as the switch's kernel
// forwards them: a judgement of behaviour, whatever stack programmed the
// switch. The resilient groups' buckets, where there are any, are shown
// beside it.
reports::Assertion HealthyFlowsKept::check(const Step& st, LiveContext& ctx) const {
  reports::Assertion a;
  std::string f = st.str("fault");
  a.name = std::string(type()) + " " + f;
  a.expected = "no flow on a healthy NIC changes NIC";
  auto it = ctx.faults.find(f);
  if (it == ctx.faults.end()) {
    a.measured = "the fault recorded no flows";
    return a;
  }
  const auto& x = it->second;
  a.measured = fmt::format("{} of {} flows on healthy NICs changed NIC", x.value("moved_flows", 0),
                           x.value("healthy_flows", 0));
  if (x.value("buckets", 0) > 0)
    a.measured += fmt::format(" ({} of {} healthy buckets moved)", x.value("moved_healthy", 0),
                              x.value("healthy_buckets", 0));
  else
    a.measured += " (no resilient group)";
  if (x.value("groups", 1) > 1)
    a.measured += fmt::format(" in {} groups, all shrunk {:.0f} ms after the first NIC went down", x.value("groups", 0),
                              x.value("shrunk_ms", 0.0));
  a.passed = x.value("moved_flows", 1) == 0 && x.value("healthy_flows", 0) > 0 && x.value("group_shrunk", false);
  if (!x.value("group_shrunk", false)) a.message = "the switch did not drop the failed NIC";
  return a;
}

}  // namespace lanes::scenarios
