#include <fmt/format.h>

#include "live_assertions.hpp"

namespace lanes::scenarios {

std::vector<std::string> hosts_of(const Step& st, const testbed::Topology& topo) {
  if (st.has("host")) return {st.str("host")};
  std::vector<std::string> out;
  for (const auto& r : topo.racks)
    if (r.name == st.str("rack"))
      for (int h : r.hosts)
        if (topo.nodes[static_cast<size_t>(h)].job) out.push_back(topo.nodes[static_cast<size_t>(h)].name);
  return out;
}

const char* MembersAssertion::type() const { return "members"; }

const Attrs& MembersAssertion::attrs() const {
  static const Attrs a = {
      {"host", Kind::host}, {"rack", Kind::rack}, {"count", Kind::integer, true}, {"timeout", Kind::duration},
      {"family", Kind::choice, false, "ipv4|ipv6"}};
  return a;
}

reports::Assertion MembersAssertion::check(const Step& st, LiveContext& ctx) const {
  reports::Assertion a;
  a.name = type();
  auto hosts = hosts_of(st, ctx.topo);
  size_t count = static_cast<size_t>(st.integer("count"));
  TaskGroups groups(ctx.topo, ctx.fabric, !st.has("family") ? 0 : st.str("family") == "ipv6" ? AF_INET6 : AF_INET);
  a.passed = ctx.eventually([&] { return groups.all_have(hosts, count); },
                            st.duration("timeout", std::chrono::milliseconds(10'000)), std::chrono::milliseconds(100));
  auto seen = groups.members(hosts);
  if (hosts.size() == 1) {
    a.name += " " + hosts[0];
    a.expected = fmt::format("{} next hops for {}", count, groups.prefix(hosts[0]));
    a.measured = std::to_string(seen[hosts[0]].size());
  } else {
    size_t at = 0;
    for (const auto& [h, m] : seen) at += m.size() == count;
    a.name += " rack " + st.str("rack");
    a.expected = fmt::format("{} next hops for each of the {} task IPs", count, hosts.size());
    a.measured = fmt::format("{} of {} groups", at, hosts.size());
  }
  return a;
}

}  // namespace lanes::scenarios
