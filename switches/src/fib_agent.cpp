#include "lanes/switches/fib_agent.hpp"

#include <sys/socket.h>

#include <algorithm>

#include "lanes/testbed/log.hpp"
#include "lanes/testbed/rejoin.hpp"

namespace lanes::switches {

using namespace lanes::testbed;

AgentConfig AgentConfig::from_json(const nlohmann::json& j) {
  AgentConfig c;
  c.node = j.value("node", "");
  c.api = j.value("api", c.api);
  if (j.contains("resilient")) {
    c.resilient.buckets = j["resilient"].value("buckets", uint16_t{128});
    c.resilient.idle_timer_s = j["resilient"].value("idle_timer_s", uint32_t{1});
    c.resilient.unbalanced_timer_s = j["resilient"].value("unbalanced_timer_s", uint32_t{0});
  }
  c.originate = j.value("originate", std::vector<std::string>{});
  c.blackhole = j.value("blackhole", std::vector<std::string>{});
  for (const auto& p : j.value("ports", nlohmann::json::array()))
    c.ports.push_back({p.value("ifname", ""), p.value("peer", ""), p.value("match", std::vector<std::string>{}),
                       p.value("gw4", ""), p.value("gw6", ""), p.value("peer_mac", ""),
                       p.value("sessions", std::vector<std::string>{})});
  for (const auto& s : j.value("static", nlohmann::json::array()))
    c.statics.push_back({s.value("dst", ""), s.value("ifname", ""), s.value("gateway", "")});
  c.bfd_socket = j.value("bfd_socket", "");
  if (j.contains("stale_timeout_s")) c.stale_timeout = std::chrono::seconds(j["stale_timeout_s"].get<int>());
  return c;
}

nlohmann::json AgentConfig::to_json() const {
  nlohmann::json ps = nlohmann::json::array(), ss = nlohmann::json::array();
  for (const auto& p : ports)
    ps.push_back({{"ifname", p.ifname}, {"peer", p.peer},         {"match", p.match},      {"gw4", p.gw4},
                  {"gw6", p.gw6},       {"peer_mac", p.peer_mac}, {"sessions", p.sessions}});
  for (const auto& s : statics) ss.push_back({{"dst", s.dst}, {"ifname", s.ifname}, {"gateway", s.gateway}});
  nlohmann::json j = {{"node", node},
                      {"api", api},
                      {"resilient",
                       {{"buckets", resilient.buckets},
                        {"idle_timer_s", resilient.idle_timer_s},
                        {"unbalanced_timer_s", resilient.unbalanced_timer_s}}},
                      {"originate", originate},
                      {"blackhole", blackhole},
                      {"ports", ps},
                      {"static", ss},
                      {"stale_timeout_s", stale_timeout.count()}};
  if (!bfd_socket.empty()) j["bfd_socket"] = bfd_socket;
  return j;
}

// ---- NetlinkFib ----

Status NetlinkFib::add_nexthop(uint32_t id, int oif, const std::string& gateway) {
  auto gw = parse_ip(gateway);
  if (!gw) return os_error(EINVAL, fmt::format("nexthop {}: gateway '{}' is not an address", id, gateway));
  return nl_.add_nexthop(id, oif, *gw, /*replace=*/true, kProtoBgp);
}

Status NetlinkFib::set_group(uint32_t id, const std::vector<std::pair<uint32_t, uint16_t>>& members,
                             const ResilientParams& p, bool replace) {
  return nl_.add_nexthop_group(id, members, p, replace, kProtoBgp);
}

namespace {
// A route to PREFIX (as BGP carries it) going TO.
Result<Route> route_to(const std::string& prefix, RouteTarget to) {
  auto dst = IpNet::parse(prefix);
  if (!dst) return os_error(EINVAL, "'" + prefix + "' is not a prefix");
  return Route{*dst, std::move(to)};
}
}  // namespace

Status NetlinkFib::set_route(const std::string& prefix, uint32_t group) {
  auto r = route_to(prefix, NhId{group});
  if (!r) return r.error();
  r.value().protocol = kProtoBgp;
  r.value().replace = true;
  return nl_.add_route(r.value());
}

Status NetlinkFib::delete_route(const std::string& prefix) {
  auto r = route_to(prefix, std::vector<Via>{});
  if (!r) return r.error();
  r.value().protocol = kProtoBgp;
  return nl_.delete_route(r.value());
}

Status NetlinkFib::add_static(const AgentStatic& s, int oif) {
  auto gw = parse_ip(s.gateway);
  if (!gw) return os_error(EINVAL, fmt::format("static route {}: gateway '{}' is not an address", s.dst, s.gateway));
  auto r = route_to(s.dst, std::vector<Via>{{*gw, oif, 1}});
  if (!r) return r.error();
  r.value().replace = true;
  return nl_.add_route(r.value());
}

Status NetlinkFib::add_neighbor(int oif, const std::string& ifname, const std::string& ip, const std::string& mac) {
  auto a = parse_ip(ip);
  auto m = parse_mac(mac);
  if (!a || !m) return os_error(EINVAL, fmt::format("neighbour on {}: '{}' at '{}' is not an address and a MAC", ifname, ip, mac));
  return nl_.add_neighbor(oif, *a, *m, ifname);
}

Status NetlinkFib::add_blackhole(const std::string& prefix) {
  auto r = route_to(prefix, Blackhole{});
  if (!r) return r.error();
  r.value().replace = true;
  return nl_.add_route(r.value());
}

// ---- FibAgent ----

FibAgent::FibAgent(AgentConfig cfg, KernelFib& kernel)
    : cfg_(std::move(cfg)), k_(kernel), oif_(cfg_.ports.size(), 0), carrier_(cfg_.ports.size(), true),
      bfd_failed_(cfg_.ports.size(), false) {}

void FibAgent::note(const std::system_error& e) {
  log::warn("{}: {}", cfg_.node, e.what());
  errors_.push_back(e.what());
  if (errors_.size() > 50) errors_.erase(errors_.begin());
}

std::optional<int> FibAgent::port_of(const std::string& nh) const {
  std::string a = nh;
  if (a.rfind("::ffff:", 0) == 0) a = a.substr(7);
  for (size_t i = 0; i < cfg_.ports.size(); ++i)
    for (const auto& m : cfg_.ports[i].match)
      if (m == a) return static_cast<int>(i);
  return std::nullopt;
}

Status FibAgent::start() {
  for (size_t i = 0; i < cfg_.ports.size(); ++i) {
    auto idx = k_.ifindex(cfg_.ports[i].ifname);
    if (!idx) return idx.error();
    oif_[i] = idx.value();
  }
  // what an earlier agent left: our nexthops, and routes pointing at groups
  auto nhs = k_.nexthops();
  if (!nhs) return nhs.error();
  std::map<uint32_t, NexthopInfo> by_id;
  for (const auto& n : nhs.value()) {
    if (n.protocol != kProtoBgp) continue;
    by_id[n.id] = n;
    if (!n.is_group) nexthops_up_.insert(n.id);
  }
  for (int family : {AF_INET, AF_INET6}) {
    auto routes = k_.routes(family);
    if (!routes) return routes.error();
    for (const auto& r : routes.value()) {
      if (r.protocol != kProtoBgp || r.nh_id == 0) continue;
      auto it = by_id.find(r.nh_id);
      if (it == by_id.end() || !it->second.is_group) continue;
      Installed inst;
      inst.group = r.nh_id;
      inst.changed = now_();
      for (auto [m, w] : it->second.members) {
        (void)w;
        if (m >= kNexthopIdBase && m < kNexthopIdBase + 2 * cfg_.ports.size())
          inst.ports.insert(static_cast<int>((m - kNexthopIdBase) / 2));
      }
      used_groups_.insert(r.nh_id);
      installed_[r.dst] = inst;
    }
  }
  if (!installed_.empty())
    log::info("{}: found {} routes installed by an earlier agent", cfg_.node, installed_.size());
  for (const auto& s : cfg_.statics) {
    auto idx = k_.ifindex(s.ifname);
    if (!idx) return idx.error();
    if (auto st = k_.add_static(s, idx.value()); !st) note(st.error());
  }
  for (const auto& b : cfg_.blackhole)
    if (auto st = k_.add_blackhole(b); !st) note(st.error());
  return {};
}

uint32_t FibAgent::new_group_id() {
  uint32_t id = kGroupIdBase;
  while (used_groups_.count(id)) ++id;
  used_groups_.insert(id);
  return id;
}

bool FibAgent::ensure_nexthop(int port, bool v6) {
  uint32_t id = nexthop_id(port, v6);
  if (nexthops_up_.count(id)) return true;
  if (!carrier_[port]) return false;
  const auto& p = cfg_.ports[port];
  ++ops_;
  auto st = k_.add_nexthop(id, oif_[port], v6 ? p.gw6 : p.gw4);
  if (!st) {
    // the kernel refuses next hops on a port without carrier
    log::debug("{}: next hop {} via {} not available: {}", cfg_.node, id, p.ifname, st.error().what());
    return false;
  }
  nexthops_up_.insert(id);
  return true;
}

void FibAgent::update(const std::string& prefix, const std::vector<std::string>& nexthops) {
  std::set<int> ports;
  for (const auto& nh : nexthops)
    if (auto p = port_of(nh)) ports.insert(*p);
  if (ports.empty())
    want_.erase(prefix);
  else
    want_[prefix] = ports;
  apply(prefix);
}

void FibAgent::apply(const std::string& prefix) {
  bool v6 = is_v6(prefix);
  std::set<int> target;
  if (auto it = want_.find(prefix); it != want_.end()) target = it->second;
  if (stale_)
    if (auto it = stale_ports_.find(prefix); it != stale_ports_.end()) target.insert(it->second.begin(), it->second.end());
  std::set<int> usable;
  for (int p : target)
    if (!bfd_failed_[p] && ensure_nexthop(p, v6)) usable.insert(p);
  auto it = installed_.find(prefix);
  if (usable.empty()) {
    if (it != installed_.end()) remove(prefix);
    return;
  }
  if (it != installed_.end() && it->second.ports == usable) return;  // nothing to do
  auto members = weighted(usable, v6);
  if (it != installed_.end()) {
    if (pull_flows(prefix, it->second, usable, v6)) {
      it->second.ports = usable;
      it->second.changed = now_();
      return;
    }
    ++ops_;
    rejoins_.erase(prefix);  // members changed again: equal weights end any weighted phase
    auto st = k_.set_group(it->second.group, members, cfg_.resilient, /*replace=*/true);
    if (st) {
      it->second.ports = usable;
      it->second.changed = now_();
      log::debug("{}: {} now has {} next hops", cfg_.node, prefix, usable.size());
      return;
    }
    // the group vanished under us (its last member went with a carrier):
    // build it again below
    log::debug("{}: group {} for {} is gone ({}); recreating", cfg_.node, it->second.group, prefix,
               st.error().what());
    used_groups_.erase(it->second.group);
    installed_.erase(it);
  }
  Installed inst;
  inst.group = new_group_id();
  inst.changed = now_();
  ++ops_;
  if (auto st = k_.set_group(inst.group, members, cfg_.resilient, /*replace=*/true); !st) {
    note(st.error());
    used_groups_.erase(inst.group);
    return;
  }
  ++ops_;
  if (auto st = k_.set_route(prefix, inst.group); !st) {
    note(st.error());
    (void)k_.delete_nexthop(inst.group);
    used_groups_.erase(inst.group);
    return;
  }
  inst.ports = usable;
  installed_[prefix] = inst;
  log::debug("{}: installed {} with {} next hops (group {})", cfg_.node, prefix, usable.size(), inst.group);
}

std::vector<std::pair<uint32_t, uint16_t>> FibAgent::weighted(const std::set<int>& ports, bool v6,
                                                               const std::set<int>& heavy, uint16_t weight) const {
  std::vector<std::pair<uint32_t, uint16_t>> m;
  for (int p : ports) m.emplace_back(nexthop_id(p, v6), heavy.count(p) ? weight : 1);
  return m;
}

// A member returns to a group carrying traffic: its share of the flows
// comes with it (testbed/rejoin.hpp).
bool FibAgent::pull_flows(const std::string& prefix, const Installed& inst, const std::set<int>& usable, bool v6) {
  // a bucket's idle time counts from its group's last change: only a group
  // left alone for one idle timer tells busy buckets from fresh ones; and
  // without an idle timer the kernel moves buckets at once, blind to flows
  const auto& rs = cfg_.resilient;
  if (rs.unbalanced_timer_s == 0 || rs.idle_timer_s == 0 ||
      now_() - inst.changed < std::chrono::seconds(rs.idle_timer_s))
    return false;
  std::set<int> back;
  for (int p : usable)
    if (!inst.ports.count(p)) back.insert(p);
  for (int p : inst.ports)
    if (!usable.count(p)) return false;  // members leave too: a plain replace
  if (back.empty() || back.size() == usable.size()) return false;
  auto b = k_.buckets(inst.group);
  if (!b) return false;
  uint16_t weight = rejoin_weight(b.value(), usable.size(), back.size(), uint64_t{rs.idle_timer_s} * 100);
  if (weight <= 1) return false;
  ++ops_;
  if (auto st = k_.set_group(inst.group, weighted(usable, v6, back, weight), cfg_.resilient, /*replace=*/true); !st) {
    note(st.error());
    return false;
  }
  auto now = now_();
  rejoins_[prefix] = {now, now + rejoin_phase(rs.unbalanced_timer_s), now + rejoin_limit(rs.unbalanced_timer_s), back,
                      weight};
  log::info("{}: {} has {} next hop(s) back: weight {} until the busy buckets they lack have moved", cfg_.node,
            prefix, back.size(), weight);
  return true;
}

void FibAgent::tick(std::chrono::steady_clock::time_point now) {
  for (auto it = rejoins_.begin(); it != rejoins_.end();) {
    auto& r = it->second;
    if (r.due > now) {
      ++it;
      continue;
    }
    auto inst = installed_.find(it->first);
    if (inst == installed_.end()) {
      it = rejoins_.erase(it);
      continue;
    }
    bool v6 = is_v6(it->first);
    const auto& ports = inst->second.ports;
    if (now < r.limit) {
      std::vector<uint32_t> others;
      for (int p : ports)
        if (!r.back.count(p)) others.push_back(nexthop_id(p, v6));
      auto b = k_.buckets(inst->second.group);
      if (b && !rejoin_settled(b.value(), others, ports.size(), r.back.size(), r.weight)) {
        r.due = now + kRejoinRecheck;  // the kernel has not forced the busy buckets over yet
        ++it;
        continue;
      }
    } else {
      log::info("{}: {}: the kernel did not settle the weighted group within {} ms; evening the weights anyway",
                cfg_.node, it->first, std::chrono::duration_cast<std::chrono::milliseconds>(now - r.started).count());
    }
    ++ops_;
    if (auto st = k_.set_group(inst->second.group, weighted(ports, v6), cfg_.resilient, /*replace=*/true); !st)
      note(st.error());
    else
      log::info("{}: {}: weights even again after {} ms", cfg_.node, it->first,
                std::chrono::duration_cast<std::chrono::milliseconds>(now - r.started).count());
    it = rejoins_.erase(it);
  }
}

std::optional<std::chrono::steady_clock::time_point> FibAgent::next_deadline() const {
  std::optional<std::chrono::steady_clock::time_point> next;
  for (const auto& [prefix, r] : rejoins_)
    if (!next || r.due < *next) next = r.due;
  return next;
}

void FibAgent::remove(const std::string& prefix) {
  auto it = installed_.find(prefix);
  if (it == installed_.end()) return;
  ++ops_;
  (void)k_.delete_route(prefix);  // may already be gone with its group
  ++ops_;
  (void)k_.delete_nexthop(it->second.group);
  used_groups_.erase(it->second.group);
  installed_.erase(it);
  rejoins_.erase(prefix);
  log::debug("{}: removed {}", cfg_.node, prefix);
}

std::vector<std::string> FibAgent::bfd_changed(const std::string& ifname, bool usable) {
  for (size_t i = 0; i < cfg_.ports.size(); ++i) {
    if (cfg_.ports[i].ifname != ifname) continue;
    int p = static_cast<int>(i);
    if (bfd_failed_[i] == !usable) return {};
    bfd_failed_[i] = !usable;
    log::info("{}: BFD says the path through {} {}", cfg_.node, ifname, usable ? "works again" : "failed");
    std::vector<std::string> affected;
    for (const auto& [prefix, inst] : installed_)
      if (inst.ports.count(p)) affected.push_back(prefix);
    for (const auto& [prefix, ports] : want_)
      if (ports.count(p)) affected.push_back(prefix);
    for (const auto& [prefix, ports] : stale_ports_)
      if (stale_ && ports.count(p)) affected.push_back(prefix);
    std::sort(affected.begin(), affected.end());
    affected.erase(std::unique(affected.begin(), affected.end()), affected.end());
    for (const auto& prefix : affected) apply(prefix);
    return usable ? std::vector<std::string>{} : cfg_.ports[i].sessions;
  }
  return {};
}

std::vector<std::string> FibAgent::link_changed(const std::string& ifname, bool carrier) {
  for (size_t i = 0; i < cfg_.ports.size(); ++i) {
    if (cfg_.ports[i].ifname != ifname) continue;
    int p = static_cast<int>(i);
    if (carrier_[i] == carrier) return {};
    carrier_[i] = carrier;
    if (!carrier) {
      // the kernel has dropped this port's next hops, and the groups shrank
      nexthops_up_.erase(nexthop_id(p, false));
      nexthops_up_.erase(nexthop_id(p, true));
      std::vector<std::string> emptied;
      for (auto& [prefix, inst] : installed_) {
        if (inst.ports.erase(p)) inst.changed = now_();
        if (inst.ports.empty()) emptied.push_back(prefix);
      }
      for (const auto& prefix : emptied) {
        used_groups_.erase(installed_[prefix].group);
        installed_.erase(prefix);  // the kernel removed the group and its route
      }
      log::info("{}: {} lost carrier", cfg_.node, ifname);
      return cfg_.ports[i].sessions;
    } else {
      log::info("{}: {} has carrier again; restoring its next hops", cfg_.node, ifname);
      // a port taken down (not one that only lost carrier) lost its
      // permanent neighbours: without them the peer is found by ARP and
      // ND, whose entries count against the kernel-wide limit
      if (!cfg_.ports[i].peer_mac.empty())
        for (const auto& gw : {cfg_.ports[i].gw4, cfg_.ports[i].gw6})
          if (!gw.empty())
            if (auto st = k_.add_neighbor(oif_[i], ifname, gw, cfg_.ports[i].peer_mac); !st) note(st.error());
      for (const auto& s : cfg_.statics)
        if (s.ifname == ifname)
          if (auto st = k_.add_static(s, oif_[i]); !st) note(st.error());
      std::vector<std::string> affected;
      for (const auto& [prefix, ports] : want_)
        if (ports.count(p)) affected.push_back(prefix);
      for (const auto& [prefix, ports] : stale_ports_)
        if (stale_ && ports.count(p)) affected.push_back(prefix);
      for (const auto& prefix : affected) apply(prefix);
    }
    return {};
  }
  return {};
}

void FibAgent::set_stale(bool stale) {
  if (stale == stale_) return;
  stale_ = stale;
  if (stale) {
    stale_ports_.clear();
    for (const auto& [prefix, inst] : installed_) stale_ports_[prefix] = inst.ports;
    log::info("{}: gobgpd lost; keeping {} routes as stale", cfg_.node, stale_ports_.size());
  }
}

void FibAgent::reconcile(const std::map<std::string, std::vector<std::string>>& rib) {
  stale_ = false;
  stale_ports_.clear();
  want_.clear();
  for (const auto& [prefix, nhs] : rib) {
    std::set<int> ports;
    for (const auto& nh : nhs)
      if (auto p = port_of(nh)) ports.insert(*p);
    if (!ports.empty()) want_[prefix] = ports;
  }
  std::vector<std::string> gone;
  for (const auto& [prefix, inst] : installed_)
    if (!want_.count(prefix)) gone.push_back(prefix);
  for (const auto& prefix : gone) remove(prefix);
  for (const auto& [prefix, ports] : want_) apply(prefix);
  log::info("{}: reconciled with the RIB: {} routes", cfg_.node, installed_.size());
}

std::vector<std::string> FibAgent::members(const std::string& prefix) const {
  std::vector<std::string> out;
  auto it = installed_.find(prefix);
  if (it == installed_.end()) return out;
  for (int p : it->second.ports) out.push_back(cfg_.ports[p].ifname);
  return out;
}

nlohmann::json FibAgent::state() const {
  nlohmann::json routes = nlohmann::json::object();
  for (const auto& [prefix, inst] : installed_) {
    nlohmann::json m = nlohmann::json::array();
    for (int p : inst.ports)
      m.push_back({{"ifname", cfg_.ports[p].ifname}, {"peer", cfg_.ports[p].peer},
                   {"gateway", is_v6(prefix) ? cfg_.ports[p].gw6 : cfg_.ports[p].gw4}});
    routes[prefix] = {{"group", inst.group}, {"members", m}};
  }
  nlohmann::json failed = nlohmann::json::array();
  for (size_t i = 0; i < cfg_.ports.size(); ++i)
    if (bfd_failed_[i]) failed.push_back(cfg_.ports[i].ifname);
  return {{"node", cfg_.node}, {"stale", stale_},        {"routes", routes},
          {"kernel_ops", ops_}, {"bfd_failed", failed}, {"errors", errors_}};
}

}  // namespace lanes::switches
