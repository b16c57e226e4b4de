#include "lanes/core/testbed.hpp"

#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "lanes/core/interrupt.hpp"
#include "lanes/core/log.hpp"
#include "lanes/core/neighbors.hpp"
#include "lanes/core/process.hpp"

namespace lanes::testbed {
namespace {

using Clock = std::chrono::steady_clock;
std::chrono::microseconds since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t);
}

// Interface indexes lanes assigns in its namespaces start here, above the
// fallback tunnel devices the kernel may create in a new namespace.
constexpr int kFirstIfindex = 100;

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

struct Testbed::Impl {
  Topology topo;
  std::string run_id;
  std::vector<Netns> ns;
  std::vector<Netlink> nl;
  std::map<std::pair<int, std::string>, int> ifindex;
  BuildTimings timings;
};

Testbed::Testbed(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Testbed::Testbed(Testbed&&) noexcept = default;
Testbed& Testbed::operator=(Testbed&&) noexcept = default;
Testbed::~Testbed() = default;

const Topology& Testbed::topology() const { return impl_->topo; }
const std::string& Testbed::run_id() const { return impl_->run_id; }
Netns& Testbed::netns(int node) { return impl_->ns.at(static_cast<size_t>(node)); }
Netlink& Testbed::netlink(int node) { return impl_->nl.at(static_cast<size_t>(node)); }
const BuildTimings& Testbed::timings() const { return impl_->timings; }
std::string Testbed::netns_name(int node) const {
  return RunRegistry::netns_name(impl_->run_id, impl_->topo.nodes.at(static_cast<size_t>(node)).name);
}

Result<int> Testbed::ifindex(int node, const std::string& ifname) {
  auto it = impl_->ifindex.find({node, ifname});
  if (it != impl_->ifindex.end()) return it->second;
  auto r = netlink(node).ifindex(ifname);
  if (r) impl_->ifindex[{node, ifname}] = r.value();
  return r;
}

Result<Testbed> Testbed::build(const Topology& topo, const std::string& run_id) {
  auto impl = std::make_unique<Impl>();
  impl->topo = topo;
  impl->run_id = run_id;
  auto t0 = Clock::now();
  auto fail = [&](const std::system_error& e) -> Result<Testbed> {
    log::error("building run {} failed: {}; removing what was built", run_id, e.what());
    impl->nl.clear();
    impl->ns.clear();
    auto rep = teardown_run(run_id, {}, "");
    for (const auto& err : rep.errors) log::error("cleanup: {}", err);
    return e;
  };

  // 1. a namespace per node, with its sysctls, and a netlink socket in it
  for (const auto& node : topo.nodes) {
    if (interrupted()) return fail(os_error(EINTR, "building run " + run_id));
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

  // 2. a veth pair per link, created from side A with side B placed directly
  // in its namespace, both up, with interface indexes chosen here
  auto t1 = Clock::now();
  std::vector<int> next_index(topo.nodes.size(), kFirstIfindex);
  std::vector<std::pair<int, int>> link_index(topo.links.size());
  for (size_t k = 0; k < topo.links.size(); ++k) {
    const Link& l = topo.links[k];
    if (interrupted()) return fail(os_error(EINTR, "building run " + run_id));
    int ia = next_index[l.a.node]++;
    int ib = next_index[l.b.node]++;
    auto& nsb = impl->ns[l.b.node];
    MacAddr ma = link_mac(k, 0), mb = link_mac(k, 1);
    if (auto st = impl->nl[l.a.node].create_veth(l.a.ifname, ia, l.b.ifname, ib, nsb.fd(), nsb.name(), true, &ma, &mb);
        !st)
      return fail(st.error());
    if (auto st = impl->nl[l.b.node].set_link_up(ib, true, l.b.ifname); !st) return fail(st.error());
    impl->ifindex[{l.a.node, l.a.ifname}] = ia;
    impl->ifindex[{l.b.node, l.b.ifname}] = ib;
    link_index[k] = {ia, ib};
  }
  impl->timings.links = since(t1);

  // 3. addresses: /31 and /127 on both ends
  auto t2 = Clock::now();
  for (size_t k = 0; k < topo.links.size(); ++k) {
    const Link& l = topo.links[k];
    for (auto [ep, idx] : {std::pair{&l.a, link_index[k].first}, std::pair{&l.b, link_index[k].second}}) {
      auto& nl = impl->nl[ep->node];
      if (auto st = nl.add_address(idx, ep->addr4, ep->ifname); !st) return fail(st.error());
      if (auto st = nl.add_address(idx, ep->addr6, ep->ifname); !st) return fail(st.error());
    }
  }
  // 3b. permanent neighbours on both ends (see neighbors.hpp): no ARP or ND
  for (const auto& e : link_neighbors(topo)) {
    int idx = impl->ifindex.at({e.node, e.ifname});
    if (auto st = impl->nl[e.node].add_neighbor(idx, e.ip, e.mac, e.ifname); !st) return fail(st.error());
  }
  impl->timings.addresses = since(t2);

  // 4. line rate: TBF on both ends of shaped links
  auto t3 = Clock::now();
  for (size_t k = 0; k < topo.links.size(); ++k) {
    const Link& l = topo.links[k];
    if (l.rate_bps == 0) continue;
    if (auto st = impl->nl[l.a.node].set_tbf(link_index[k].first, l.rate_bps, l.a.ifname); !st)
      return fail(st.error());
    if (auto st = impl->nl[l.b.node].set_tbf(link_index[k].second, l.rate_bps, l.b.ifname); !st)
      return fail(st.error());
  }
  impl->timings.qdiscs = since(t3);

  // 5. servers: default routes through the switch they hang off
  for (size_t k = 0; k < topo.links.size(); ++k) {
    const Link& l = topo.links[k];
    if (l.kind != LinkKind::server) continue;
    auto& nl = impl->nl[l.b.node];
    for (auto [family, gw] : {std::pair{AF_INET, l.a.addr4.addr.to_string()},
                              std::pair{AF_INET6, l.a.addr6.addr.to_string()}}) {
      Route r;
      r.family = family;
      r.dst = "default";
      r.nexthops.push_back({gw, link_index[k].second, 1});
      if (auto st = nl.add_route(r); !st) return fail(st.error());
    }
  }
  impl->timings.total = since(t0);
  log::debug("built run {}: {} namespaces in {} ms, {} links in {} ms, addresses {} ms, qdiscs {} ms",
             run_id, topo.nodes.size(), impl->timings.namespaces.count() / 1000, topo.links.size(),
             impl->timings.links.count() / 1000, impl->timings.addresses.count() / 1000,
             impl->timings.qdiscs.count() / 1000);
  return Testbed(std::move(impl));
}

Result<Testbed> Testbed::attach(const Topology& topo, const std::string& run_id) {
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
  return Testbed(std::move(impl));
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
