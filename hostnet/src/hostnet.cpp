#include "lanes/hostnet/hostnet.hpp"

#include <sys/socket.h>

#include <filesystem>
#include <fstream>

#include "lanes/core/log.hpp"
#include "lanes/core/neighbors.hpp"
#include "lanes/core/netns.hpp"

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

Status with(const std::string& what, Status st) {
  if (st) return st;
  return os_error(st.error().code().value(), what + ": " + st.error().what());
}

}  // namespace

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
  c.container_netns = job_netns(run_id, h.name);
  c.task4 = h.job->task_ip4.to_string();
  c.task6 = h.job->task_ip6.to_string();
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
    n.job4 = nic.job_addr4.addr.to_string();
    n.job6 = nic.job_addr6.addr.to_string();
    n.host_side4 = nic.host_side4.addr.to_string();
    n.host_side6 = nic.host_side6.addr.to_string();
    n.cont_side4 = nic.cont_side4.addr.to_string();
    n.cont_side6 = nic.cont_side6.addr.to_string();
    n.table = kTableBase + static_cast<uint32_t>(nic.index);
    c.nics.push_back(std::move(n));
  }
  return c;
}

std::vector<ContainerNeighbor> container_neighbors(const Topology& t, int host, int nic) {
  const Nic& n = t.nodes.at(static_cast<size_t>(host)).nics.at(static_cast<size_t>(nic));
  MacAddr hm = container_link_mac(host, nic, 0), cm = container_link_mac(host, nic, 1);
  std::string jn = host_side_ifname(nic), cn = container_ifname(nic);
  return {{false, jn, n.cont_side4.addr.to_string(), cm},
          {false, jn, n.cont_side6.addr.to_string(), cm},
          {true, cn, n.host_side4.addr.to_string(), hm},
          {true, cn, n.host_side6.addr.to_string(), hm}};
}

Status deploy_host(DeployContext& ctx, int host) {
  Testbed& tb = ctx.tb;
  const Topology& t = tb.topology();
  const Node& h = t.nodes.at(static_cast<size_t>(host));
  std::string why;
  EgressMode mode = effective_mode(h.job->egress, ctx.features, &why);
  if (!why.empty()) log::warn("{}: {}", h.name, why);

  std::string cname = job_netns(ctx.run_id, h.name);
  auto cns = Netns::create(cname, container_sysctls());
  if (!cns) return cns.error();
  auto cnl_r = Netlink::open_in(cns.value().fd(), cname);
  if (!cnl_r) return cnl_r.error();
  Netlink& cnl = cnl_r.value();
  Netlink& hnl = tb.netlink(host);
  if (auto st = cnl.set_link_up(1, true, "lo"); !st) return st;

  // the container's addresses: the task IP on lo (no dummy devices needed)
  if (auto st = cnl.add_address(1, IfAddr4{h.job->task_ip4, 32}, "lo"); !st) return st;
  if (auto st = cnl.add_address(1, IfAddr6{h.job->task_ip6, 128}, "lo"); !st) return st;

  // one link per NIC: jnic<k> here, eth<k> in the container
  std::vector<int> jidx, cidx;
  for (const auto& nic : h.nics) {
    // different indexes on the two ends: the kernel then handles the
    // container link's carrier changes at once (linkwatch treats a device
    // whose index differs from its peer's as urgent), so a NIC failure
    // reaches the container and its injector without the 1 s batching
    int hi = kFirstIfindex + nic.index, ci = kFirstIfindex + 100 + nic.index;
    std::string jn = host_side_ifname(nic.index), cn = container_ifname(nic.index);
    // netkit (L3) where the kernel has it, a veth pair otherwise
    MacAddr hm = container_link_mac(host, nic.index, 0), cm = container_link_mac(host, nic.index, 1);
    auto made = ctx.features.netkit ? hnl.create_netkit(jn, hi, cn, ci, cns.value().fd(), cname)
                                    : hnl.create_veth(jn, hi, cn, ci, cns.value().fd(), cname, true, &hm, &cm);
    if (!made) return made;
    if (auto st = cnl.set_link_up(ci, true, cn); !st) return st;
    if (auto st = hnl.add_address(hi, nic.host_side4, jn); !st) return st;
    if (auto st = hnl.add_address(hi, nic.host_side6, jn); !st) return st;
    if (auto st = cnl.add_address(ci, nic.cont_side4, cn); !st) return st;
    if (auto st = cnl.add_address(ci, nic.cont_side6, cn); !st) return st;
    if (auto st = cnl.add_address(ci, nic.job_addr4, cn); !st) return st;
    if (auto st = cnl.add_address(ci, nic.job_addr6, cn); !st) return st;
    // permanent neighbours both ways (netkit in L3 mode has no link layer)
    if (!ctx.features.netkit)
      for (const auto& e : container_neighbors(t, host, nic.index)) {
        Netlink& nl = e.in_container ? cnl : hnl;
        if (auto st = nl.add_neighbor(e.in_container ? ci : hi, e.ip, e.mac, e.ifname); !st) return st;
      }
    jidx.push_back(hi);
    cidx.push_back(ci);
  }

  // container routing
  for (const auto& nic : h.nics) {
    uint32_t table = kTableBase + static_cast<uint32_t>(nic.index);
    int ci = cidx[nic.index];
    for (int fam : {AF_INET, AF_INET6}) {
      bool v6 = fam == AF_INET6;
      Route r;
      r.family = fam;
      r.dst = "default";
      r.table = table;
      r.nexthops.push_back({v6 ? nic.host_side6.addr.to_string() : nic.host_side4.addr.to_string(), ci, 1});
      r.prefsrc = v6 ? nic.job_addr6.addr.to_string() : nic.job_addr4.addr.to_string();
      if (auto st = cnl.add_route(r); !st) return with("per-NIC table in " + cname, st);
      Rule rule;
      rule.family = fam;
      rule.src = v6 ? nic.job_addr6.str() : nic.job_addr4.str();
      rule.table = table;
      rule.priority = table;
      if (auto st = cnl.add_rule(rule); !st) return st;
    }
  }
  for (int fam : {AF_INET, AF_INET6}) {
    bool v6 = fam == AF_INET6;
    Route def;
    def.family = fam;
    def.dst = "default";
    def.prefsrc = v6 ? h.job->task_ip6.to_string() : h.job->task_ip4.to_string();
    if (mode == EgressMode::single) {
      const Nic& n0 = h.nics[0];
      def.nexthops.push_back({v6 ? n0.host_side6.addr.to_string() : n0.host_side4.addr.to_string(), cidx[0], 1});
    } else {
      // one next hop per NIC link in a resilient group: a link that goes
      // down takes only its own flows with it
      std::vector<std::pair<uint32_t, uint16_t>> members;
      for (const auto& nic : h.nics) {
        uint32_t id = (v6 ? 101 : 1) + static_cast<uint32_t>(nic.index);
        if (auto st = cnl.add_nexthop(id, cidx[nic.index],
                                      v6 ? nic.host_side6.addr.to_string() : nic.host_side4.addr.to_string());
            !st)
          return st;
        members.emplace_back(id, 1);
      }
      ResilientParams rp;
      rp.buckets = 64;
      rp.idle_timer_s = 60;
      uint32_t group = v6 ? 1001 : 1000;
      if (auto st = cnl.add_nexthop_group(group, members, rp); !st) return st;
      def.nh_id = group;
    }
    if (auto st = cnl.add_route(def); !st) return with("default route in " + cname, st);
  }

  // host routing: the job's addresses live behind the container links;
  // what the container sends on link k leaves through NIC k
  for (int fam : {AF_INET, AF_INET6}) {
    bool v6 = fam == AF_INET6;
    Route task;
    task.family = fam;
    task.dst = v6 ? h.job->task_ip6.to_string() + "/128" : h.job->task_ip4.to_string() + "/32";
    for (const auto& nic : h.nics)
      task.nexthops.push_back({v6 ? nic.cont_side6.addr.to_string() : nic.cont_side4.addr.to_string(), jidx[nic.index], 1});
    if (auto st = hnl.add_route(task); !st) return with("task route on " + h.name, st);
    Route hostdef;
    hostdef.family = fam;
    hostdef.dst = "default";
    for (const auto& nic : h.nics) {
      const Link& l = t.links[nic.link];
      auto nicidx = tb.ifindex(host, l.b.ifname);
      if (!nicidx) return nicidx.error();
      Route jr;
      jr.family = fam;
      jr.dst = v6 ? nic.job_addr6.str() : nic.job_addr4.str();
      jr.nexthops.push_back({v6 ? nic.cont_side6.addr.to_string() : nic.cont_side4.addr.to_string(), jidx[nic.index], 1});
      if (auto st = hnl.add_route(jr); !st) return st;
      uint32_t table = kTableBase + static_cast<uint32_t>(nic.index);
      Route out;
      out.family = fam;
      out.dst = "default";
      out.table = table;
      out.nexthops.push_back({v6 ? l.a.addr6.addr.to_string() : l.a.addr4.addr.to_string(), nicidx.value(), 1});
      if (auto st = hnl.add_route(out); !st) return st;
      Rule rule;
      rule.family = fam;
      rule.iif = host_side_ifname(nic.index);
      rule.table = table;
      rule.priority = table;
      if (auto st = hnl.add_rule(rule); !st) return st;
      hostdef.nexthops.push_back({v6 ? l.a.addr6.addr.to_string() : l.a.addr4.addr.to_string(), nicidx.value(), 1});
    }
    hostdef.replace = true;
    if (auto st = hnl.add_route(hostdef); !st) return with("host default route on " + h.name, st);
  }

  // the host agent: NIC carrier, and the BPF datapath in the bpf modes
  RunLayout run = ctx.reg.layout(ctx.run_id);
  auto files = host_agent_files(run, h.name);
  std::error_code ec;
  std::filesystem::create_directories(run.node_dir("hosts", h.name), ec);
  {
    std::ofstream o(files.config, std::ios::trunc);
    o << host_agent_config(t, host, ctx.run_id, mode).to_json().dump(2) << "\n";
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
  for (size_t i = 0; i < t.nodes.size(); ++i)
    if (t.nodes[i].kind == NodeKind::host && t.nodes[i].job)
      if (auto st = deploy_host(ctx, static_cast<int>(i)); !st) return st;
  return {};
}

nlohmann::json HostRole::status(const RunRegistry& reg, const std::string& run_id, const Node& node, int,
                                bool detailed) const {
  if (node.kind != NodeKind::host || !node.job) return nullptr;
  // the host agent's view: NIC state, counters, BPF flows per NIC
  try {
    std::ifstream in(host_agent_files(reg.layout(run_id), node.name).state);
    if (!in) return nullptr;
    auto st = nlohmann::json::parse(in);
    st.erase("flows");
    if (!detailed) return {{"nics", st.value("nics", nlohmann::json::array())}};
    st["container_netns"] = job_netns(run_id, node.name);
    return st;
  } catch (const std::exception&) {
    return nullptr;
  }
}

}  // namespace lanes::hostnet
