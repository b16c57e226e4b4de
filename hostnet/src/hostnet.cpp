#include "lanes/hostnet/hostnet.hpp"

#include <sys/socket.h>

#include <fmt/format.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <set>

#include "lanes/bfd/bfdd.hpp"
#include "lanes/hostnet/datapath.hpp"
#include "lanes/testbed/log.hpp"
#include "lanes/testbed/neighbors.hpp"
#include "lanes/testbed/netns.hpp"

namespace lanes::hostnet {

using namespace lanes::testbed;

namespace {

// The container's sysctls: a namespace's base ones, and multipath (it
// spreads its flows over the NIC devices); it forwards nothing.
std::vector<Sysctl> container_sysctls() {
  auto s = base_sysctls();
  auto m = multipath_sysctls();
  s.insert(s.end(), m.begin(), m.end());
  return s;
}

constexpr int kFirstIfindex = 200;  // container links, above the host's NIC indexes
constexpr uint32_t kTableBase = 100;
constexpr uint32_t kHeldMetric = 4000000000u;  // below every real route in a NIC's table

}  // namespace

uint32_t active_backup_metric(int nic) { return 100 + static_cast<uint32_t>(nic); }

uint8_t mptcp_endpoint_id(int nic, bool v6) { return static_cast<uint8_t>((v6 ? 64 : 0) + nic); }

std::string job_netns(const std::string& run_id, const std::string& host) {
  return RunRegistry::netns_name(run_id, host + ".job");
}
std::string host_side_ifname(int nic) { return "jnic" + std::to_string(nic); }
std::string container_ifname(int nic) { return "eth" + std::to_string(nic); }

EgressMode effective_mode(EgressMode wanted, const KernelFeatures& f, std::string* why) {
  if ((wanted == EgressMode::bpf || wanted == EgressMode::bpf_numa) && !f.bpf) {
    if (why) *why = "BPF programs cannot be loaded here (" + f.bpf_error + "): egress falls back to ecmp";
    return EgressMode::ecmp;
  }
  return wanted;
}

HostAgentConfig host_agent_config(const Topology& t, int host, const std::string& run_id, EgressMode mode) {
  const Node& h = t.nodes.at(static_cast<size_t>(host));
  HostAgentConfig c;
  c.host = h.name;
  c.mode = to_string(mode);
  if (mode == EgressMode::bpf || mode == EgressMode::bpf_numa) c.program = h.job->egress_program;
  c.container_netns = job_netns(run_id, h.name);
  c.task4 = h.job->has4() ? h.job->task_ip4.to_string() : "";
  c.task6 = h.job->has6() ? h.job->task_ip6.to_string() : "";
  for (const auto& nic : h.nics) {
    const Link& l = t.links[nic.link];
    HostAgentConfig::Nic n;
    n.index = nic.index;
    n.ifname = l.b.ifname;
    n.jnic = host_side_ifname(nic.index);
    n.eth = container_ifname(nic.index);
    n.numa = nic.numa;
    n.gw4 = l.a.addr4.addr.to_string();
    n.gw6 = l.a.addr6.addr.to_string();
    n.job4 = h.job->has4() ? nic.job_addr4.addr.to_string() : "";
    n.job6 = h.job->has6() ? nic.job_addr6.addr.to_string() : "";
    n.host_side4 = nic.host_side4.addr.to_string();
    n.host_side6 = nic.host_side6.addr.to_string();
    n.cont_side4 = nic.cont_side4.addr.to_string();
    n.cont_side6 = nic.cont_side6.addr.to_string();
    n.gw_mac = to_string(link_mac(nic.link, 0));  // the switch port is end a of the NIC's link
    n.table = kTableBase + static_cast<uint32_t>(nic.index);
    n.rate_bps = nic.rate_bps;
    c.nics.push_back(std::move(n));
  }
  return c;
}

std::vector<ContainerNeighbor> container_neighbors(const Topology& t, int host, int nic) {
  const Nic& n = t.nodes.at(static_cast<size_t>(host)).nics.at(static_cast<size_t>(nic));
  MacAddr hm = container_link_mac(host, nic, 0), cm = container_link_mac(host, nic, 1);
  std::string jn = host_side_ifname(nic), cn = container_ifname(nic);
  return {{false, jn, IpAddr(n.cont_side4.addr), cm},
          {false, jn, IpAddr(n.cont_side6.addr), cm},
          {true, cn, IpAddr(n.host_side4.addr), hm},
          {true, cn, IpAddr(n.host_side6.addr), hm}};
}

KernelPlan host_plan(const Topology& t, int host, EgressMode mode, bool netkit, const std::string& hns,
                     const std::string& cns, const std::vector<int>& nic_ifindex) {
  const Node& h = t.nodes.at(static_cast<size_t>(host));
  KernelPlan p;
  // the container's addresses: the task IP on lo (no dummy devices needed)
  // (of the job's families only: a single-family job has no route of the
  // other, and the container links carry the other only as link addresses)
  const Job& job = *h.job;
  auto has = [&](bool v6) { return v6 ? job.has6() : job.has4(); };
  p.add(cns, change::LinkUp{1, "lo"});
  if (job.has4()) p.add(cns, change::Address{1, "lo", IfAddr4{job.task_ip4, 32}});
  if (job.has6()) p.add(cns, change::Address{1, "lo", IfAddr6{job.task_ip6, 128}});

  // one link per NIC: jnic<k> here, eth<k> in the container. Different
  // indexes on the two ends: the kernel then handles the container link's
  // carrier changes at once (linkwatch treats a device whose index differs
  // from its peer's as urgent), so a NIC failure reaches the container and
  // its injector without the 1 s batching.
  auto jidx = [](const Nic& nic) { return kFirstIfindex + nic.index; };
  auto cidx = [](const Nic& nic) { return kFirstIfindex + 100 + nic.index; };
  for (const auto& nic : h.nics) {
    std::string jn = host_side_ifname(nic.index), cn = container_ifname(nic.index);
    // netkit (L3) where the kernel has it, a veth pair otherwise
    if (netkit)
      p.add(hns, change::Netkit{jn, jidx(nic), cn, cidx(nic), cns});
    else
      p.add(hns, change::Veth{jn, jidx(nic), cn, cidx(nic), cns, container_link_mac(host, nic.index, 0),
                              container_link_mac(host, nic.index, 1)});
    p.add(cns, change::LinkUp{cidx(nic), cn, kEndpointGsoMaxSize});  // the job's sockets send on it
    p.add(hns, change::Address{jidx(nic), jn, nic.host_side4});
    p.add(hns, change::Address{jidx(nic), jn, nic.host_side6});
    p.add(cns, change::Address{cidx(nic), cn, nic.cont_side4});
    if (job.has4()) p.add(cns, change::Address{cidx(nic), cn, nic.job_addr4});
    p.add(cns, change::Address{cidx(nic), cn, nic.cont_side6});
    if (job.has6()) p.add(cns, change::Address{cidx(nic), cn, nic.job_addr6});
    // permanent neighbours both ways (netkit in L3 mode has no link layer)
    if (!netkit)
      for (const auto& e : container_neighbors(t, host, nic.index))
        p.add(e.in_container ? cns : hns, change::Neighbor{e.in_container ? cidx(nic) : jidx(nic), e.ifname, e.ip, e.mac});
  }

  // MPTCP: as many subflows as the kernel allows, to take every NIC's and
  // to accept another job's
  if (mode == EgressMode::mptcp) p.add(cns, change::MptcpLimitsSet{{kMptcpMaxSubflows, 0}});

  // container routing: a table per NIC for the job's NIC-k address, and
  // the default route
  for (bool v6 : {false, true}) {
    if (!has(v6)) continue;
    int fam = v6 ? AF_INET6 : AF_INET;
    auto host_side = [&](const Nic& nic) { return v6 ? IpAddr(nic.host_side6.addr) : IpAddr(nic.host_side4.addr); };
    for (const auto& nic : h.nics) {
      uint32_t table = kTableBase + static_cast<uint32_t>(nic.index);
      Route r{IpNet::default_route(fam), std::vector<Via>{{host_side(nic), cidx(nic), 1}}};
      r.table = table;
      r.prefsrc = v6 ? IpAddr(nic.job_addr6.addr) : IpAddr(nic.job_addr4.addr);
      p.add(cns, change::AddRoute{r});
      // while link k is down its route is ignored (ignore_routes_with_linkdown):
      // what the NIC-k address sends then is dropped here rather than
      // leaving through another NIC, whose switch port would answer into
      // NIC k's dead port
      Route held{IpNet::default_route(fam), Blackhole{}};
      held.table = table;
      held.metric = kHeldMetric;
      p.add(cns, change::AddRoute{held});
      Rule rule;
      rule.family = fam;
      rule.src = v6 ? IpNet(Net6(nic.job_addr6.addr, 128)) : IpNet(Net4(nic.job_addr4.addr, 32));
      rule.table = table;
      rule.priority = table;
      p.add(cns, change::AddRule{rule});
    }
    Route def{IpNet::default_route(fam), NhId{}};
    def.prefsrc = v6 ? IpAddr(h.job->task_ip6) : IpAddr(h.job->task_ip4);
    if (mode == EgressMode::mptcp) {
      // the first subflow from the task IP by the first NIC with carrier
      // (the routes below, as active-backup's), and one more from every
      // other NIC's address: the in-kernel path manager makes a subflow
      // from each "subflow" endpoint when the job connects, bound to its
      // link. The kernel holds 8 endpoints a namespace: a job of both
      // families has them on its first 5 NICs, one of a family on its first 9.
      const size_t pinned = mptcp_endpoint_nics(h.nics.size(), (job.has4() ? 1 : 0) + (job.has6() ? 1 : 0));
      for (const auto& nic : h.nics)
        if (nic.index > 0 && static_cast<size_t>(nic.index) <= pinned)
          p.add(cns, change::MptcpEndpointAdd{
                         {mptcp_endpoint_id(nic.index, v6), v6 ? IpAddr(nic.job_addr6.addr) : IpAddr(nic.job_addr4.addr),
                          cidx(nic), true, false},
                         container_ifname(nic.index)});
    }
    if (mode == EgressMode::active_backup || mode == EgressMode::mptcp) {
      // one route per NIC, NIC 0's first: the kernel ignores a route whose
      // link lost carrier (ignore_routes_with_linkdown), so everything
      // leaves by the first NIC that has it and the others wait
      for (const auto& nic : h.nics) {
        Route r{IpNet::default_route(fam), std::vector<Via>{{host_side(nic), cidx(nic), 1}}};
        r.prefsrc = def.prefsrc;
        r.metric = active_backup_metric(nic.index);
        p.add(cns, change::AddRoute{r});
      }
      continue;
    }
    if (mode == EgressMode::single || mode == EgressMode::bind) {
      // bind: what the application does not bind to a NIC's address leaves by NIC 0
      def.to = std::vector<Via>{{host_side(h.nics[0]), cidx(h.nics[0]), 1}};
    } else {
      // one next hop per NIC link in a resilient group: a link that goes
      // down takes only its own flows with it
      change::Group group{v6 ? 1001u : 1000u, {},
                          egress_group_params()};
      for (const auto& nic : h.nics) {
        uint32_t id = (v6 ? 101 : 1) + static_cast<uint32_t>(nic.index);
        p.add(cns, change::Nexthop{id, cidx(nic), host_side(nic)});
        group.members.emplace_back(id, 1);
      }
      def.to = NhId{group.id};
      p.add(cns, group);
    }
    p.add(cns, change::AddRoute{def});
  }

  // host routing: the job's addresses live behind the container links;
  // what the container sends on link k leaves through NIC k
  for (bool v6 : {false, true}) {
    int fam = v6 ? AF_INET6 : AF_INET;
    auto cont_side = [&](const Nic& nic) { return v6 ? IpAddr(nic.cont_side6.addr) : IpAddr(nic.cont_side4.addr); };
    std::vector<Via> to_job, out_of_nics;
    for (const auto& nic : h.nics) to_job.push_back({cont_side(nic), jidx(nic), 1});
    if (has(v6))
      p.add(hns, change::AddRoute{Route{v6 ? IpNet(Net6(job.task_ip6, 128)) : IpNet(Net4(job.task_ip4, 32)), to_job}});
    for (const auto& nic : h.nics) {
      const Link& l = t.links[nic.link];
      IpAddr gw = v6 ? IpAddr(l.a.addr6.addr) : IpAddr(l.a.addr4.addr);
      int nic_idx = nic_ifindex.at(static_cast<size_t>(nic.index));
      IpNet job_net = v6 ? IpNet(Net6(nic.job_addr6.addr, static_cast<unsigned short>(nic.job_addr6.len)))
                         : IpNet(Net4(nic.job_addr4.addr, static_cast<unsigned short>(nic.job_addr4.len)));
      if (has(v6)) p.add(hns, change::AddRoute{Route{job_net, std::vector<Via>{{cont_side(nic), jidx(nic), 1}}}});
      uint32_t table = kTableBase + static_cast<uint32_t>(nic.index);
      Route out{IpNet::default_route(fam), std::vector<Via>{{gw, nic_idx, 1}}};
      out.table = table;
      p.add(hns, change::AddRoute{out});
      Rule rule;
      rule.family = fam;
      rule.iif = host_side_ifname(nic.index);
      rule.table = table;
      rule.priority = table;
      p.add(hns, change::AddRule{rule});
      out_of_nics.push_back({gw, nic_idx, 1});
    }
    Route hostdef{IpNet::default_route(fam), out_of_nics};
    hostdef.replace = true;
    p.add(hns, change::AddRoute{hostdef});
  }
  return p;
}

Status deploy_host(DeployContext& ctx, int host) {
  Fabric& tb = ctx.tb;
  const Topology& t = tb.topology();
  const Node& h = t.nodes.at(static_cast<size_t>(host));
  std::string why;
  EgressMode mode = effective_mode(h.job->egress, ctx.features, &why);
  static std::atomic<bool> said{false};  // once per process, not once per host
  if (!why.empty() && !said.exchange(true)) log::warn("{} (every host whose egress is bpf or bpf-numa)", why);

  std::string cname = job_netns(ctx.run_id, h.name);
  auto cns = Netns::create(cname, container_sysctls());
  if (!cns) return cns.error();
  auto cnl = Netlink::open_in(cns.value().fd(), cname);
  if (!cnl) return cnl.error();
  std::vector<int> nic_ifindex;
  for (const auto& nic : h.nics) {
    auto idx = tb.ifindex(host, t.links[nic.link].b.ifname);
    if (!idx) return idx.error();
    nic_ifindex.push_back(idx.value());
  }
  std::string hname = tb.netns_name(host);
  KernelPlan plan = host_plan(t, host, mode, ctx.features.netkit, hname, cname, nic_ifindex);
  PlanTargets targets{[&](const std::string& ns) -> Netlink* {
                        if (ns == hname) return &tb.netlink(host);
                        return ns == cname ? &cnl.value() : nullptr;
                      },
                      [&](const std::string& ns) { return ns == cname ? cns.value().fd() : -1; }};
  if (auto st = apply(plan, targets); !st) return st;

  // the host agent: NIC carrier, and the BPF datapath in the bpf modes
  RunLayout run = ctx.reg.layout(ctx.run_id);
  auto files = host_agent_files(run, h.name);
  std::error_code ec;
  std::filesystem::create_directories(run.node_dir("hosts", h.name), ec);
  // BFD on the NICs, in a daemon of its own (one for the rack's hosts,
  // deploy_all): a restarted host agent must not take the host's paths out
  // of use at the switch
  {
    auto cfg = host_agent_config(t, host, ctx.run_id, mode);
    cfg.bfd_socket = bfd::bfdd_socket(t, host, run.node_dir("hosts", h.name));
    std::ofstream o(files.config, std::ios::trunc);
    o << cfg.to_json().dump(2) << "\n";
    if (!o) return errno_error("writing " + files.config);
  }
  DaemonRequest agent;
  agent.node = h.name;
  agent.name = "host-agent";
  agent.argv = {ctx.bin_dir + "/lanes-host-agent", "--config", files.config, "--state", files.state};
  agent.netns = tb.netns_name(host);
  agent.ready_file = files.state;
  ctx.daemons.push_back(std::move(agent));
  log::debug("{}: job container {} with {} {} links, egress {}", h.name, cname, h.nics.size(),
             ctx.features.netkit ? "netkit" : "veth", to_string(mode));
  return {};
}

Status deploy_all(DeployContext& ctx) {
  const Topology& t = ctx.tb.topology();
  // a user's egress program is checked before any container is made: a
  // bad one stops the run with the reason (rolled back like any failure)
  std::set<std::string> checked;
  for (const auto& n : t.nodes)
    if (n.kind == NodeKind::host && n.job && !n.job->egress_program.empty() &&
        checked.insert(n.job->egress_program).second)
      if (auto st = check_egress_program(n.job->egress_program); !st)
        return os_error(st.error().code().value(), n.name + "'s egress program: " + message_of(st.error()));
  for (size_t i = 0; i < t.nodes.size(); ++i)
    if (t.nodes[i].kind == NodeKind::host && t.nodes[i].job && ctx.local(static_cast<int>(i)))
      if (auto st = deploy_host(ctx, static_cast<int>(i)); !st) return st;
  // the BFD of a rack's job hosts (those on this machine) in one daemon: a
  // daemon per host was a thousand processes waking ten times a second
  RunLayout run = ctx.reg.layout(ctx.run_id);
  for (const auto& rack : t.racks) {
    std::vector<int> hosts;
    std::vector<std::string> dirs;
    for (int h : rack.hosts)
      if (t.nodes[static_cast<size_t>(h)].job && ctx.local(h)) {
        hosts.push_back(h);
        dirs.push_back(run.node_dir("hosts", t.nodes[static_cast<size_t>(h)].name));
      }
    if (auto st = bfd::deploy_rack_bfdd(ctx, hosts, dirs, run.node_dir("racks", rack.name), kWaveHosts); !st)
      return st;
  }
  return {};
}

nlohmann::json HostRole::status(const RunRegistry& reg, const std::string& run_id, const Node& node, int,
                                bool detailed) const {
  if (node.kind != NodeKind::host || !node.job) return nullptr;
  // the host agent's view: NIC state, counters, BPF flows per NIC
  try {
    auto state = read_host_agent_state(reg.layout(run_id), node.name);
    if (!state) return nullptr;
    auto st = state->to_json();
    st.erase("flows");
    auto bfd = bfd::bfd_status(reg.layout(run_id).node_dir("hosts", node.name), detailed);
    if (!detailed) return {{"nics", st.value("nics", nlohmann::json::array())}, {"bfd", bfd}};
    st["bfd"] = bfd;
    st["container_netns"] = job_netns(run_id, node.name);
    return st;
  } catch (const std::exception&) {
    return nullptr;
  }
}

void HostRole::print_status(const nlohmann::json& h, const nlohmann::json& node, std::ostream& out) const {
  std::string kind = "?";
  for (const auto& i : node.value("interfaces", nlohmann::json::array()))
    if (i.value("name", "") == "jnic0") kind = i.value("kind", "?");
  out << fmt::format("  job container {} ({} links jnicN <-> ethN), egress {}\n", h.value("container_netns", "?"),
                     kind, h.value("mode", "?"));
  for (const auto& x : h.value("nics", nlohmann::json::array())) {
    std::string bpf;
    if (x.contains("bpf"))
      bpf = fmt::format("  bpf: {} flows active, {} total, {} moved away, {} rebalanced onto it, {} spilled onto it, "
                        "{:.1f} Mbit/s",
                        x["bpf"].value("flows_active", uint64_t{0}), x["bpf"].value("flows_total", uint64_t{0}),
                        x["bpf"].value("moved", uint64_t{0}), x["bpf"].value("rebalanced", uint64_t{0}),
                        x["bpf"].value("spilled", uint64_t{0}),
                        static_cast<double>(x["bpf"].value("rate", uint64_t{0})) * 8 / 1e6);
    out << fmt::format("    {} numa {} {:<4}{}\n", x.value("ifname", "?"), x.value("numa", 0),
                       x.value("up", false) ? "up" : "DOWN", bpf);
  }
}

}  // namespace lanes::hostnet
