#include <fmt/format.h>

#include "faults.hpp"

namespace lanes::scenarios {

const char* RogueAnnounce::type() const { return "rogue-announce"; }

const Attrs& RogueAnnounce::attrs() const {
  static const Attrs a = {{"host", Kind::host, true}, {"victim", Kind::host, true}, {"mark", Kind::name}};
  return a;
}

// HOST's job claims VICTIM's task IP: the address on its container and in
// its injector's configuration; the injector restarts with it and announces
// it to the rack switch.
void RogueAnnounce::apply(const Step& st, const std::string& label, StepContext& ctx) const {
  std::string host = st.str("host"), victim = st.str("victim");
  ctx.claim_task_ips(host, victim);
  kill_and_await_restart(ctx, host, "vip-injector", label);
  const auto& topo = ctx.topo();
  const auto& vj = *topo.nodes.at(static_cast<size_t>(topo.find_node(victim))).job;
  ctx.say(fmt::format("fault: {}'s job now announces {}'s task IP {}", host, victim,
                      vj.has4() ? vj.task_ip4.to_string() : vj.task_ip6.to_string()));
}

}  // namespace lanes::scenarios
