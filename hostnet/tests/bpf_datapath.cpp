// bpf tier: the datapath programs run through bpf_prog_test_run_opts on
// table-driven packets — verdict and chosen NIC as expected.

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/tcp.h>
#include <linux/udp.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "lanes/hostnet/datapath.hpp"
#include "support.hpp"

using namespace lanes::hostnet;

namespace {

struct Pkt {
  bool v6 = false;
  int proto = IPPROTO_TCP;
  std::string src, dst;
  uint16_t sport = 0, dport = 0;
  bool fin = false;
  size_t payload = 32;
};

std::vector<uint8_t> build(const Pkt& p) {
  std::vector<uint8_t> b(14 + (p.v6 ? 40 : 20) + 20 + p.payload, 0);
  auto* eth = reinterpret_cast<ethhdr*>(b.data());
  eth->h_proto = htons(p.v6 ? ETH_P_IPV6 : ETH_P_IP);
  uint8_t* l3 = b.data() + 14;
  uint8_t* l4;
  size_t l4len = b.size() - 14 - (p.v6 ? 40 : 20);
  if (p.v6) {
    auto* ip6 = reinterpret_cast<ipv6hdr*>(l3);
    ip6->version = 6;
    ip6->nexthdr = static_cast<uint8_t>(p.proto);
    ip6->hop_limit = 64;
    ip6->payload_len = htons(static_cast<uint16_t>(l4len));
    inet_pton(AF_INET6, p.src.c_str(), &ip6->saddr);
    inet_pton(AF_INET6, p.dst.c_str(), &ip6->daddr);
    l4 = l3 + 40;
  } else {
    auto* ip = reinterpret_cast<iphdr*>(l3);
    ip->version = 4;
    ip->ihl = 5;
    ip->ttl = 64;
    ip->protocol = static_cast<uint8_t>(p.proto);
    ip->tot_len = htons(static_cast<uint16_t>(b.size() - 14));
    inet_pton(AF_INET, p.src.c_str(), &ip->saddr);
    inet_pton(AF_INET, p.dst.c_str(), &ip->daddr);
    l4 = l3 + 20;
  }
  if (p.proto == IPPROTO_TCP) {
    auto* th = reinterpret_cast<tcphdr*>(l4);
    th->source = htons(p.sport);
    th->dest = htons(p.dport);
    th->doff = 5;
    th->ack = 1;
    th->fin = p.fin;
  } else if (p.proto == IPPROTO_UDP) {
    auto* uh = reinterpret_cast<udphdr*>(l4);
    uh->source = htons(p.sport);
    uh->dest = htons(p.dport);
    uh->len = htons(static_cast<uint16_t>(l4len));
  }
  return b;
}

struct Run {
  int retval = -1;
  std::vector<uint8_t> out;
};

Run run(int prog_fd, const std::vector<uint8_t>& pkt, int ingress_ifindex = 0) {
  Run r;
  r.out.resize(pkt.size() + 256);
  __sk_buff ctx{};
  ctx.ingress_ifindex = static_cast<uint32_t>(ingress_ifindex);
  LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt.data(), .data_out = r.out.data(),
              .data_size_in = static_cast<uint32_t>(pkt.size()), .data_size_out = static_cast<uint32_t>(r.out.size()));
  if (ingress_ifindex) {
    opts.ctx_in = &ctx;
    opts.ctx_size_in = sizeof ctx;
  }
  int err = bpf_prog_test_run_opts(prog_fd, &opts);
  REQUIRE(err == 0);
  r.retval = static_cast<int>(opts.retval);
  r.out.resize(opts.data_size_out);
  return r;
}

// The NIC the flow table holds for the flow of P, or -1.
int nic_of(Datapath& dp, const Pkt& p) {
  lanes_flow_key k{};
  k.family = p.v6 ? 6 : 4;
  k.proto = static_cast<uint8_t>(p.proto);
  k.sport = htons(p.sport);
  k.dport = htons(p.dport);
  inet_pton(p.v6 ? AF_INET6 : AF_INET, p.src.c_str(), k.saddr);
  inet_pton(p.v6 ? AF_INET6 : AF_INET, p.dst.c_str(), k.daddr);
  lanes_flow f{};
  if (bpf_map_lookup_elem(dp.flows_fd(), &k, &f)) return -1;
  return static_cast<int>(f.nic);
}

DatapathConfig four_nics(int mode = LANES_MODE_BPF) {
  DatapathConfig c;
  c.mode = mode;
  for (int i = 0; i < 4; ++i) {
    c.nics.push_back({10 + i, true, i / 2, "198.18.128." + std::to_string(2 * i), "2001:2:0:2::" + std::to_string(2 * i),
                      "198.19.1." + std::to_string(i), "2001:2:0:100::10" + std::to_string(i)});
    c.container_ifindex.push_back(20 + i);
    c.container_mac.push_back({0x02, 0, 0, 0, 0x20, static_cast<uint8_t>(i)});
    c.host_mac.push_back({0x02, 0, 0, 0, 0x10, static_cast<uint8_t>(i)});
  }
  c.task4 = "198.19.0.1";
  c.task6 = "2001:2:0:100::1";
  c.cpu_node.assign(8, 0);
  return c;
}

// The programs' clock stands still (at kT0) unless a test moves it: the
// load windows (kWindow) turn only when it says so.
constexpr uint64_t kT0 = 1'000'000'000'000;
constexpr uint64_t kWindow = 50'000'000;

Datapath loaded(const DatapathConfig& c) {
  lanes::test::require_root();
  auto d = Datapath::open_and_load();
  REQUIRE(d.ok());
  REQUIRE(d.value().configure(c).ok());
  REQUIRE(d.value().set_clock(kT0).ok());
  return std::move(d).value();
}

Pkt tcp4(uint16_t sport, const std::string& src = "198.19.0.1") {
  return {false, IPPROTO_TCP, src, "198.18.128.17", sport, 5201};
}

}  // namespace

TEST_CASE("egress: new flows go to the least-loaded NIC and stay there", "[bpf]") {
  auto dp = loaded(four_nics());
  struct Case {
    const char* what;
    Pkt pkt;
    int verdict;
    int nic;
  };
  const Case cases[] = {
      {"first TCP flow: all NICs idle, the first one", tcp4(40000), TC_ACT_REDIRECT, 0},
      {"second flow: the NIC with the fewest active flows", tcp4(40001), TC_ACT_REDIRECT, 1},
      {"third flow", tcp4(40002), TC_ACT_REDIRECT, 2},
      {"fourth flow: 4 flows on 4 NICs", tcp4(40003), TC_ACT_REDIRECT, 3},
      {"known flow keeps its NIC", tcp4(40001), TC_ACT_REDIRECT, 1},
      {"UDP over IPv6, a fifth flow", {true, IPPROTO_UDP, "2001:2:0:100::1", "2001:2:0:2::11", 5000, 6000}, TC_ACT_REDIRECT, 0},
      {"a flow from NIC 3's own address stays on NIC 3", tcp4(40010, "198.19.1.3"), TC_ACT_REDIRECT, 3},
      {"ARP-like non-IP frames go to the host's stack", {}, TC_ACT_OK, -1},
      {"IPv6 multicast (neighbour solicitation) stays on the link", {true, 58, "2001:2:0:100::1", "ff02::1:ff00:1", 0, 0}, TC_ACT_OK, -2},
      {"IPv6 link-local stays on the link", {true, IPPROTO_UDP, "fe80::1", "fe80::2", 1, 2}, TC_ACT_OK, -2},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    std::vector<uint8_t> pkt;
    if (c.nic == -1) {
      pkt.assign(64, 0);
      reinterpret_cast<ethhdr*>(pkt.data())->h_proto = htons(ETH_P_ARP);
    } else {
      pkt = build(c.pkt);
    }
    auto r = run(dp.egress_fd(), pkt);
    CHECK(r.retval == c.verdict);
    if (c.nic >= 0) CHECK(nic_of(dp, c.pkt) == c.nic);
    if (c.nic == -2) CHECK(nic_of(dp, c.pkt) == -1);  // not a flow
  }
  auto st = dp.stats(4).value();
  CHECK(st[0].flows_active == 2);
  CHECK(st[1].flows_active == 1);
  CHECK(st[3].flows_active == 2);
}

TEST_CASE("egress: a NIC marked down gets no new flows and its flows move once", "[bpf]") {
  auto dp = loaded(four_nics());
  for (uint16_t p = 0; p < 4; ++p) CHECK(run(dp.egress_fd(), build(tcp4(41000 + p))).retval == TC_ACT_REDIRECT);
  REQUIRE(nic_of(dp, tcp4(41002)) == 2);
  REQUIRE(dp.set_nic_up(2, false).ok());
  CHECK(run(dp.egress_fd(), build(tcp4(41002))).retval == TC_ACT_REDIRECT);
  int moved_to = nic_of(dp, tcp4(41002));
  CHECK(moved_to != 2);
  CHECK(moved_to >= 0);
  CHECK(run(dp.egress_fd(), build(tcp4(41002))).retval == TC_ACT_REDIRECT);
  CHECK(nic_of(dp, tcp4(41002)) == moved_to);  // moved once, then sticky
  for (uint16_t p = 0; p < 8; ++p) {
    run(dp.egress_fd(), build(tcp4(42000 + p)));
    CHECK(nic_of(dp, tcp4(42000 + p)) != 2);
  }
  auto st = dp.stats(4).value();
  CHECK(st[2].moved == 1);
  CHECK(st[2].flows_active == 0);
  // every NIC down: nothing can leave
  for (int i = 0; i < 4; ++i) REQUIRE(dp.set_nic_up(i, false).ok());
  CHECK(run(dp.egress_fd(), build(tcp4(43000))).retval == TC_ACT_SHOT);
}

TEST_CASE("egress: FIN ends a flow's active count", "[bpf]") {
  auto dp = loaded(four_nics());
  auto p = tcp4(44000);
  run(dp.egress_fd(), build(p));
  CHECK(dp.stats(4).value()[0].flows_active == 1);
  p.fin = true;
  run(dp.egress_fd(), build(p));
  CHECK(dp.stats(4).value()[0].flows_active == 0);
  // once it has not sent for a window, the next new flow may use NIC 0 again
  REQUIRE(dp.set_clock(kT0 + 2 * kWindow).ok());
  run(dp.egress_fd(), build(tcp4(44001)));
  CHECK(nic_of(dp, tcp4(44001)) == 0);
}

TEST_CASE("ingress: a reset from the far end ends the flow's active count", "[bpf]") {
  auto dp = loaded(four_nics());
  auto p = tcp4(46000);
  run(dp.egress_fd(), build(p));
  int nic = nic_of(dp, p);
  REQUIRE(nic >= 0);
  CHECK(dp.stats(4).value()[static_cast<size_t>(nic)].flows_active == 1);
  // the storage server resets the connection: the packet comes in on a NIC
  Pkt rst{false, IPPROTO_TCP, p.dst, p.src, p.dport, p.sport};
  auto pkt = build(rst);
  reinterpret_cast<tcphdr*>(pkt.data() + 14 + 20)->rst = 1;
  run(dp.ingress_fd(), pkt, 10);
  CHECK(dp.stats(4).value()[static_cast<size_t>(nic)].flows_active == 0);
}

TEST_CASE("egress bpf-numa: new flows prefer the sending CPU's node", "[bpf]") {
  auto cfg = four_nics(LANES_MODE_BPF_NUMA);
  cfg.cpu_node.assign(256, 1);  // every CPU on node 1: NICs 2 and 3
  auto dp = loaded(cfg);
  for (uint16_t p = 0; p < 6; ++p) {
    run(dp.egress_fd(), build(tcp4(45000 + p)));
    int nic = nic_of(dp, tcp4(45000 + p));
    CHECK((nic == 2 || nic == 3));
  }
  // node 1's NICs down: fall back to node 0
  REQUIRE(dp.set_nic_up(2, false).ok());
  REQUIRE(dp.set_nic_up(3, false).ok());
  run(dp.egress_fd(), build(tcp4(45100)));
  int nic = nic_of(dp, tcp4(45100));
  CHECK((nic == 0 || nic == 1));
}

TEST_CASE("ingress: the job's packets go straight to its container link", "[bpf]") {
  auto dp = loaded(four_nics());
  struct Case {
    const char* what;
    Pkt pkt;
    int arrived_on;
    int verdict;
    int link;  // container link whose MAC the packet gets
  };
  const Case cases[] = {
      {"task IP arriving on NIC 2 enters through link 2", {false, IPPROTO_TCP, "198.18.128.17", "198.19.0.1", 5201, 40000}, 12, TC_ACT_REDIRECT, 2},
      {"NIC 1's job address enters through link 1", {false, IPPROTO_UDP, "198.18.128.17", "198.19.1.1", 1, 2}, 10, TC_ACT_REDIRECT, 1},
      {"IPv6 task IP on NIC 3", {true, IPPROTO_TCP, "2001:2:0:2::11", "2001:2:0:100::1", 5201, 40000}, 13, TC_ACT_REDIRECT, 3},
      {"the host's own address: the host's stack", {false, IPPROTO_TCP, "198.18.128.17", "198.18.128.1", 1, 2}, 10, TC_ACT_OK, -1},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    auto r = run(dp.ingress_fd(), build(c.pkt), c.arrived_on);
    CHECK(r.retval == c.verdict);
    if (c.link >= 0) {
      REQUIRE(r.out.size() >= 14);
      CHECK(r.out[5] == c.link);       // destination MAC: the container side of the link
      CHECK(r.out[4] == 0x20);
      CHECK(r.out[11] == c.link);      // source MAC: the host side
    }
  }
  CHECK(dp.stats(4).value()[2].rx_packets == 1);
}

namespace {

// A flow table driven window by window on the programs' clock: flows that
// send BYTES each window (in 1400-byte packets), the NIC each one is on.
struct Windows {
  Datapath& dp;
  uint64_t now = kT0;
  explicit Windows(Datapath& d) : dp(d) {}
  void send(const Pkt& p, size_t bytes) {
    Pkt q = p;
    q.payload = 1400;
    for (size_t sent = 0; sent < bytes; sent += 1400) REQUIRE(run(dp.egress_fd(), build(q)).retval == TC_ACT_REDIRECT);
  }
  void next() {
    now += kWindow;
    REQUIRE(dp.set_clock(now).ok());
  }
  // N windows in which every flow of FLOWS sends BYTES
  void run_for(int n, const std::vector<Pkt>& flows, size_t bytes) {
    for (int w = 0; w < n; ++w) {
      next();
      for (const auto& f : flows) send(f, bytes);
    }
  }
  std::vector<int> per_nic(const std::vector<Pkt>& flows) {
    std::vector<int> n(4, 0);
    for (const auto& f : flows) {
      int nic = nic_of(dp, f);
      REQUIRE(nic >= 0);
      ++n[static_cast<size_t>(nic)];
    }
    return n;
  }
};

std::vector<Pkt> bulk(int n, uint16_t base) {
  std::vector<Pkt> v;
  for (int i = 0; i < n; ++i) v.push_back(tcp4(static_cast<uint16_t>(base + i)));
  return v;
}

std::string show(const std::vector<int>& v) {
  std::string o;
  for (int x : v) o += " " + std::to_string(x);
  return o;
}

}  // namespace

TEST_CASE("egress: 1 to 8 bulk flows on 4 NICs, beside idle connections, end up as even as they can be", "[bpf]") {
  for (int k = 1; k <= 8; ++k) {
    INFO(k << " bulk flows");
    auto dp = loaded(four_nics());
    Windows w(dp);
    // what a real host has besides the bulk flows: a BGP session from each
    // NIC's own address (bound to its NIC) and a control connection that
    // spoke a moment before the transfers began (iperf3's), then fell silent
    std::vector<Pkt> sessions;
    for (int i = 0; i < 4; ++i) sessions.push_back(tcp4(179, "198.19.1." + std::to_string(i)));
    for (const auto& s : sessions) w.send(s, 200);
    w.next();
    Pkt control = tcp4(39999);
    w.send(control, 300);
    auto flows = bulk(k, 40000);
    for (const auto& f : flows) w.send(f, 1);  // every SYN in the same window
    w.run_for(6, flows, 14000);
    auto n = w.per_nic(flows);
    INFO("per NIC:" << show(n));
    for (int x : n) CHECK((x == k / 4 || x == (k + 3) / 4));
    // they stay there
    auto st0 = dp.stats(4).value();
    w.run_for(30, flows, 14000);
    CHECK(w.per_nic(flows) == n);
    auto st1 = dp.stats(4).value();
    for (size_t i = 0; i < 4; ++i) CHECK(st1[i].rebalanced == st0[i].rebalanced);
    for (int i = 0; i < 4; ++i) CHECK(nic_of(dp, sessions[static_cast<size_t>(i)]) == i);
  }
}

TEST_CASE("egress: flows that end leave NICs idle: a NIC carrying two gives one over, once", "[bpf]") {
  auto dp = loaded(four_nics());
  Windows w(dp);
  auto first = bulk(4, 40100);
  for (const auto& f : first) w.send(f, 1);
  REQUIRE(w.per_nic(first) == std::vector<int>{1, 1, 1, 1});
  w.run_for(2, first, 14000);
  // two more while every NIC is equally busy: NICs 0 and 1 (the fewest open flows, in order)
  Pkt x = tcp4(40200), y = tcp4(40201);
  w.send(x, 1);
  w.send(y, 1);
  REQUIRE(nic_of(dp, x) == 0);
  REQUIRE(nic_of(dp, y) == 1);
  // the flows on NICs 2 and 3 end
  for (size_t i : {2u, 3u}) {
    Pkt fin = first[i];
    fin.fin = true;
    w.send(fin, 1);
  }
  std::vector<Pkt> left = {first[0], first[1], x, y};
  w.run_for(4, left, 14000);
  auto n = w.per_nic(left);
  INFO("per NIC:" << show(n));
  CHECK(n == std::vector<int>{1, 1, 1, 1});
  uint64_t moves = 0;
  for (const auto& s : dp.stats(4).value()) moves += s.rebalanced;
  CHECK(moves == 2);
  w.run_for(40, left, 14000);
  CHECK(w.per_nic(left) == n);
  uint64_t later = 0;
  for (const auto& s : dp.stats(4).value()) later += s.rebalanced;
  CHECK(later == moves);  // no flow moves back and forth
}

TEST_CASE("egress: idle connections do not weigh like bulk flows", "[bpf]") {
  auto cfg = four_nics();
  for (auto& n : cfg.nics) n.line_rate = 320'000;  // bytes/s: one bulk flow below fills 7/8 of it
  auto dp = loaded(cfg);
  Windows w(dp);
  // NIC 0: three connections that say something now and then; NICs 1-3: a bulk flow each
  auto idle = bulk(3, 40300);
  auto busy = bulk(3, 40400);
  for (const auto& f : idle) w.send(f, 1);
  REQUIRE(w.per_nic(idle) == std::vector<int>{1, 1, 1, 0});
  // move the idle ones' start out of the way: they were placed before anything was busy
  w.run_for(3, {}, 0);
  for (const auto& f : busy) w.send(f, 1);
  w.run_for(3, busy, 14000);
  // a window in which the idle ones say something too
  w.next();
  for (const auto& f : busy) w.send(f, 14000);
  for (const auto& f : idle) w.send(f, 100);
  auto load = w.per_nic(busy);
  INFO("bulk per NIC:" << show(load));
  // the new bulk flow goes where no load is, however many idle connections are there
  w.next();
  Pkt fresh = tcp4(40500);
  w.send(fresh, 1);
  int nic = nic_of(dp, fresh);
  for (size_t i = 0; i < 4; ++i)
    if (load[i] == 0) CHECK(nic == static_cast<int>(i));
}

TEST_CASE("egress: a returned NIC takes back a flow from the NIC that carried two", "[bpf]") {
  auto dp = loaded(four_nics());
  Windows w(dp);
  auto flows = bulk(4, 40600);
  for (const auto& f : flows) w.send(f, 1);
  w.run_for(2, flows, 14000);
  REQUIRE(w.per_nic(flows) == std::vector<int>{1, 1, 1, 1});
  REQUIRE(dp.set_nic_up(2, false).ok());
  w.run_for(3, flows, 14000);
  auto down = w.per_nic(flows);
  CHECK(down[2] == 0);
  REQUIRE(dp.set_nic_up(2, true).ok());
  w.run_for(2, flows, 14000);
  CHECK(w.per_nic(flows) == std::vector<int>{1, 1, 1, 1});
  CHECK(dp.stats(4).value()[2].moved == 1);
  CHECK(dp.stats(4).value()[2].rebalanced == 1);
}

TEST_CASE("egress bpf-numa: local NICs first, the other node's only while they are full", "[bpf]") {
  auto cfg = four_nics(LANES_MODE_BPF_NUMA);
  cfg.cpu_node.assign(256, 1);  // every CPU on node 1: NICs 2 and 3
  constexpr size_t kPerWindow = 14000;  // bytes per flow per window: 280 kB/s
  SECTION("light flows stay home") {
    for (auto& n : cfg.nics) n.line_rate = 100'000'000;
    auto dp = loaded(cfg);
    Windows w(dp);
    auto flows = bulk(16, 40700);
    for (const auto& f : flows) w.send(f, 1);
    w.run_for(10, flows, kPerWindow);
    CHECK(w.per_nic(flows) == std::vector<int>{0, 0, 8, 8});
    for (const auto& s : dp.stats(4).value()) CHECK(s.spilled == 0);
  }
  SECTION("full local NICs spill to the other node") {
    // 8 flows fill a local NIC: 8 x 280 kB/s = its line rate
    for (auto& n : cfg.nics) n.line_rate = 8 * kPerWindow * 20;
    auto dp = loaded(cfg);
    Windows w(dp);
    auto flows = bulk(16, 40800);
    for (const auto& f : flows) w.send(f, 1);
    CHECK(w.per_nic(flows) == std::vector<int>{0, 0, 8, 8});  // placed at home first
    w.run_for(10, flows, kPerWindow);
    auto n = w.per_nic(flows);
    INFO("per NIC:" << show(n));
    CHECK(n[0] >= 1);
    CHECK(n[1] >= 1);
    CHECK(n[2] + n[3] > n[0] + n[1]);  // home keeps the most
    CHECK(n[0] + n[1] + n[2] + n[3] == 16);
    auto st = dp.stats(4).value();
    CHECK(st[0].spilled + st[1].spilled == static_cast<uint64_t>(n[0] + n[1]));
    CHECK(st[2].spilled + st[3].spilled == 0);
    // each flow says where it came from: node 1
    for (const auto& [k, f] : dp.flows().value()) CHECK(f.node == 1);
    // the flows at home end: the ones away come home, where there is room now
    std::vector<Pkt> away;
    for (const auto& f : flows) {
      int nic = nic_of(dp, f);
      if (nic >= 2) {
        Pkt fin = f;
        fin.fin = true;
        w.send(fin, 1);
      } else {
        away.push_back(f);
      }
    }
    w.run_for(2 + 10, away, kPerWindow);  // past the hold on a moved flow
    auto back = w.per_nic(away);
    INFO("the ones that were away, per NIC:" << show(back));
    CHECK(back[0] + back[1] == 0);
  }
  SECTION("a flow that fills a whole NIC away comes home once a NIC there is idle") {
    // one flow is a NIC's line rate: two at home make it twice full, and
    // one of each pair spills; once the ones at home end, each spilled
    // flow, still as fast as a whole NIC, fits an idle NIC at home
    for (auto& n : cfg.nics) n.line_rate = kPerWindow * 20;
    auto dp = loaded(cfg);
    Windows w(dp);
    auto flows = bulk(4, 40900);
    for (const auto& f : flows) w.send(f, 1);
    CHECK(w.per_nic(flows) == std::vector<int>{0, 0, 2, 2});
    w.run_for(10, flows, kPerWindow);
    CHECK(w.per_nic(flows) == std::vector<int>{1, 1, 1, 1});
    std::vector<Pkt> away;
    for (const auto& f : flows) {
      if (nic_of(dp, f) >= 2) {
        Pkt fin = f;
        fin.fin = true;
        w.send(fin, 1);
      } else {
        away.push_back(f);
      }
    }
    w.run_for(2 + 10, away, kPerWindow);
    CHECK(w.per_nic(away) == std::vector<int>{0, 0, 1, 1});
  }
}
