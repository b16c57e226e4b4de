#include <sys/socket.h>

#include <fmt/format.h>

#include <set>

#include "live_assertions.hpp"

namespace lanes::scenarios {

const char* HijackRejected::type() const { return "hijack-rejected"; }

const Attrs& HijackRejected::attrs() const {
  static const Attrs a = {{"victim", Kind::host, true}, {"rogue", Kind::host, true}, {"timeout", Kind::duration}};
  return a;
}

reports::Assertion HijackRejected::check(const Step& st, LiveContext& ctx) const {
  reports::Assertion a;
  std::string victim = st.str("victim"), rogue = st.str("rogue");
  a.name = std::string(type()) + " " + rogue + " claims " + victim;
  auto nics_of = [&](const std::string& h) {
    std::set<std::string> out;
    const auto& n = ctx.topo.nodes.at(static_cast<size_t>(ctx.topo.find_node(h)));
    for (const auto& nic : n.nics) out.insert(testbed::injector_session_address(n, nic.index));
    return out;
  };
  auto victim_nh = nics_of(victim), rogue_nh = nics_of(rogue);
  // the paths the victim's injector announces: one per session, or with
  // ADD-PATH one per NIC on each of its sessions
  size_t want = 0;
  {
    const auto& n = ctx.topo.nodes.at(static_cast<size_t>(ctx.topo.find_node(victim)));
    for (const auto& nic : n.nics)
      if (testbed::has_injector_session(n, nic.index))
        want += n.job->vip == testbed::VipMode::add_path ? n.nics.size() : 1;
  }
  // the victim's task IP of its first family (IPv6 for an IPv6-only job)
  int family = ctx.topo.nodes.at(static_cast<size_t>(ctx.topo.find_node(victim))).job->has4() ? AF_INET : AF_INET6;
  TaskGroups groups(ctx.topo, ctx.fabric, family);
  int sw = groups.switch_of(victim);
  uint64_t rejected = 0;
  size_t paths = 0, foreign = 0;
  auto check = [&] {
    rejected = 0;
    if (auto sessions = ctx.fabric.sessions(sw))
      for (const auto& s : sessions.value())
        if (rogue_nh.count(s.neighbor)) rejected += s.rejected;
    paths = foreign = 0;
    if (auto rib = ctx.fabric.rib(sw, family, groups.prefix(victim)))
      for (const auto& r : rib.value()) {
        ++paths;
        foreign += !victim_nh.count(r.neighbor);
      }
    return rejected > 0 && foreign == 0 && paths == want &&
           groups.members({victim})[victim].size() == victim_nh.size();
  };
  a.passed = ctx.eventually(check, st.duration("timeout", std::chrono::milliseconds(15'000)),
                            std::chrono::milliseconds(250));
  a.expected = fmt::format("the rogue's announcements rejected; {} paths for {}, all from {}", want,
                           groups.prefix(victim), victim);
  a.measured = fmt::format("{} rejected from {}; {} paths, {} not from {}", rejected, rogue, paths, foreign, victim);
  return a;
}

}  // namespace lanes::scenarios
