#include <fmt/format.h>

#include <algorithm>

#include "faults.hpp"

namespace lanes::scenarios {

const char* SilentDrop::type() const { return drop_ ? "silent-drop" : "clear-drop"; }

const Attrs& SilentDrop::attrs() const {
  static const Attrs a = {{"host", Kind::host, true}, {"nic", Kind::nic, true}, {"mark", Kind::name},
                          {"watch", Kind::boolean}};
  return a;
}

// On the switch port: the host's NIC keeps carrier, every frame is lost in
// both directions (netdev hooks, before and after the switch's routing; the
// host's BPF fast path cannot bypass them).
void SilentDrop::apply(const Step& st, const std::string& label, StepContext& ctx) const {
  const auto& topo = ctx.topo();
  std::string host = st.str("host");
  int nic = st.integer("nic");
  const auto& h = topo.nodes.at(static_cast<size_t>(topo.find_node(host)));
  const auto& l = topo.links.at(static_cast<size_t>(h.nics.at(static_cast<size_t>(nic)).link));
  std::string table = fmt::format("lanes_drop_{}_{}", host, nic);
  std::replace(table.begin(), table.end(), '-', '_');
  std::string sw = topo.nodes.at(static_cast<size_t>(l.a.node)).name;
  int ns = ctx.node_ns(sw);
  auto fault = [&] {
    if (drop_)
      ctx.nft(ns,
              fmt::format("add table netdev {0} ; add chain netdev {0} in {{ type filter hook ingress device \"{1}\" "
                          "priority -500 ; policy drop ; }} ; add chain netdev {0} out {{ type filter hook egress "
                          "device \"{1}\" priority -500 ; policy drop ; }}",
                          table, l.a.ifname),
              sw);
    else
      ctx.nft(ns, fmt::format("delete table netdev {}", table), sw);
    ctx.mark(label, "fault");
    ctx.say(fmt::format("fault: {} on {}:{} (towards {} nic{})", type(), sw, l.a.ifname, host, nic));
  };
  if (!drop_ || !st.flag("watch", false)) return fault();
  // watch="true": the groups are read before the drop and once BFD (or the
  // hold timer) has taken the NIC out, and compared (healthy-flows-kept)
  ctx.record_fault(label, watch_groups_shrink(ctx, {host}, fault, std::chrono::milliseconds(15'000)));
}

}  // namespace lanes::scenarios
