#include "lanes/hostnet/host_agent.hpp"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <ctime>
#include <fstream>

#include "lanes/hostnet/hostnet.hpp"
#include "lanes/testbed/log.hpp"
#include "lanes/testbed/netns.hpp"
#include "lanes/testbed/rejoin.hpp"

namespace lanes::hostnet {

using namespace lanes::testbed;
namespace lg = lanes::log;

HostAgentConfig HostAgentConfig::from_json(const nlohmann::json& j) {
  HostAgentConfig c;
  c.host = j.value("host", "");
  c.mode = j.value("mode", "ecmp");
  c.program = j.value("program", "");
  c.container_netns = j.value("container_netns", "");
  c.task4 = j.value("task4", "");
  c.task6 = j.value("task6", "");
  c.bfd_socket = j.value("bfd_socket", "");
  for (const auto& n : j.value("nics", nlohmann::json::array())) {
    Nic s;
    s.index = n.value("index", 0);
    s.ifname = n.value("ifname", "");
    s.jnic = n.value("jnic", "");
    s.eth = n.value("eth", "");
    s.numa = n.value("numa", 0);
    s.gw4 = n.value("gw4", "");
    s.gw6 = n.value("gw6", "");
    s.job4 = n.value("job4", "");
    s.job6 = n.value("job6", "");
    s.host_side4 = n.value("host_side4", "");
    s.host_side6 = n.value("host_side6", "");
    s.cont_side4 = n.value("cont_side4", "");
    s.cont_side6 = n.value("cont_side6", "");
    s.gw_mac = n.value("gw_mac", "");
    s.table = n.value("table", 0u);
    s.rate_bps = n.value("rate_bps", uint64_t{0});
    c.nics.push_back(std::move(s));
  }
  return c;
}

nlohmann::json HostAgentConfig::to_json() const {
  nlohmann::json n = nlohmann::json::array();
  for (const auto& s : nics)
    n.push_back({{"index", s.index},           {"ifname", s.ifname},         {"jnic", s.jnic},
                 {"eth", s.eth},               {"numa", s.numa},             {"gw4", s.gw4},
                 {"gw6", s.gw6},               {"job4", s.job4},             {"job6", s.job6},
                 {"host_side4", s.host_side4}, {"host_side6", s.host_side6}, {"cont_side4", s.cont_side4},
                 {"cont_side6", s.cont_side6}, {"gw_mac", s.gw_mac},     {"table", s.table},
                 {"rate_bps", s.rate_bps}});
  return {{"host", host},   {"mode", mode},   {"program", program}, {"container_netns", container_netns},
          {"task4", task4}, {"task6", task6}, {"bfd_socket", bfd_socket}, {"nics", n}};
}

ResilientParams egress_group_params() {
  ResilientParams rp;
  rp.buckets = 64;
  rp.idle_timer_s = 0;
  rp.unbalanced_timer_s = 0;
  return rp;
}

HostAgentFiles host_agent_files(const RunLayout& run, const std::string& host) {
  std::string dir = run.node_dir("hosts", host);
  return {dir + "/host-agent.json", dir + "/host-agent-state.json"};
}

Result<std::unique_ptr<HostAgent>> HostAgent::open(HostAgentConfig cfg) {
  const std::string host = cfg.host;
  auto hnl = Netlink::open_here(host);
  if (!hnl) return hnl.error();
  auto cns = Netns::open(cfg.container_netns);
  if (!cns) return cns.error();
  auto cnl = Netlink::open_in(cns.value().fd(), cfg.container_netns);
  if (!cnl) return cnl.error();
  std::unique_ptr<HostAgent> a(new HostAgent(cfg, std::move(hnl).value(), std::move(cnl).value()));
  auto hlinks = a->hnl_.links();
  auto clinks = a->cnl_.links();
  if (!hlinks) return hlinks.error();
  if (!clinks) return clinks.error();
  auto find = [](const std::vector<LinkInfo>& v, const std::string& n) -> const LinkInfo* {
    for (const auto& l : v)
      if (l.name == n) return &l;
    return nullptr;
  };
  DatapathConfig dc;
  dc.mode = cfg.mode == "bpf-numa" ? LANES_MODE_BPF_NUMA : LANES_MODE_BPF;
  dc.task4 = cfg.task4;
  dc.task6 = cfg.task6;
  dc.cpu_node = cpu_to_node(2);
  for (const auto& n : cfg.nics) {
    Nic s;
    static_cast<HostAgentConfig::Nic&>(s) = n;
    const LinkInfo* nl = find(hlinks.value(), s.ifname);
    const LinkInfo* jl = find(hlinks.value(), s.jnic);
    const LinkInfo* el = find(clinks.value(), s.eth);
    if (!nl || !jl || !el) return os_error(ENODEV, fmt::format("{}: NIC {} or its container link is missing", host, s.ifname));
    s.nic_idx = nl->index;
    s.jnic_idx = jl->index;
    s.eth_idx = el->index;
    s.up = s.carrier = nl->admin_up && nl->carrier;
    s.veth = jl->kind != "netkit";
    s.eth_mac = el->mac;
    s.jnic_mac = jl->mac;
    s.jnic_ok = jl->admin_up && jl->carrier;
    s.eth_ok = el->admin_up && el->carrier;
    dc.nics.push_back({s.nic_idx, s.up, s.numa, s.gw4, s.gw6, s.job4, s.job6, s.rate_bps / 8});
    dc.container_ifindex.push_back(s.jnic_idx);
    dc.container_mac.push_back(el->mac);
    dc.host_mac.push_back(jl->mac);
    a->nics_.push_back(s);
  }
  if (cfg.mode == "bpf" || cfg.mode == "bpf-numa") {
    auto d = cfg.program.empty() ? Datapath::open_and_load() : Datapath::open_and_load_file(cfg.program);
    if (!d) return d.error();
    a->dp_.emplace(std::move(d).value());
    if (auto st = a->dp_->configure(dc); !st) return st.error();
    for (const auto& s : a->nics_) {
      // netkit: the program runs in the device's xmit path through a
      // bpf_link; ingress then goes through the host's routing (the
      // redirect_peer fast path is veth's). veth: tc on both.
      bool netkit = find(hlinks.value(), s.jnic)->kind == "netkit";
      auto eg = netkit ? a->dp_->attach_netkit_egress(s.jnic_idx) : a->dp_->attach_egress(s.jnic_idx);
      if (!eg) return eg.error();
      if (netkit || !a->dp_->has_ingress()) continue;
      if (auto st = a->dp_->attach_ingress(s.nic_idx); !st) return st.error();
    }
    lg::info("{}: BPF datapath attached on {} NICs ({}{})", host, a->nics_.size(), cfg.mode,
             cfg.program.empty() ? "" : ", the user's program " + cfg.program);
  }
  for (auto& s : a->nics_)
    if (!s.up) a->apply(s, false);
  return a;
}

// The host's routes through NIC S that a down device lost: its own table's
// default route out of the NIC, or (JOB) the route to the job's NIC
// addresses through the container link.
void HostAgent::restore_routes(const Nic& s, bool job) {
  for (bool v6 : {false, true}) {
    // the NIC's own table has both families (the host's plan); the job's
    // addresses only the job's
    if (job && (v6 ? s.job6 : s.job4).empty()) continue;
    auto gw = parse_ip(v6 ? s.gw6 : s.gw4);
    auto net = job ? IpNet::parse(v6 ? s.job6 : s.job4) : std::optional(IpNet::default_route(v6 ? AF_INET6 : AF_INET));
    auto via = job ? parse_ip(v6 ? s.cont_side6 : s.cont_side4) : gw;
    if (!net || !via) {
      lg::warn("{}: {}'s addresses in the config are not addresses", cfg_.host, s.ifname);
      continue;
    }
    Route r{*net, std::vector<Via>{{*via, job ? s.jnic_idx : s.nic_idx, 1}}};
    if (!job) r.table = s.table;
    r.replace = true;
    if (auto st = hnl_.add_route(r); !st) lg::warn("{}", st.error().what());
  }
}

void HostAgent::link_changed(const LinkEvent& e) {
  for (auto& s : nics_) {
    if (s.ifname == e.name) {
      s.carrier = e.admin_up && e.carrier;
      update(s);
    }
    if (s.jnic == e.name) container_link_seen(s, true, e);
  }
}

void HostAgent::container_link_changed(const LinkEvent& e) {
  for (auto& s : nics_)
    if (s.eth == e.name) container_link_seen(s, false, e);
}

// One end of NIC S's container link as seen now. This agent takes the
// host side down and up itself with the NIC (apply); anything else that
// takes either end down and up (an operator, a container runtime, a
// script) flushed that end's permanent neighbours and routes, and the
// kernel dropped the container's next hops over the link: once both ends
// are up again, and the NIC is in use, they are put back as after a NIC's
// return. (Putting back what is there changes nothing: an event of the
// agent's own doing read late costs a second look, no more.)
void HostAgent::container_link_seen(Nic& s, bool jnic_side, const LinkEvent& e) {
  if (!jnic_side && !e.admin_up) s.eth_flushed = true;
  bool ok = e.admin_up && e.carrier;
  bool& seen = jnic_side ? s.jnic_ok : s.eth_ok;
  if (seen == ok) return;
  bool was = s.jnic_ok && s.eth_ok;
  seen = ok;
  bool now = s.jnic_ok && s.eth_ok;
  if (was && !now && s.up)
    lg::info("{}: {}'s container link is down ({}{})", cfg_.host, s.ifname, jnic_side ? s.jnic : s.eth,
             jnic_side ? "" : " in the container");
  if (!was && now && s.up) heal(s, "container link up: back in use");
}

void HostAgent::bfd_changed(const std::map<std::string, bool>& usable) {
  for (auto& s : nics_)
    if (auto it = usable.find(s.ifname); it != usable.end() && it->second != s.bfd_ok) {
      s.bfd_ok = it->second;
      lg::info("{}: BFD says {}'s path {}", cfg_.host, s.ifname, s.bfd_ok ? "works again" : "failed");
      update(s);
    }
}

void HostAgent::update(Nic& s) {
  bool want = s.carrier && s.bfd_ok;
  if (want != s.up) apply(s, want);
}

// A NIC's state reaches its container link, the container's group and the datapath.
void HostAgent::apply(Nic& s, bool up) {
  s.up = up;
  if (!up) {
    if (dp_) (void)dp_->set_nic_up(s.index, false);
    if (auto st = hnl_.set_link_up(s.jnic_idx, false, s.jnic); !st) lg::warn("{}", st.error().what());
    lg::info("{}: {} down: out of use", cfg_.host, s.ifname);
    return;
  }
  heal(s, "up: back in use");
}

// Everything NIC S's path needs that a device going down takes away,
// put back (each step is a replace: what is still there stays): the NIC's
// and the container link's permanent neighbours, the host's routes, the
// container link's host side up, the container's route for the NIC's own
// address, its next hops and the egress groups.
void HostAgent::heal(Nic& s, const char* why) {
  if (dp_) (void)dp_->set_nic_up(s.index, true);
  auto mac = parse_mac(s.gw_mac);
  auto neighbours = [&](Netlink& nl, int idx, const std::string& ifname, std::initializer_list<std::string> ips,
                        const MacAddr& m) {
    for (const auto& a : ips)
      if (auto ip = parse_ip(a))
        if (auto st = nl.add_neighbor(idx, *ip, m, ifname); !st) lg::warn("{}", st.error().what());
  };
  // taking the NIC down flushed its permanent neighbours for the switch
  // port: without them its first packets wait for ARP and ND (one lost
  // request is a second) and the entries count against the kernel-wide
  // neighbour limit
  if (mac) neighbours(hnl_, s.nic_idx, s.ifname, {s.gw4, s.gw6}, *mac);
  // taking a device down flushes the routes through it. NIC k's own table
  // first: the container link comes up next, and what the job sends from
  // its NIC-k address at once (the injector dials the moment it sees
  // carrier) must find its way out of NIC k, not out of another NIC
  if (s.table) restore_routes(s, false);
  if (auto st = hnl_.set_link_up(s.jnic_idx, true, s.jnic); !st) lg::warn("{}", st.error().what());
  // the container link's neighbours, both ends: what goes to the job
  // would otherwise wait for ARP and ND
  if (s.veth) {
    neighbours(hnl_, s.jnic_idx, s.jnic, {s.cont_side4, s.cont_side6}, s.eth_mac);
    neighbours(cnl_, s.eth_idx, s.eth, {s.host_side4, s.host_side6}, s.jnic_mac);
  }
  restore_routes(s, true);
  // a container side that only lost carrier kept its routes (and an IPv6
  // route through a link that came up a moment ago is refused until the
  // kernel's link watch has run); one that was taken down lost them
  if (s.eth_flushed && s.eth_ok) {
    restore_container_route(s);
    s.eth_flushed = false;
  }
  if (cfg_.mode == "active-backup" || cfg_.mode == "mptcp") restore_backup_route(s);
  if (cfg_.mode != "single" && cfg_.mode != "bind" && cfg_.mode != "active-backup" &&
      cfg_.mode != "mptcp") {  // (the modes without an egress group)
    // the kernel dropped the container's next hops with the link; restore
    // them, on-link: the link came up a moment ago, and until the kernel's
    // link watch runs its IPv6 routes say it is down (an IPv6 next hop
    // checked against them failed, and the IPv6 group lost the NIC for good)
    for (bool v6 : {false, true}) {
      if ((v6 ? cfg_.task6 : cfg_.task4).empty()) continue;  // the job has no such family
      uint32_t id = (v6 ? 101u : 1u) + static_cast<uint32_t>(s.index);
      if (auto st = cnl_.add_nexthop(id, s.eth_idx, parse_ip(v6 ? s.host_side6 : s.host_side4), true, 4, true); !st)
        lg::warn("{}", st.error().what());
    }
    set_egress_groups();
    report_balance();
  }
  lg::info("{}: {} {}", cfg_.host, s.ifname, why);
}

// active-backup and mptcp: the container's default route by NIC k (its
// metric says its turn), which the container side going down took with it.
void HostAgent::restore_backup_route(const Nic& s) {
  for (bool v6 : {false, true}) {
    auto src = parse_ip(v6 ? cfg_.task6 : cfg_.task4);
    auto via = parse_ip(v6 ? s.host_side6 : s.host_side4);
    if (!src || !via) continue;  // the job has no such family
    Route r{IpNet::default_route(v6 ? AF_INET6 : AF_INET), std::vector<Via>{{*via, s.eth_idx, 1}}};
    r.prefsrc = *src;
    r.metric = active_backup_metric(s.index);
    r.replace = true;
    if (auto st = cnl_.add_route(r); !st) lg::warn("{}", st.error().what());
  }
}

// The container's route for the job's NIC-k address (table k: out of its
// link k), which the container side going down took with it.
void HostAgent::restore_container_route(const Nic& s) {
  if (!s.table) return;
  for (bool v6 : {false, true}) {
    auto src = parse_ip(v6 ? s.job6 : s.job4);
    if (!src) continue;  // the job has no such family
    auto via = parse_ip(v6 ? s.host_side6 : s.host_side4);
    if (!via) continue;
    Route r{IpNet::default_route(v6 ? AF_INET6 : AF_INET), std::vector<Via>{{*via, s.eth_idx, 1}}};
    r.table = s.table;
    r.prefsrc = *src;
    r.replace = true;
    if (auto st = cnl_.add_route(r); !st) lg::warn("{}", st.error().what());
  }
}

// The container's egress groups over the up NICs, each weighing the same.
// The job's flows are the container's own sockets, and each keeps the next
// hop it looked up last: a bucket the kernel moves later does not move the
// socket. Replacing a group makes every socket whose route went through it
// look its route up again at its next packet, so the table must already be
// balanced when the replace returns. It is: the groups' idle timer is 0, so
// every bucket a member holds beyond its share is idle, and the kernel
// moves them to a returned NIC within the replace (the fewest moves that
// balance the table; a bucket of a NIC that stays where it is keeps its
// flows). With the default idle timer the buckets of running flows stay
// until the unbalanced timer, and the flows found a table without the NIC.
void HostAgent::set_egress_groups() {
  ResilientParams rp = egress_group_params();
  for (uint32_t base : {1u, 101u}) {
    if ((base == 1 ? cfg_.task4 : cfg_.task6).empty()) continue;  // the job has no such family
    std::vector<std::pair<uint32_t, uint16_t>> m;
    for (uint32_t nh : egress_members(base)) m.emplace_back(nh, 1);
    if (auto st = cnl_.add_nexthop_group(base == 1 ? 1000 : 1001, m, rp, true); !st) lg::warn("{}", st.error().what());
  }
}

// The next hops of the up NICs in the family whose ids start at BASE.
std::vector<uint32_t> HostAgent::egress_members(uint32_t base) const {
  std::vector<uint32_t> m;
  for (const auto& o : nics_)
    if (o.up) m.push_back(base + static_cast<uint32_t>(o.index));
  return m;
}

// After a NIC's return: the bucket counts of the egress groups, in the
// log, and a warning should a group not be balanced (the flows that looked
// their routes up then may leave a NIC idle).
void HostAgent::report_balance() {
  for (uint32_t base : {1u, 101u}) {
    if ((base == 1 ? cfg_.task4 : cfg_.task6).empty()) continue;
    std::vector<uint32_t> members = egress_members(base);
    if (members.empty()) continue;
    uint32_t group = base == 1 ? 1000 : 1001;
    auto b = cnl_.nexthop_bucket_activity(group);
    if (!b) {
      lg::warn("{}: egress group {}: {}", cfg_.host, group, b.error().what());
      continue;
    }
    std::string counts;
    for (uint32_t nh : members)
      counts += fmt::format("{}{}", counts.empty() ? "" : " ",
                            std::count_if(b.value().begin(), b.value().end(), [&](const BucketInfo& x) { return x.nh_id == nh; }));
    if (balanced(b.value(), members))
      lg::info("{}: egress group {} balanced ({} buckets per NIC): the job's flows look their routes up again", cfg_.host,
               group, counts);
    else
      lg::warn("{}: egress group {} not balanced after the replace ({} buckets per NIC)", cfg_.host, group, counts);
  }
}

HostAgentState HostAgent::state() const {
  HostAgentState out;
  out.host = cfg_.host;
  out.mode = cfg_.mode;
  std::vector<lanes_nic_stats> st;
  std::vector<uint64_t> flows;
  const auto& dp = dp_;
  if (dp) {
    if (auto s = dp->stats(static_cast<int>(nics_.size()))) st = s.value();
    if (auto f = dp->flows_per_nic(static_cast<int>(nics_.size()))) flows = f.value();
  }
  // the programs' clock (CLOCK_MONOTONIC): a NIC's rate is its last
  // window's only while it sent in this window or the last, as they read it
  timespec mono{};
  ::clock_gettime(CLOCK_MONOTONIC, &mono);
  uint64_t slot = (static_cast<uint64_t>(mono.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(mono.tv_nsec)) /
                  LANES_WINDOW_NS;
  for (const auto& s : nics_) {
    HostAgentState::Nic n{s.index, s.ifname, s.up, s.carrier, s.bfd_ok, s.numa, std::nullopt, std::nullopt};
    if (static_cast<size_t>(s.index) < st.size()) {
      auto x = st[static_cast<size_t>(s.index)];
      if (x.slot + 1 < slot) x.rate = 0;
      n.bpf = HostAgentState::Counters{x.tx_packets,   x.tx_bytes,    x.rx_packets, x.rx_bytes, x.flows_active,
                                       x.flows_total, x.moved,      x.rebalanced, x.spilled,  x.rate};
    }
    if (static_cast<size_t>(s.index) < flows.size()) n.flows = flows[static_cast<size_t>(s.index)];
    out.nics.push_back(std::move(n));
  }
  if (dp) {
    // per-flow counters: the 256 largest flows
    out.flows.emplace();
    if (auto all = dp->flows()) {
      auto v = all.value();
      std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.second.bytes > b.second.bytes; });
      for (size_t i = 0; i < v.size() && i < 256; ++i) {
        const auto& [k, f] = v[i];
        int nic_node = f.nic < nics_.size() ? nics_[f.nic].numa : -1;
        out.flows->push_back({static_cast<int>(f.nic), f.bytes, f.packets, f.closed != 0, k.proto, k.family,
                              ntohs(k.sport), ntohs(k.dport), static_cast<int>(f.node), nic_node, f.rate});
      }
    }
  }
  return out;
}

nlohmann::json HostAgentState::to_json() const {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& n : nics) {
    nlohmann::json j = {{"index", n.index}, {"ifname", n.ifname}, {"up", n.up},
                        {"carrier", n.carrier}, {"bfd_ok", n.bfd_ok}, {"numa", n.numa}};
    if (n.bpf) {
      const auto& x = *n.bpf;
      j["bpf"] = {{"tx_packets", x.tx_packets}, {"tx_bytes", x.tx_bytes},         {"rx_packets", x.rx_packets},
                  {"rx_bytes", x.rx_bytes},     {"flows_active", x.flows_active}, {"flows_total", x.flows_total},
                  {"moved", x.moved},           {"rebalanced", x.rebalanced},     {"spilled", x.spilled},
                  {"rate", x.rate}};
    }
    if (n.flows) j["flows"] = *n.flows;
    arr.push_back(std::move(j));
  }
  nlohmann::json out = {{"ready", true}, {"host", host}, {"mode", mode}, {"nics", std::move(arr)}};
  if (flows) {
    nlohmann::json fl = nlohmann::json::array();
    for (const auto& f : *flows)
      fl.push_back({{"nic", f.nic}, {"bytes", f.bytes}, {"packets", f.packets}, {"closed", f.closed},
                    {"proto", f.proto}, {"family", f.family}, {"sport", f.sport}, {"dport", f.dport},
                    {"node", f.node},   {"nic_node", f.nic_node}, {"rate", f.rate}});
    out["flows"] = std::move(fl);
  }
  return out;
}

HostAgentState HostAgentState::from_json(const nlohmann::json& j) {
  HostAgentState s;
  s.host = j.value("host", "");
  s.mode = j.value("mode", "");
  for (const auto& n : j.value("nics", nlohmann::json::array())) {
    Nic x{n.value("index", 0), n.value("ifname", ""), n.value("up", true), n.value("carrier", true),
          n.value("bfd_ok", true), n.value("numa", 0), std::nullopt, std::nullopt};
    if (n.contains("bpf")) {
      const auto& b = n["bpf"];
      auto u = [&](const char* k) { return b.value(k, uint64_t{0}); };
      x.bpf = Counters{u("tx_packets"),  u("tx_bytes"), u("rx_packets"), u("rx_bytes"), u("flows_active"),
                       u("flows_total"), u("moved"),    u("rebalanced"), u("spilled"),  u("rate")};
    }
    if (n.contains("flows")) x.flows = n["flows"].get<uint64_t>();
    s.nics.push_back(std::move(x));
  }
  if (j.contains("flows")) {
    s.flows.emplace();
    for (const auto& f : j["flows"])
      s.flows->push_back({f.value("nic", -1), f.value("bytes", uint64_t{0}), f.value("packets", uint64_t{0}),
                          f.value("closed", false), f.value("proto", 0), f.value("family", 0), f.value("sport", 0),
                          f.value("dport", 0), f.value("node", 0), f.value("nic_node", 0),
                          f.value("rate", uint64_t{0})});
  }
  return s;
}

std::optional<HostAgentState> read_host_agent_state(const testbed::RunLayout& run, const std::string& host) {
  std::ifstream in(host_agent_files(run, host).state);
  if (!in) return std::nullopt;
  try {
    return HostAgentState::from_json(nlohmann::json::parse(in));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace lanes::hostnet
