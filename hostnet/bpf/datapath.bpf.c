// lanes' host datapath: the eBPF fast path between a job container and the
// host's physical NICs.
//
// lanes_egress  — tc ingress of the host side of every container link: picks
//                 a NIC for each new flow (sticky through an LRU flow table,
//                 the NIC with the fewest active flows, optionally on the
//                 sending CPU's NUMA node) and redirects the packet straight
//                 out of that NIC with bpf_redirect_neigh, bypassing the
//                 host's routing.
// lanes_ingress — tc ingress of every physical NIC: packets for the job's
//                 addresses go straight into the container with
//                 bpf_redirect_peer.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "hostnet_abi.h"
#include "hostnet_maps.h"

#define AF_INET 2
#define AF_INET6 10

struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, LANES_FLOW_ENTRIES);
  __type(key, struct lanes_flow_key);
  __type(value, struct lanes_flow);
} flows SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, LANES_MAX_NICS);
  __type(key, __u32);
  __type(value, struct lanes_nic_stats);
} nic_stats SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, LANES_MAX_CPUS);
  __type(key, __u32);
  __type(value, __u32);
} cpu_node SEC(".maps");

struct parsed {
  struct lanes_flow_key key;
  __u8 fin_or_rst;
};

// Parses from the network header at L3 (PROTO in network order, as in
// skb->protocol and the Ethernet type).
static __always_inline int parse_l3(void *l3, void *end, __u16 proto, struct parsed *p) {
  void *l4;
  if (proto == bpf_htons(ETH_P_IP)) {
    struct iphdr *ip = l3;
    if ((void *)(ip + 1) > end) return -1;
    p->key.family = 4;
    p->key.proto = ip->protocol;
    p->key.saddr[0] = ip->saddr;
    p->key.daddr[0] = ip->daddr;
    if ((bpf_ntohl(ip->daddr) >> 28) == 0xe || ip->daddr == 0xffffffff) return -1;  // multicast, broadcast
    if (ip->frag_off & bpf_htons(0x3fff)) return 0;  // fragments: addresses only
    l4 = (void *)ip + ip->ihl * 4;
  } else if (proto == bpf_htons(ETH_P_IPV6)) {
    struct ipv6hdr *ip6 = l3;
    if ((void *)(ip6 + 1) > end) return -1;
    p->key.family = 6;
    p->key.proto = ip6->nexthdr;
    __builtin_memcpy(p->key.saddr, &ip6->saddr, 16);
    __builtin_memcpy(p->key.daddr, &ip6->daddr, 16);
    l4 = (void *)(ip6 + 1);
    // multicast and link-local (neighbour discovery among them) stay on the link
    __u8 d0 = ip6->daddr.in6_u.u6_addr8[0], d1 = ip6->daddr.in6_u.u6_addr8[1];
    if (d0 == 0xff || (d0 == 0xfe && (d1 & 0xc0) == 0x80)) return -1;
    if (ip6->nexthdr == 58 /* ICMPv6 */) {
      __u8 *type = l4;
      if ((void *)(type + 1) > end) return -1;
      if (*type >= 133 && *type <= 137) return -1;  // router and neighbour discovery, redirects
    }
  } else {
    return -1;  // ARP and the rest: the host's stack handles them
  }
  if (p->key.proto == IPPROTO_TCP) {
    struct tcphdr *th = l4;
    if ((void *)(th + 1) > end) return 0;
    p->key.sport = th->source;
    p->key.dport = th->dest;
    p->fin_or_rst = th->fin || th->rst;
  } else if (p->key.proto == IPPROTO_UDP) {
    struct udphdr *uh = l4;
    if ((void *)(uh + 1) > end) return 0;
    p->key.sport = uh->source;
    p->key.dport = uh->dest;
  }
  return 0;
}

// veth links and physical NICs: Ethernet first
static __always_inline int parse(struct __sk_buff *skb, struct parsed *p) {
  void *data = (void *)(long)skb->data;
  void *end = (void *)(long)skb->data_end;
  struct ethhdr *eth = data;
  if ((void *)(eth + 1) > end) return -1;
  return parse_l3((void *)(eth + 1), end, eth->h_proto, p);
}

static __always_inline int same_addr(const struct lanes_flow_key *k, const __u32 *a4, const __u32 *a6, int src) {
  const __u32 *x = src ? k->saddr : k->daddr;
  if (k->family == 4) return x[0] == *a4 && *a4 != 0;
  return x[0] == a6[0] && x[1] == a6[1] && x[2] == a6[2] && x[3] == a6[3] && (a6[0] | a6[3]) != 0;
}

// The NIC for a new (or stranded) flow: the NIC the flow's source address
// belongs to, else the up NIC with the fewest active flows (then bytes),
// preferring the CPU's NUMA node in bpf-numa mode. -1 if no NIC is up.
// The scan runs through bpf_loop so the verifier checks its body once.
struct pick_ctx {
  const struct lanes_flow_key *key;
  __u32 n;
  __u32 want_node;
  __u32 numa_mode;
  __s32 best;
  __s32 bound;
  __u64 best_score;
};

// A NIC's place in the order pick_nic chooses by: fewest active flows,
// then fewest bytes; in bpf-numa mode a NIC off the CPU's node comes last.
static __always_inline __u64 nic_score(const struct lanes_nic *nic, const struct lanes_nic_stats *st,
                                       const struct pick_ctx *c) {
  __u64 flows_active = st->flows_active > 0xffff ? 0xffff : st->flows_active;
  __u64 score = (flows_active << 44) | ((st->tx_bytes >> 10) & ((1ULL << 44) - 1));
  if (c->numa_mode && nic->numa != c->want_node) score |= 1ULL << 62;
  return score;
}

static long pick_one(__u32 i, void *data) {
  struct pick_ctx *c = data;
  if (i >= c->n) return 1;
  __u32 idx = i;
  struct lanes_nic *nic = bpf_map_lookup_elem(&nics, &idx);
  struct lanes_nic_stats *st = bpf_map_lookup_elem(&nic_stats, &idx);
  if (!nic || !st || !nic->up) return 0;
  if (same_addr(c->key, &nic->job4, nic->job6, 1)) {
    c->bound = i;
    return 1;
  }
  __u64 score = nic_score(nic, st, c);
  if (score < c->best_score) {
    c->best_score = score;
    c->best = i;
  }
  return 0;
}

static __always_inline void pick_scan(const struct lanes_config *cfg, const struct lanes_flow_key *key,
                                      struct pick_ctx *c) {
  __u32 cpu = bpf_get_smp_processor_id();
  __u32 *node = bpf_map_lookup_elem(&cpu_node, &cpu);
  c->key = key;
  c->n = cfg->n_nics;
  c->want_node = node ? *node : 0;
  c->numa_mode = cfg->mode == LANES_MODE_BPF_NUMA;
  c->best = -1;
  c->bound = -1;
  c->best_score = ~0ULL;
  bpf_loop(LANES_MAX_NICS, pick_one, c, 0);
}

static __always_inline int pick_nic(const struct lanes_config *cfg, const struct lanes_flow_key *key) {
  struct pick_ctx c = {};
  pick_scan(cfg, key, &c);
  return c.bound >= 0 ? c.bound : c.best;
}

// Moves FLOW from NIC FROM to NIC TO: the active counts follow it.
static __always_inline void move_flow(struct lanes_flow *flow, __u32 from, __u32 to, int rebalance) {
  struct lanes_nic_stats *old = bpf_map_lookup_elem(&nic_stats, &from);
  struct lanes_nic_stats *nst = bpf_map_lookup_elem(&nic_stats, &to);
  if (old) {
    if (!rebalance) __sync_fetch_and_add(&old->moved, 1);
    if (!flow->closed) __sync_fetch_and_add(&old->flows_active, -1);
  }
  if (nst) {
    if (rebalance) __sync_fetch_and_add(&nst->rebalanced, 1);
    if (!flow->closed) __sync_fetch_and_add(&nst->flows_active, 1);
  }
  flow->nic = to;
}

// Once per epoch (a NIC came back) an open flow on an up NIC is weighed
// against the least loaded NIC: it moves there if its own NIC carries at
// least two active flows more, so the moves stop at balance. The flow's
// packets in flight on the old NIC may then arrive after its first ones on
// the new NIC: a moment of reordering that TCP absorbs (the price of
// getting a returned NIC's bandwidth back without waiting for flows to end).
static __always_inline __u32 rebalance(const struct lanes_config *cfg, const struct lanes_flow_key *key,
                                       struct lanes_flow *flow, __u32 cur) {
  flow->epoch = cfg->epoch;
  if (flow->closed) return cur;
  struct pick_ctx c = {};
  pick_scan(cfg, key, &c);
  if (c.bound >= 0 || c.best < 0 || (__u32)c.best == cur) return cur;
  __u32 b = (__u32)c.best;
  struct lanes_nic *cn = bpf_map_lookup_elem(&nics, &cur);
  struct lanes_nic_stats *cs = bpf_map_lookup_elem(&nic_stats, &cur);
  struct lanes_nic *bn = bpf_map_lookup_elem(&nics, &b);
  struct lanes_nic_stats *bs = bpf_map_lookup_elem(&nic_stats, &b);
  if (!cn || !cs || !bn || !bs) return cur;
  if (c.numa_mode && bn->numa != c.want_node && cn->numa == c.want_node) return cur;  // never off its node
  if (cs->flows_active < bs->flows_active + 2) return cur;
  move_flow(flow, cur, b, 1);
  return b;
}

static __always_inline int egress(struct __sk_buff *skb, struct parsed p) {
  __u32 zero = 0;
  struct lanes_config *cfg = bpf_map_lookup_elem(&config, &zero);
  if (!cfg || cfg->n_nics == 0 || cfg->n_nics > LANES_MAX_NICS) return TC_ACT_OK;

  __u64 now = bpf_ktime_get_ns();
  int nic_i;
  struct lanes_flow *flow = bpf_map_lookup_elem(&flows, &p.key);
  if (flow) {
    __u32 cur = flow->nic;
    struct lanes_nic *cn = bpf_map_lookup_elem(&nics, &cur);
    if (cn && cn->up) {
      nic_i = flow->epoch == cfg->epoch ? cur : rebalance(cfg, &p.key, flow, cur);
    } else {
      // its NIC went down: move the flow
      nic_i = pick_nic(cfg, &p.key);
      if (nic_i < 0) return TC_ACT_SHOT;
      move_flow(flow, cur, (__u32)nic_i, 0);
      flow->epoch = cfg->epoch;
    }
  } else {
    nic_i = pick_nic(cfg, &p.key);
    if (nic_i < 0) return TC_ACT_SHOT;
    struct lanes_flow f = {.nic = nic_i, .epoch = cfg->epoch, .first_ns = now};
    bpf_map_update_elem(&flows, &p.key, &f, BPF_NOEXIST);
    flow = bpf_map_lookup_elem(&flows, &p.key);
    __u32 ni = nic_i;
    struct lanes_nic_stats *nst = bpf_map_lookup_elem(&nic_stats, &ni);
    if (nst) {
      __sync_fetch_and_add(&nst->flows_active, 1);
      __sync_fetch_and_add(&nst->flows_total, 1);
    }
  }
  __u32 ni = nic_i;
  struct lanes_nic *nic = bpf_map_lookup_elem(&nics, &ni);
  struct lanes_nic_stats *st = bpf_map_lookup_elem(&nic_stats, &ni);
  if (!nic || !st) return TC_ACT_SHOT;
  __sync_fetch_and_add(&st->tx_packets, 1);
  __sync_fetch_and_add(&st->tx_bytes, skb->len);
  if (flow) {
    __sync_fetch_and_add(&flow->packets, 1);
    __sync_fetch_and_add(&flow->bytes, skb->len);
    flow->last_ns = now;
    if (p.fin_or_rst && !flow->closed) {
      flow->closed = 1;
      __sync_fetch_and_add(&st->flows_active, -1);
    }
  }
  struct bpf_redir_neigh nh = {};
  if (p.key.family == 4) {
    nh.nh_family = AF_INET;
    nh.ipv4_nh = nic->gw4;
  } else {
    nh.nh_family = AF_INET6;
    __builtin_memcpy(nh.ipv6_nh, nic->gw6, 16);
  }
  return bpf_redirect_neigh(nic->ifindex, &nh, sizeof(nh), 0);
}

// The headers may lie partly outside the linear data (large GSO packets from
// the container): pull them in, or later packets of a flow would be keyed
// without their ports and its FIN never seen.
static __always_inline void pull_headers(struct __sk_buff *skb) {
  __u32 want = 14 + 40 + 60;
  if ((void *)(long)skb->data + want > (void *)(long)skb->data_end)
    bpf_skb_pull_data(skb, skb->len < want ? skb->len : want);
}

SEC("tc")
int lanes_egress(struct __sk_buff *skb) {
  struct parsed p = {};
  pull_headers(skb);
  if (parse(skb, &p) < 0) return TC_ACT_OK;
  return egress(skb, p);
}

// The same for a netkit primary device in L3 mode (BPF_NETKIT_PRIMARY):
// no Ethernet header, the family from skb->protocol. Its verdicts share
// TC_ACT_* values (NETKIT_PASS = 0, NETKIT_DROP = 2, NETKIT_REDIRECT = 7).
SEC("tc")
int lanes_egress_l3(struct __sk_buff *skb) {
  struct parsed p = {};
  void *data = (void *)(long)skb->data;
  void *end = (void *)(long)skb->data_end;
  if (parse_l3(data, end, skb->protocol, &p) < 0) return TC_ACT_OK;
  return egress(skb, p);
}

struct match_ctx {
  const struct lanes_flow_key *key;
  __u32 n;
  __u32 ifindex;
  __s32 link;
  __s32 arrived;
};

static long match_one(__u32 i, void *data) {
  struct match_ctx *m = data;
  if (i >= m->n) return 1;
  __u32 idx = i;
  struct lanes_nic *nic = bpf_map_lookup_elem(&nics, &idx);
  if (!nic) return 0;
  if (nic->ifindex == m->ifindex) m->arrived = i;
  if (same_addr(m->key, &nic->job4, nic->job6, 0)) m->link = i;
  return 0;
}

// A FIN or RST from the far end ends a flow too (a receiver that resets its
// connections is never seen leaving): find the flow under its egress key.
static __always_inline void close_from_remote(const struct parsed *p) {
  if (p->key.proto != IPPROTO_TCP || !p->fin_or_rst) return;
  struct lanes_flow_key k = {};
  __builtin_memcpy(k.saddr, p->key.daddr, 16);
  __builtin_memcpy(k.daddr, p->key.saddr, 16);
  k.sport = p->key.dport;
  k.dport = p->key.sport;
  k.family = p->key.family;
  k.proto = p->key.proto;
  struct lanes_flow *f = bpf_map_lookup_elem(&flows, &k);
  if (!f || f->closed) return;
  f->closed = 1;
  __u32 nic = f->nic;
  struct lanes_nic_stats *st = bpf_map_lookup_elem(&nic_stats, &nic);
  if (st) __sync_fetch_and_add(&st->flows_active, -1);
}

SEC("tc")
int lanes_ingress(struct __sk_buff *skb) {
  struct parsed p = {};
  if (parse(skb, &p) < 0) return TC_ACT_OK;
  close_from_remote(&p);
  __u32 zero = 0;
  struct lanes_config *cfg = bpf_map_lookup_elem(&config, &zero);
  if (!cfg || cfg->n_nics == 0 || cfg->n_nics > LANES_MAX_NICS) return TC_ACT_OK;
  // which container link: the NIC the packet came in on (for the task IP),
  // or the NIC whose job address it is for
  struct match_ctx m = {.key = &p.key, .n = cfg->n_nics, .ifindex = skb->ingress_ifindex, .link = -1, .arrived = -1};
  bpf_loop(LANES_MAX_NICS, match_one, &m, 0);
  int link = m.link, arrived = m.arrived;
  if (link < 0 && same_addr(&p.key, &cfg->task4, cfg->task6, 0)) link = arrived;
  if (link < 0 || link >= LANES_MAX_NICS) return TC_ACT_OK;  // not the job's: the host's stack
  __u32 l = (__u32)link & (LANES_MAX_NICS - 1);  // a bound the verifier can see
  void *data = (void *)(long)skb->data;
  void *end = (void *)(long)skb->data_end;
  struct ethhdr *eth = data;
  if ((void *)(eth + 1) > end) return TC_ACT_OK;
  __builtin_memcpy(eth->h_dest, cfg->container_mac[l], 6);
  __builtin_memcpy(eth->h_source, cfg->host_mac[l], 6);
  __u32 li = arrived >= 0 && arrived < LANES_MAX_NICS ? (__u32)arrived : l;
  struct lanes_nic_stats *st = bpf_map_lookup_elem(&nic_stats, &li);
  if (st) {
    __sync_fetch_and_add(&st->rx_packets, 1);
    __sync_fetch_and_add(&st->rx_bytes, skb->len);
  }
  return bpf_redirect_peer(cfg->container_ifindex[l], 0);
}

char LICENSE[] SEC("license") = "GPL";
