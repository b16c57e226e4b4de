#include <fmt/format.h>

#include "live_assertions.hpp"

namespace lanes::scenarios {

const char* HealthyFlowsKept::type() const { return "healthy-flows-kept"; }

const Attrs& HealthyFlowsKept::attrs() const {
  static const Attrs a = {{"fault", Kind::mark, true}};
  return a;
}

// The fault itself recorded the buckets before and after (runner: nic-down).
reports::Assertion HealthyFlowsKept::check(const Step& st, LiveContext& ctx) const {
  reports::Assertion a;
  std::string f = st.str("fault");
  a.name = std::string(type()) + " " + f;
  a.expected = "no bucket of a healthy NIC moves";
  auto it = ctx.faults.find(f);
  if (it == ctx.faults.end()) {
    a.measured = "the fault recorded no buckets";
    return a;
  }
  const auto& x = it->second;
  a.measured = fmt::format("{} of {} healthy buckets moved", x.value("moved_healthy", 0), x.value("healthy_buckets", 0));
  if (x.value("groups", 1) > 1)
    a.measured += fmt::format(" in {} groups, all shrunk {:.0f} ms after the first NIC went down", x.value("groups", 0),
                              x.value("shrunk_ms", 0.0));
  a.passed = x.value("moved_healthy", 1) == 0 && x.value("healthy_buckets", 0) > 0 && x.value("group_shrunk", false);
  if (!x.value("group_shrunk", false)) a.message = "the group did not drop the failed NIC";
  return a;
}

}  // namespace lanes::scenarios
