#include "lanes/testbed/fabric.hpp"

#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "lanes/testbed/interrupt.hpp"
#include "lanes/testbed/log.hpp"
#include "lanes/testbed/neighbors.hpp"
#include "lanes/testbed/process.hpp"

namespace lanes::testbed {
namespace {

using Clock = std::chrono::steady_clock;
std::chrono::microseconds since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t);
}

// Interface indexes lanes assigns in its namespaces start here, above the
// fallback tunnel devices the kernel may create in a new namespace.
constexpr int kFirstIfindex = 100;      // side A of each link
constexpr int kFirstIfindexB = 100000;  // side B: never the index of its peer

}  // namespace

std::vector<Sysctl> base_sysctls() {
  return {
      // addresses are usable at once and survive a link going down
      {"net.ipv6.conf.all.accept_dad", "0"},
      {"net.ipv6.conf.default.accept_dad", "0"},
      {"net.ipv6.conf.all.keep_addr_on_down", "1"},
      {"net.ipv6.conf.default.keep_addr_on_down", "1"},
      {"net.ipv6.conf.all.accept_ra", "0"},
      {"net.ipv6.conf.default.accept_ra", "0"},
      {"net.ipv6.conf.default.router_solicitations", "0"},
      {"net.ipv4.conf.all.rp_filter", "0"},
      {"net.ipv4.conf.default.rp_filter", "0"},
  };
}

std::vector<Sysctl> multipath_sysctls() {
  return {
      // L4 hashing for multipath routes, and no next hop over a dead link
      {"net.ipv4.fib_multipath_hash_policy", "1"},
      {"net.ipv6.fib_multipath_hash_policy", "1"},
      {"net.ipv4.conf.all.ignore_routes_with_linkdown", "1"},
      {"net.ipv6.conf.all.ignore_routes_with_linkdown", "1"},
  };
}

std::vector<Sysctl> node_sysctls(NodeKind kind) {
  auto s = base_sysctls();
  if (kind != NodeKind::server) {
    s.insert(s.end(), {{"net.ipv4.ip_forward", "1"},
                       {"net.ipv6.conf.all.forwarding", "1"},
                       {"net.ipv4.fib_multipath_use_neigh", "1"}});
    auto m = multipath_sysctls();
    s.insert(s.end(), m.begin(), m.end());
  }
  return s;
}

bool Shard::local(int node) const {
  return !placement || placement->machine_of.at(static_cast<size_t>(node)) == machine;
}

uint32_t Shard::tunnel_mtu() const {
  bool v6 = !underlay.empty() && underlay.front().is_v6();
  uint32_t overhead = v6 ? kVxlanOverhead6 : kVxlanOverhead4;
  uint32_t room = underlay_mtu > overhead ? underlay_mtu - overhead : 0;
  return std::min<uint32_t>(1500, room);
}

FabricPlan fabric_plan(const Topology& topo, const std::string& run_id, const Shard* shard) {
  FabricPlan p;
  auto ns = [&](int node) { return RunRegistry::netns_name(run_id, topo.nodes.at(static_cast<size_t>(node)).name); };
  auto here = [&](int node) { return !shard || shard->local(node); };
  // the VNI of each link between machines (partition.hpp)
  std::map<int, const CrossLink*> crossing;
  if (shard && shard->placement)
    for (const auto& c : shard->placement->cross) crossing[c.link] = &c;
  // interface indexes chosen here, in link order on each node: side A from
  // kFirstIfindex up, side B from kFirstIfindexB up, so the two ends of a
  // link never share one. A veth whose peer has its own index has its
  // carrier changes handled as non-urgent by the kernel (linkwatch), up to
  // a second late: a switch port would see its host NIC go or return that
  // much after the host does, and drop what it sends meanwhile.
  std::vector<int> next_a(topo.nodes.size(), kFirstIfindex), next_b(topo.nodes.size(), kFirstIfindexB);
  std::vector<std::pair<int, int>> index(topo.links.size());
  for (size_t k = 0; k < topo.links.size(); ++k) {
    const Link& l = topo.links[k];
    index[k] = {next_a[static_cast<size_t>(l.a.node)]++, next_b[static_cast<size_t>(l.b.node)]++};
    bool a_here = here(l.a.node), b_here = here(l.b.node);
    if (a_here) p.ifindex[{l.a.node, l.a.ifname}] = index[k].first;
    if (b_here) p.ifindex[{l.b.node, l.b.ifname}] = index[k].second;
    if (a_here != b_here) {
      // this machine's end of a tunnel; the other machine makes the other
      const CrossLink& c = *crossing.at(static_cast<int>(k));
      int far = a_here ? c.machine_b : c.machine_a;
      const Endpoint& ep = a_here ? l.a : l.b;
      p.links.add(ns(ep.node), change::Vxlan{ep.ifname, a_here ? index[k].first : index[k].second,
                                             c.vni + vni_offset(run_id),
                                              shard->underlay.at(static_cast<size_t>(shard->machine)),
                                              shard->underlay.at(static_cast<size_t>(far)), shard->port,
                                              shard->tunnel_mtu(), link_mac(k, a_here ? 0 : 1)});
      continue;
    }
    if (!a_here) continue;
    // side B placed directly in its namespace; only side A can come up in
    // the creating request, so B is brought up from its own namespace
    p.links.add(ns(l.a.node), change::Veth{l.a.ifname, index[k].first, l.b.ifname, index[k].second, ns(l.b.node),
                                           link_mac(k, 0), link_mac(k, 1)});
    // a server's end is a TCP endpoint (kEndpointGsoMaxSize)
    p.links.add(ns(l.b.node), change::LinkUp{index[k].second, l.b.ifname,
                                             l.kind == LinkKind::server ? kEndpointGsoMaxSize : 0});
  }
  for (size_t k = 0; k < topo.links.size(); ++k) {
    const Link& l = topo.links[k];
    for (auto [ep, idx] : {std::pair{&l.a, index[k].first}, std::pair{&l.b, index[k].second}}) {
      if (!here(ep->node)) continue;
      p.addresses.add(ns(ep->node), change::Address{idx, ep->ifname, ep->addr4});
      p.addresses.add(ns(ep->node), change::Address{idx, ep->ifname, ep->addr6});
    }
  }
  // permanent neighbours on both ends (neighbors.hpp): no ARP or ND
  for (const auto& e : link_neighbors(topo))
    if (here(e.node))
      p.addresses.add(ns(e.node), change::Neighbor{p.ifindex.at({e.node, e.ifname}), e.ifname, e.ip, e.mac});
  // line rate: TBF on both ends of shaped links
  for (size_t k = 0; k < topo.links.size(); ++k) {
    const Link& l = topo.links[k];
    if (l.rate_bps == 0) continue;
    if (here(l.a.node)) p.qdiscs.add(ns(l.a.node), change::Tbf{index[k].first, l.a.ifname, l.rate_bps});
    if (here(l.b.node)) p.qdiscs.add(ns(l.b.node), change::Tbf{index[k].second, l.b.ifname, l.rate_bps});
  }
  // impairments on both ends: netem inside their TBF, lanes' program on their egress before it
  for (size_t k = 0; k < topo.links.size(); ++k) {
    const Link& l = topo.links[k];
    if (!l.impair.any()) continue;
    const ImpairEngine e = topo.impair_engine;
    if (here(l.a.node)) p.qdiscs.add(ns(l.a.node), change::Impair{index[k].first, l.a.ifname, l.impair, e});
    if (here(l.b.node)) p.qdiscs.add(ns(l.b.node), change::Impair{index[k].second, l.b.ifname, l.impair, e});
  }
  // servers: default routes through the switch they hang off
  for (size_t k = 0; k < topo.links.size(); ++k) {
    const Link& l = topo.links[k];
    if (l.kind != LinkKind::server || !here(l.b.node)) continue;
    for (IpAddr gw : {IpAddr(l.a.addr4.addr), IpAddr(l.a.addr6.addr)}) {
      Route r{IpNet::default_route(family_of(gw)), std::vector<Via>{{gw, index[k].second, 1}}};
      p.routes.add(ns(l.b.node), change::AddRoute{r});
    }
  }
  // a job whose egress is MPTCP makes a subflow per NIC to the servers it
  // talks to: they accept as many (the kernel's default takes 2 more)
  bool mptcp = topo.first_on_egress(EgressMode::mptcp) != nullptr;
  for (size_t n = 0; mptcp && n < topo.nodes.size(); ++n)
    if (topo.nodes[n].kind == NodeKind::server && here(static_cast<int>(n)))
      p.routes.add(ns(static_cast<int>(n)), change::MptcpLimitsSet{{kMptcpMaxSubflows, 0}});
  return p;
}

struct Fabric::Impl {
  Topology topo;
  std::string run_id;
  std::vector<Netns> ns;
  std::vector<Netlink> nl;
  std::map<std::pair<int, std::string>, int> ifindex;
  BuildTimings timings;
};

Fabric::Fabric(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Fabric::Fabric(Fabric&&) noexcept = default;
Fabric& Fabric::operator=(Fabric&&) noexcept = default;
Fabric::~Fabric() = default;

const Topology& Fabric::topology() const { return impl_->topo; }
const std::string& Fabric::run_id() const { return impl_->run_id; }
Netns& Fabric::netns(int node) { return impl_->ns.at(static_cast<size_t>(node)); }
Netlink& Fabric::netlink(int node) { return impl_->nl.at(static_cast<size_t>(node)); }
const BuildTimings& Fabric::timings() const { return impl_->timings; }
std::string Fabric::netns_name(int node) const {
  return RunRegistry::netns_name(impl_->run_id, impl_->topo.nodes.at(static_cast<size_t>(node)).name);
}

Result<int> Fabric::ifindex(int node, const std::string& ifname) {
  auto it = impl_->ifindex.find({node, ifname});
  if (it != impl_->ifindex.end()) return it->second;
  auto r = netlink(node).ifindex(ifname);
  if (r) impl_->ifindex[{node, ifname}] = r.value();
  return r;
}

Result<Fabric> Fabric::build(const Topology& topo, const std::string& run_id, const Shard* shard) {
  auto impl = std::make_unique<Impl>();
  impl->topo = topo;
  impl->run_id = run_id;
  auto t0 = Clock::now();
  auto fail = [&](const std::system_error& e) -> Result<Fabric> {
    log::error("building run {} failed: {}; removing what was built", run_id, e.what());
    impl->nl.clear();
    impl->ns.clear();
    auto rep = teardown_run(run_id, {}, "");
    for (const auto& err : rep.errors) log::error("cleanup: {}", err);
    return e;
  };

  // 1. a namespace per node, with its sysctls, and a netlink socket in it
  for (size_t i = 0; i < topo.nodes.size(); ++i) {
    const Node& node = topo.nodes[i];
    if (interrupted()) return fail(os_error(EINTR, "building run " + run_id));
    if (shard && !shard->local(static_cast<int>(i))) {  // another machine's
      impl->ns.emplace_back();
      impl->nl.emplace_back();
      continue;
    }
    std::string name = RunRegistry::netns_name(run_id, node.name);
    auto ns = Netns::create(name, node_sysctls(node.kind));
    if (!ns) return fail(ns.error());
    auto nl = Netlink::open_in(ns.value().fd(), name);
    if (!nl) return fail(nl.error());
    if (auto st = nl.value().set_link_up(1, true, "lo"); !st) return fail(st.error());
    impl->ns.push_back(std::move(ns).value());
    impl->nl.push_back(std::move(nl).value());
  }
  impl->timings.namespaces = since(t0);

  // 2.-5. links, addresses and neighbours, qdiscs, the servers' routes: the
  // fabric's plan, stage by stage
  FabricPlan plan = fabric_plan(topo, run_id, shard);
  // the tunnels' underlay: the machine's own namespace
  Netlink underlay;
  if (shard && shard->placement && !shard->placement->cross.empty()) {
    auto u = shard->underlay_ns_fd >= 0 ? Netlink::open_in(shard->underlay_ns_fd, "the machine's network")
                                        : Netlink::open_here("the machine's network");
    if (!u) return fail(u.error());
    underlay = std::move(u).value();
  }
  std::map<std::string, size_t> node_of;
  for (size_t i = 0; i < topo.nodes.size(); ++i) node_of[RunRegistry::netns_name(run_id, topo.nodes[i].name)] = i;
  PlanTargets targets{[&](const std::string& ns) -> Netlink* {
                        auto it = node_of.find(ns);
                        return it == node_of.end() ? nullptr : &impl->nl[it->second];
                      },
                      [&](const std::string& ns) {
                        auto it = node_of.find(ns);
                        return it == node_of.end() ? -1 : impl->ns[it->second].fd();
                      },
                      [&]() -> Netlink* { return &underlay; }};
  struct Stage {
    const KernelPlan& changes;
    std::chrono::microseconds* took;
  };
  std::chrono::microseconds routes{0};
  for (const Stage& stage : {Stage{plan.links, &impl->timings.links}, Stage{plan.addresses, &impl->timings.addresses},
                             Stage{plan.qdiscs, &impl->timings.qdiscs}, Stage{plan.routes, &routes}}) {
    auto t = Clock::now();
    if (auto st = apply(stage.changes, targets, [] { return interrupted(); }); !st) return fail(st.error());
    *stage.took = since(t);
  }
  impl->ifindex = std::move(plan.ifindex);
  impl->timings.total = since(t0);
  log::debug("built run {}: {} namespaces in {} ms, {} links in {} ms, addresses {} ms, qdiscs {} ms",
             run_id, topo.nodes.size(), impl->timings.namespaces.count() / 1000, topo.links.size(),
             impl->timings.links.count() / 1000, impl->timings.addresses.count() / 1000,
             impl->timings.qdiscs.count() / 1000);
  return Fabric(std::move(impl));
}

Result<Fabric> Fabric::attach(const Topology& topo, const std::string& run_id) {
  auto impl = std::make_unique<Impl>();
  impl->topo = topo;
  impl->run_id = run_id;
  for (const auto& node : topo.nodes) {
    std::string name = RunRegistry::netns_name(run_id, node.name);
    auto ns = Netns::open(name);
    if (!ns) return ns.error();
    auto nl = Netlink::open_in(ns.value().fd(), name);
    if (!nl) return nl.error();
    impl->ns.push_back(std::move(ns).value());
    impl->nl.push_back(std::move(nl).value());
  }
  return Fabric(std::move(impl));
}

TeardownReport teardown_run(const std::string& run_id, const std::vector<DaemonRecord>& daemons,
                            const std::string& state_dir) {
  TeardownReport rep;
  // the supervisor first: it stops its daemons in order, so they can say
  // goodbye. Only a process whose command line names this run and state
  // dir is taken for it (a recorded pid alone proves nothing).
  if (!state_dir.empty()) {
    std::vector<std::pair<pid_t, uint64_t>> sups;
    for (const auto& d : daemons)
      if (d.name == "supervisor" && is_supervisor_of(d.pid, d.start_time, run_id, state_dir))
        sups.emplace_back(d.pid, d.start_time);
    for (const auto& s : find_supervisors(run_id, state_dir))
      if (std::find(sups.begin(), sups.end(), s) == sups.end()) sups.push_back(s);
    for (auto [pid, st] : sups)
      if (stop_pid(pid, st, std::chrono::milliseconds(5000))) {
        ++rep.processes;
        log::debug("stopped the supervisor of run {} (pid {})", run_id, pid);
      }
  }
  auto names = list_netns(RunRegistry::netns_prefix(run_id));
  // anything else still running inside the run's namespaces was started
  // there by lanes (lanes exec, workloads): stop it by pid
  std::vector<std::pair<pid_t, uint64_t>> stray;
  for (const auto& n : names) {
    auto ns = Netns::open(n);
    if (!ns) continue;
    for (pid_t p : pids_in_netns(ns.value().inode())) stray.emplace_back(p, process_start_time(p));
  }
  for (auto [p, st] : stray) {
    ::kill(p, SIGTERM);
  }
  for (auto [p, st] : stray) {
    if (stop_pid(p, st, std::chrono::milliseconds(1000))) {
      ++rep.processes;
      log::debug("stopped pid {} left in run {}", p, run_id);
    }
  }
  for (const auto& n : names) {
    if (auto st = remove_netns(n); !st)
      rep.errors.push_back(st.error().what());
    else
      ++rep.namespaces;
  }
  return rep;
}

}  // namespace lanes::testbed
