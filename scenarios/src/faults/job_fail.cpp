#include "faults.hpp"

namespace lanes::scenarios {

const char* JobFail::type() const { return "job-fail"; }

const Attrs& JobFail::attrs() const {
  static const Attrs a = {{"workload", Kind::workload, true},
                          {"after-step", Kind::integer},
                          {"restart-after", Kind::duration},
                          {"onto-spare", Kind::boolean},
                          {"host", Kind::host},
                          {"mark", Kind::name}};
  return a;
}

void JobFail::apply(const Step& st, const std::string& label, StepContext& ctx) const {
  ctx.fail_workload(st.str("workload"), {static_cast<int>(st.integer("after-step", -1)),
                                        st.duration("restart-after", std::chrono::milliseconds(1000)), label,
                                        st.flag("onto-spare", false), st.str("host")});
}

}  // namespace lanes::scenarios
