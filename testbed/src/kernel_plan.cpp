#include "lanes/testbed/kernel_plan.hpp"

#include <fmt/format.h>

#include <map>

#include "lanes/testbed/delay_line.hpp"
#include "lanes/testbed/log.hpp"
#include "lanes/testbed/netns.hpp"

namespace lanes::testbed {

namespace {

template <class... Ts>
struct overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
overloaded(Ts...) -> overloaded<Ts...>;

std::string members_of(const change::Group& g) {
  std::string s;
  for (auto [id, w] : g.members) s += fmt::format("{}{}{}", s.empty() ? "" : "/", id, w == 1 ? "" : fmt::format(",{}", w));
  return s;
}

}  // namespace

std::string describe(const KernelChange& c) {
  return std::visit(
      overloaded{
          [](const change::Veth& v) {
            return fmt::format("veth {} ({}) <-> {} ({}) in {}", v.name, v.index, v.peer, v.peer_index, v.peer_ns);
          },
          [](const change::Netkit& v) {
            return fmt::format("netkit {} ({}) <-> {} ({}) in {}", v.name, v.index, v.peer, v.peer_index, v.peer_ns);
          },
          [](const change::Vxlan& v) {
            return fmt::format("vxlan {} ({}) VNI {}, {} -> {} port {}, MTU {}", v.name, v.index, v.vni,
                               v.local.to_string(), v.remote.to_string(), v.dstport, v.mtu);
          },
          [](const change::LinkUp& l) {
            return l.gso_max_size ? fmt::format("up {} ({}), GSO up to {} B", l.name, l.index, l.gso_max_size)
                                  : fmt::format("up {} ({})", l.name, l.index);
          },
          [](const change::Address& a) {
            return fmt::format("address {} on {}",
                               std::visit([](const auto& x) { return x.str(); }, a.addr), a.ifname);
          },
          [](const change::Neighbor& n) {
            return fmt::format("neighbour {} at {} on {}", n.ip.to_string(), to_string(n.mac), n.ifname);
          },
          [](const change::Tbf& t) { return fmt::format("tbf {} bit/s on {}", t.rate_bps, t.ifname); },
          [](const change::Impair& i) { return fmt::format("impair {} ({})", i.ifname, i.impairment.describe()); },
          [](const change::Nexthop& n) {
            return fmt::format("nexthop {} via {} dev {}", n.id, n.gateway ? n.gateway->to_string() : "-", n.oif);
          },
          [](const change::Group& g) {
            return fmt::format("nexthop group {} of {}{}", g.id, members_of(g),
                               g.resilient ? fmt::format(" resilient {} buckets", g.resilient->buckets) : "");
          },
          [](const change::AddRoute& r) { return "route " + r.route.describe(); },
          [](const change::AddRule& r) { return "rule " + r.rule.describe(); },
          [](const change::MptcpLimitsSet& l) {
            return fmt::format("mptcp limits subflows {} add_addr_accepted {}", l.limits.subflows,
                               l.limits.add_addr_accepted);
          },
          [](const change::MptcpEndpointAdd& e) {
            auto d = e.endpoint;
            d.ifindex = 0;
            return fmt::format("mptcp endpoint {}{}", d.describe(), e.ifname.empty() ? "" : " dev " + e.ifname);
          },
      },
      c);
}

std::vector<std::string> KernelPlan::lines() const {
  std::vector<std::string> out;
  out.reserve(changes_.size());
  for (const auto& c : changes_) out.push_back(c.ns + ": " + describe(c.change));
  return out;
}

Status apply(const KernelPlan& plan, const PlanTargets& targets, const std::function<bool()>& stop) {
  // the fd of namespace NS, WHO (what wants it) named when there is none
  auto ns_fd = [&](const std::string& ns, const std::string& who) -> Result<int> {
    int fd = targets.ns_fd ? targets.ns_fd(ns) : -1;
    if (fd < 0) return os_error(ENOENT, fmt::format("{}: no namespace {}", who, ns));
    return fd;
  };
  // a generic netlink socket per namespace whose MPTCP path manager the plan sets
  std::map<std::string, MptcpPm> pms;
  auto pm_of = [&](const std::string& ns) -> Result<MptcpPm*> {
    if (auto it = pms.find(ns); it != pms.end()) return &it->second;
    auto fd = ns_fd(ns, "its MPTCP path manager");
    if (!fd) return fd.error();
    auto pm = MptcpPm::open_in(fd.value(), ns);
    if (!pm) return pm.error();
    return &pms.emplace(ns, std::move(pm).value()).first->second;
  };
  for (const auto& pc : plan.changes()) {
    if (stop && stop()) return os_error(EINTR, "bringing up " + pc.ns);
    Netlink* nl = targets.netlink(pc.ns);
    if (!nl) return os_error(ENOENT, fmt::format("{}: no such namespace in this run ({})", pc.ns, describe(pc.change)));
    auto peer_fd = [&](const std::string& ns) { return ns_fd(ns, pc.ns + ": the peer"); };
    Status st = std::visit(
        overloaded{
            [&](const change::Veth& v) -> Status {
              auto fd = peer_fd(v.peer_ns);
              if (!fd) return fd.error();
              return nl->create_veth(v.name, v.index, v.peer, v.peer_index, fd.value(), v.peer_ns, true, &v.mac,
                                     &v.peer_mac);
            },
            [&](const change::Netkit& v) -> Status {
              auto fd = peer_fd(v.peer_ns);
              if (!fd) return fd.error();
              return nl->create_netkit(v.name, v.index, v.peer, v.peer_index, fd.value(), v.peer_ns);
            },
            [&](const change::Vxlan& v) -> Status {
              Netlink* under = targets.underlay ? targets.underlay() : nullptr;
              if (!under) return os_error(ENOENT, "no underlay namespace for a link to another machine");
              auto fd = peer_fd(pc.ns);
              if (!fd) return fd.error();
              return under->create_vxlan(v.name, v.index, v.vni, v.local, v.remote, v.dstport, v.mtu, v.mac,
                                         fd.value(), pc.ns);
            },
            [&](const change::LinkUp& l) { return nl->set_link_up(l.index, true, l.name, l.gso_max_size); },
            [&](const change::Address& a) {
              return std::visit([&](const auto& x) { return nl->add_address(a.index, x, a.ifname); }, a.addr);
            },
            [&](const change::Neighbor& n) { return nl->add_neighbor(n.index, n.ip, n.mac, n.ifname); },
            [&](const change::Tbf& t) { return nl->set_tbf(t.index, t.rate_bps, t.ifname); },
            [&](const change::Impair& i) -> Status {
              // netem inside the device's TBF (set before it), then lanes' BPF program
              // (no netem: lanes-delay, a daemon of the run, delays the device)
              if (i.impairment.netem() && !delay_by_lanes(i.engine))
                if (auto ns = set_netem(*nl, i.index, i.ifname, i.impairment); !ns) return ns;
              if (!i.impairment.bpf()) return {};
              // a BPF program is attached from inside the device's namespace
              auto fd = ns_fd(pc.ns, "impairing " + i.ifname);
              if (!fd) return fd.error();
              return run_in_netns(
                  fd.value(),
                  [&]() -> Status {
                    auto d = DeviceImpairment::attach(i.index, i.ifname, i.impairment);
                    if (!d) return d.error();
                    return {};
                  },
                  "impairing " + i.ifname);
            },
            [&](const change::Nexthop& n) { return nl->add_nexthop(n.id, n.oif, n.gateway); },
            [&](const change::Group& g) { return nl->add_nexthop_group(g.id, g.members, g.resilient); },
            [&](const change::AddRoute& r) { return nl->add_route(r.route); },
            [&](const change::AddRule& r) { return nl->add_rule(r.rule); },
            [&](const change::MptcpLimitsSet& l) -> Status {
              auto pm = pm_of(pc.ns);
              if (!pm) return pm.error();
              return pm.value()->set_limits(l.limits);
            },
            [&](const change::MptcpEndpointAdd& e) -> Status {
              auto pm = pm_of(pc.ns);
              if (!pm) return pm.error();
              return pm.value()->add_endpoint(e.endpoint);
            },
        },
        pc.change);
    if (!st) return in_context(pc.ns + ": " + describe(pc.change), st.error());
  }
  return {};
}

}  // namespace lanes::testbed
