// lanes-host-agent: runs in a host's namespace. Loads and attaches the BPF
// datapath in the bpf egress modes, follows the NICs' carrier (a NIC that
// goes down takes its container link down and out of the BPF program's
// choices; when it returns, so does the link and its next hops), and writes
// per-NIC counters to its state file. Started and supervised by lanes.
//
// usage: lanes-host-agent --config FILE --state FILE [--log-level L]

#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "lanes/hostnet/datapath.hpp"
#include "lanes/core/daemon_main.hpp"
#include "lanes/core/log.hpp"
#include "lanes/core/netlink.hpp"
#include "lanes/core/netns.hpp"

using namespace lanes::testbed;
using namespace lanes::hostnet;
namespace lg = lanes::log;

namespace {

struct NicState {
  int index = 0;
  std::string ifname, jnic, eth;
  int numa = 0;
  std::string gw4, gw6, job4, job6, host_side4, host_side6, cont_side4, cont_side6;
  uint32_t table = 0;
  int nic_idx = 0, jnic_idx = 0, eth_idx = 0;
  bool up = true;
};

}  // namespace

int main(int argc, char** argv) {
  DaemonStart ds;
  if (auto rc = daemon_start(argc, argv, "lanes-host-agent",
                             "Runs in a host's namespace: the BPF datapath and the NICs' carrier.", ds))
    return *rc;
  const nlohmann::json& cfg = ds.config;
  const std::string& state_path = ds.state_path;
  const auto& g_stop = stop_requested();

  std::string host = cfg.value("host", "");
  std::string mode = cfg.value("mode", "ecmp");
  bool bpf = mode == "bpf" || mode == "bpf-numa";
  auto hnl_r = Netlink::open_here(host);
  if (!hnl_r) {
    lg::error("{}", hnl_r.error().what());
    return 1;
  }
  Netlink& hnl = hnl_r.value();
  std::string cns_name = cfg.value("container_netns", "");
  auto cns = Netns::open(cns_name);
  if (!cns) {
    lg::error("{}", cns.error().what());
    return 1;
  }
  auto cnl_r = Netlink::open_in(cns.value().fd(), cns_name);
  if (!cnl_r) {
    lg::error("{}", cnl_r.error().what());
    return 1;
  }
  Netlink& cnl = cnl_r.value();

  std::vector<NicState> nics;
  auto hlinks = hnl.links();
  auto clinks = cnl.links();
  if (!hlinks || !clinks) {
    lg::error("listing links failed");
    return 1;
  }
  auto find = [](const std::vector<LinkInfo>& v, const std::string& n) -> const LinkInfo* {
    for (const auto& l : v)
      if (l.name == n) return &l;
    return nullptr;
  };
  DatapathConfig dc;
  dc.mode = mode == "bpf-numa" ? LANES_MODE_BPF_NUMA : LANES_MODE_BPF;
  dc.task4 = cfg.value("task4", "");
  dc.task6 = cfg.value("task6", "");
  dc.cpu_node = cpu_to_node(2);
  for (const auto& n : cfg["nics"]) {
    NicState s;
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
    s.table = n.value("table", 0u);
    const LinkInfo* nl = find(hlinks.value(), s.ifname);
    const LinkInfo* jl = find(hlinks.value(), s.jnic);
    const LinkInfo* el = find(clinks.value(), s.eth);
    if (!nl || !jl || !el) {
      lg::error("{}: NIC {} or its container link is missing", host, s.ifname);
      return 1;
    }
    s.nic_idx = nl->index;
    s.jnic_idx = jl->index;
    s.eth_idx = el->index;
    s.up = nl->admin_up && nl->carrier;
    dc.nics.push_back({s.nic_idx, s.up, s.numa, s.gw4, s.gw6, s.job4, s.job6});
    dc.container_ifindex.push_back(s.jnic_idx);
    dc.container_mac.push_back(el->mac);
    dc.host_mac.push_back(jl->mac);
    nics.push_back(s);
  }

  std::optional<Datapath> dp;
  if (bpf) {
    auto d = Datapath::open_and_load();
    if (!d) {
      lg::error("{}: {}", host, d.error().what());
      return 1;
    }
    dp.emplace(std::move(d).value());
    if (auto st = dp->configure(dc); !st) {
      lg::error("{}: {}", host, st.error().what());
      return 1;
    }
    for (const auto& s : nics) {
      // netkit: the program runs in the device's xmit path through a
      // bpf_link; ingress then goes through the host's routing (the
      // redirect_peer fast path is veth's). veth: tc on both.
      bool netkit = find(hlinks.value(), s.jnic)->kind == "netkit";
      auto eg = netkit ? dp->attach_netkit_egress(s.jnic_idx) : dp->attach_egress(s.jnic_idx);
      if (!eg) {
        lg::error("{}: {}", host, eg.error().what());
        return 1;
      }
      if (netkit) continue;
      if (auto st = dp->attach_ingress(s.nic_idx); !st) {
        lg::error("{}: {}", host, st.error().what());
        return 1;
      }
    }
    lg::info("{}: BPF datapath attached on {} NICs ({})", host, nics.size(), mode);
  }

  // a NIC's state reaches its container link, the container's group and the datapath
  auto apply = [&](NicState& s, bool up) {
    s.up = up;
    if (dp) (void)dp->set_nic_up(s.index, up);
    if (auto st = hnl.set_link_up(s.jnic_idx, up, s.jnic); !st) lg::warn("{}", st.error().what());
    if (up) {
      // taking a device down flushes the routes through it: restore the
      // host's routes to the job's NIC-k addresses and NIC k's own table
      for (int fam : {AF_INET, AF_INET6}) {
        bool v6 = fam == AF_INET6;
        Route jr;
        jr.family = fam;
        jr.dst = (v6 ? s.job6 + "/128" : s.job4 + "/32");
        jr.nexthops.push_back({v6 ? s.cont_side6 : s.cont_side4, s.jnic_idx, 1});
        jr.replace = true;
        if (auto st = hnl.add_route(jr); !st) lg::warn("{}", st.error().what());
        Route out;
        out.family = fam;
        out.dst = "default";
        out.table = s.table;
        out.nexthops.push_back({v6 ? s.gw6 : s.gw4, s.nic_idx, 1});
        out.replace = true;
        if (s.table)
          if (auto st = hnl.add_route(out); !st) lg::warn("{}", st.error().what());
      }
    }
    if (up && mode != "single") {
      // the kernel dropped the container's next hops with the link; restore them
      (void)cnl.add_nexthop(1 + static_cast<uint32_t>(s.index), s.eth_idx, s.host_side4, true);
      (void)cnl.add_nexthop(101 + static_cast<uint32_t>(s.index), s.eth_idx, s.host_side6, true);
      std::vector<std::pair<uint32_t, uint16_t>> m4, m6;
      for (const auto& o : nics)
        if (o.up) {
          m4.emplace_back(1 + static_cast<uint32_t>(o.index), 1);
          m6.emplace_back(101 + static_cast<uint32_t>(o.index), 1);
        }
      ResilientParams rp;
      rp.buckets = 64;
      rp.idle_timer_s = 60;
      if (auto st = cnl.add_nexthop_group(1000, m4, rp, true); !st) lg::warn("{}", st.error().what());
      if (auto st = cnl.add_nexthop_group(1001, m6, rp, true); !st) lg::warn("{}", st.error().what());
    }
    lg::info("{}: {} {}", host, s.ifname, up ? "up: back in use" : "down: out of use");
  };
  for (auto& s : nics)
    if (!s.up) apply(s, false);

  Fd self_ns(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  auto mon = LinkMonitor::open_in(self_ns.get(), host);
  if (!mon) {
    lg::error("{}", mon.error().what());
    return 1;
  }
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = mon.value().fd();
  ::epoll_ctl(ep, EPOLL_CTL_ADD, mon.value().fd(), &ev);

  // NIC state and the datapath's counters; the links' own counters are the
  // kernel's to tell (lanes status and the runner read them over netlink)
  StateFile state_file(state_path);
  auto publish = [&] {
    nlohmann::json out = {{"ready", true}, {"host", host}, {"mode", mode}};
    std::vector<lanes_nic_stats> st;
    std::vector<uint64_t> flows;
    if (dp) {
      if (auto s = dp->stats(static_cast<int>(nics.size()))) st = s.value();
      if (auto f = dp->flows_per_nic(static_cast<int>(nics.size()))) flows = f.value();
    }
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& s : nics) {
      nlohmann::json j = {{"index", s.index}, {"ifname", s.ifname}, {"up", s.up}, {"numa", s.numa}};
      if (static_cast<size_t>(s.index) < st.size()) {
        const auto& x = st[static_cast<size_t>(s.index)];
        j["bpf"] = {{"tx_packets", x.tx_packets}, {"tx_bytes", x.tx_bytes},   {"rx_packets", x.rx_packets},
                    {"rx_bytes", x.rx_bytes},     {"flows_active", x.flows_active}, {"flows_total", x.flows_total},
                    {"moved", x.moved}};
      }
      if (static_cast<size_t>(s.index) < flows.size()) j["flows"] = flows[static_cast<size_t>(s.index)];
      arr.push_back(j);
    }
    out["nics"] = arr;
    if (dp) {
      // per-flow counters: the 256 largest flows
      nlohmann::json fl = nlohmann::json::array();
      if (auto all = dp->flows()) {
        auto v = all.value();
        std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.second.bytes > b.second.bytes; });
        for (size_t i = 0; i < v.size() && i < 256; ++i) {
          const auto& [k, f] = v[i];
          fl.push_back({{"nic", f.nic}, {"bytes", f.bytes}, {"packets", f.packets}, {"closed", f.closed != 0},
                        {"proto", k.proto}, {"family", k.family}, {"sport", ntohs(k.sport)}, {"dport", ntohs(k.dport)}});
        }
      }
      out["flows"] = fl;
    }
    state_file.publish(out);
  };
  publish();
  lg::info("{}: host agent ready ({} NICs, egress {})", host, nics.size(), mode);

  while (!g_stop) {
    epoll_event evs[4];
    int n = ::epoll_wait(ep, evs, 4, 1000);
    if (n > 0) {
      auto events = mon.value().read_events();
      if (events)
        for (const auto& e : events.value())
          for (auto& s : nics)
            if (e.name == s.ifname && !e.deleted) {
              bool up = e.admin_up && e.carrier;
              if (up != s.up) apply(s, up);
            }
    }
    publish();
  }
  lg::info("{}: stopping; the datapath stays attached", host);
  return 0;
}
