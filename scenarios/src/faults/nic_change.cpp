#include <fmt/format.h>
#include <sys/socket.h>

#include <set>

#include "faults.hpp"

namespace lanes::scenarios {

using nlohmann::json;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

const char* NicChange::type() const { return down_ ? "nic-down" : "nic-up"; }

const Attrs& NicChange::attrs() const {
  static const Attrs a = {{"host", Kind::host}, {"rack", Kind::rack}, {"nic", Kind::nic, true}, {"mark", Kind::name}};
  return a;
}

BucketMoves bucket_moves(const std::vector<uint32_t>& before, const std::vector<uint32_t>& after) {
  BucketMoves m;
  m.buckets = static_cast<int>(before.size());
  std::set<uint32_t> kept(after.begin(), after.end()), failed;
  for (auto b : before)
    if (!kept.count(b)) failed.insert(b);
  for (size_t i = 0; i < before.size() && i < after.size(); ++i)
    if (!failed.count(before[i])) {
      ++m.healthy;
      m.moved_healthy += after[i] != before[i];
    }
  return m;
}

json watch_groups_shrink(StepContext& ctx, const std::vector<std::string>& hosts, const std::function<void()>& fault,
                         milliseconds limit) {
  // the task groups of each family the hosts have a group of before the
  // fault (a single-family job has none of the other); with none at all,
  // the IPv6 one's, whose lack the record then shows
  std::vector<TaskGroups> groups;
  std::vector<std::map<std::string, size_t>> members;
  for (int family : {AF_INET, AF_INET6}) {
    TaskGroups g(ctx.topo(), ctx.fabric(), family);
    std::map<std::string, size_t> m;
    size_t any = 0;
    for (const auto& [h, mm] : g.members(hosts)) any += (m[h] = mm.size());
    if (any == 0 && !(family == AF_INET6 && groups.empty())) continue;
    groups.push_back(g);
    members.push_back(std::move(m));
  }
  // the resilient groups' buckets (lanes' FIB agent), and the port each
  // of a set of flows leaves by (any stack: the kernel's own forwarding)
  std::vector<std::map<std::string, std::vector<uint32_t>>> before, flows_before;
  for (auto& g : groups) {
    auto b = g.buckets(hosts);
    if (!b) throw StepError(b.error().what());
    before.push_back(std::move(b).value());
    auto fl = g.flow_ports(hosts);
    if (!fl) throw StepError(fl.error().what());
    flows_before.push_back(std::move(fl).value());
  }
  auto at = Clock::now();
  fault();
  double applied_ms = std::chrono::duration<double, std::milli>(Clock::now() - at).count();
  // every group one member fewer, then each group's buckets compared
  auto shrunk_all = [&] {
    for (size_t f = 0; f < groups.size(); ++f)
      for (const auto& [h, m] : groups[f].members(hosts))
        if (m.size() + 1 != members[f][h]) return false;
    return true;
  };
  // a rack's groups are looked at every 50 ms: each look dumps the switch's
  // routes and nexthops, which holds the lock the kernel's own removal of
  // the next hops needs
  bool shrunk = ctx.eventually(shrunk_all, limit, milliseconds(hosts.size() == 1 ? 5 : 50));
  double shrunk_ms = std::chrono::duration<double, std::milli>(Clock::now() - at).count();
  BucketMoves all, flows;
  for (size_t f = 0; f < groups.size(); ++f) {
    auto now = groups[f].buckets(hosts);
    if (!now) throw StepError(now.error().what());
    auto flows_now = groups[f].flow_ports(hosts);
    if (!flows_now) throw StepError(flows_now.error().what());
    for (const auto& h : hosts) {
      auto m = bucket_moves(before[f][h], now.value()[h]);
      all.buckets += m.buckets;
      all.healthy += m.healthy;
      all.moved_healthy += m.moved_healthy;
      // a flow is healthy when the port it left by before is still used
      auto fm = bucket_moves(flows_before[f][h], flows_now.value()[h]);
      flows.buckets += fm.buckets;
      flows.healthy += fm.healthy;
      flows.moved_healthy += fm.moved_healthy;
    }
  }
  json rec = {{"groups", hosts.size() * groups.size()},
              {"buckets", all.buckets},
              {"healthy_buckets", all.healthy},
              {"moved_healthy", all.moved_healthy},
              {"flows", flows.buckets},
              {"healthy_flows", flows.healthy},
              {"moved_flows", flows.moved_healthy},
              {"group_shrunk", shrunk},
              {"applied_ms", applied_ms}};
  if (shrunk) rec["shrunk_ms"] = shrunk_ms;
  if (hosts.size() == 1) rec["members_after"] = groups[0].members(hosts)[hosts[0]].size();
  return rec;
}

void NicChange::apply(const Step& st, const std::string& label, StepContext& ctx) const {
  auto hosts = hosts_of(st, ctx.topo());
  int nic = st.integer("nic");
  auto say = [&] {
    ctx.mark(label, "fault");
    ctx.say(fmt::format("fault: {} nic{} {}",
                        st.has("host") ? st.str("host") : fmt::format("{} hosts of rack {}", hosts.size(), st.str("rack")),
                        nic, down_ ? "down" : "up"));
  };
  if (!down_) {
    ctx.set_nics(hosts, nic, true);
    say();
    return;
  }
  // the switch drops the NIC's next hop with its port's carrier
  json rec = watch_groups_shrink(
      ctx, hosts,
      [&] {
        ctx.set_nics(hosts, nic, false);
        say();
      },
      milliseconds(5000 + 500 * static_cast<int64_t>(hosts.size())));
  ctx.record_fault(label, rec);
  bool shrunk = rec["group_shrunk"].get<bool>();
  if (hosts.size() > 1)
    ctx.say(fmt::format("{} {} groups shrunk {} (the {} NICs went down within {:.0f} ms)", shrunk ? "✓" : "✗",
                        hosts.size(),
                        shrunk ? fmt::format("{:.0f} ms after the first NIC", rec["shrunk_ms"].get<double>())
                               : "not within the wait",
                        hosts.size(), rec["applied_ms"].get<double>()));
}

}  // namespace lanes::scenarios
