#include <fmt/format.h>

#include "faults.hpp"

namespace lanes::scenarios {

const char* NicFlap::type() const { return "nic-flap"; }

const Attrs& NicFlap::attrs() const {
  static const Attrs a = {{"host", Kind::host, true},
                          {"nic", Kind::nic, true},
                          {"period", Kind::duration, true},
                          {"count", Kind::integer},
                          {"mark", Kind::name}};
  return a;
}

void NicFlap::apply(const Step& st, const std::string& label, StepContext& ctx) const {
  std::string host = st.str("host");
  int nic = st.integer("nic");
  auto half = st.duration("period") / 2;
  int count = st.integer("count", 3);
  for (int i = 0; i < count; ++i) {
    ctx.set_nics({host}, nic, false);
    ctx.mark(fmt::format("{} {}", label, i + 1), "fault");
    if (!ctx.sleep(half)) throw StepError("interrupted");
    ctx.set_nics({host}, nic, true);
    if (!ctx.sleep(half)) throw StepError("interrupted");
  }
  ctx.say(fmt::format("fault: {} nic{} flapped {} times, period {} ms", host, nic, count, st.duration("period").count()));
}

}  // namespace lanes::scenarios
