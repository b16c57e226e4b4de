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
};

std::vector<uint8_t> build(const Pkt& p) {
  std::vector<uint8_t> b(14 + (p.v6 ? 40 : 20) + 20 + 32, 0);
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

Datapath loaded(const DatapathConfig& c) {
  lanes::test::require_root();
  auto d = Datapath::open_and_load();
  REQUIRE(d.ok());
  REQUIRE(d.value().configure(c).ok());
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
  // the next new flow may use NIC 0 again
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
