// lanes' host datapath: the eBPF fast path between a job container and the
// host's physical NICs.
//
// lanes_egress  — tc ingress of the host side of every container link: picks
//                 a NIC for each new flow (sticky through an LRU flow table,
//                 the least loaded NIC, in bpf-numa mode of the sending
//                 CPU's node until its NICs are full), moves a flow when
//                 that balances the NICs' measured load, and redirects the
//                 packet straight out of its NIC with bpf_redirect_neigh,
//                 bypassing the host's routing.
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

// Load, measured per window (lanes_config.window_ns, 50 ms unless set):
// each NIC and each flow keeps its bytes/s over its last whole window, and
// each NIC how many flows sent on it in this window and the last. A
// measurement is rolled over by the first packet of a new window.
// a flow the balancer moved stays put for this many windows
#define LANES_MOVE_HOLD 10
// the least rate worth moving (bytes/s): 1/64 of the NIC's line rate, and
// never below 128 KiB/s (a connection that only chatters stays put)
#define LANES_MOVE_FLOOR (128ULL << 10)

static __always_inline __u64 clock_now(const struct lanes_config *cfg) {
  return cfg->clock_ns ? cfg->clock_ns : bpf_ktime_get_ns();
}

static __always_inline __u64 window_ns(const struct lanes_config *cfg) {
  return cfg->window_ns ? cfg->window_ns : LANES_WINDOW_NS;
}

// bytes/s of BYTES sent over NS nanoseconds
static __always_inline __u64 per_second(__u64 bytes, __u64 ns) {
  __u64 us = ns / 1000;
  return us ? bytes * 1000000ULL / us : 0;
}

// A NIC's rate as last measured; 0 once it has sent nothing for a whole window.
static __always_inline __u64 nic_rate(const struct lanes_nic_stats *st, __u64 slot) {
  return st->slot + 1 >= slot ? st->rate : 0;
}

// Flows that sent on a NIC in this window or the last.
static __always_inline __u64 nic_recent(const struct lanes_nic_stats *st, __u64 slot) {
  if (st->slot == slot) return st->slot_flows > st->prev_flows ? st->slot_flows : st->prev_flows;
  return st->slot + 1 == slot ? st->slot_flows : 0;
}

// Whether a NIC carries 90% of its line rate or more (never, when its
// line rate is not known).
static __always_inline int nic_full(const struct lanes_nic *nic, const struct lanes_nic_stats *st, __u64 slot) {
  return nic->line_rate && nic_rate(st, slot) * 10 >= nic->line_rate * 9;
}

// The first packet on a NIC in window SLOT closes its measurement (one CPU
// does it: the one whose compare-and-swap moves the window on).
static __always_inline void nic_roll(struct lanes_nic_stats *st, __u64 slot, __u64 now) {
  __u64 old = st->slot;
  if (old == slot || __sync_val_compare_and_swap(&st->slot, old, slot) != old) return;
  st->rate = now > st->win_ns ? per_second(st->tx_bytes - st->win_bytes, now - st->win_ns) : 0;
  st->prev_flows = old + 1 == slot ? st->slot_flows : 0;
  st->slot_flows = 0;
  st->win_ns = now;
  st->win_bytes = st->tx_bytes;
}

// The first packet of a flow in window SLOT closes the flow's measurement:
// its rate over the last window, or 0 if it sent nothing then. 1 if it did.
static __always_inline int flow_roll(struct lanes_flow *f, __u64 slot, __u64 now) {
  if (f->slot == slot) return 0;
  f->rate = f->slot + 1 == slot && now > f->win_ns ? per_second(f->bytes - f->win_bytes, now - f->win_ns) : 0;
  f->win_ns = now;
  f->win_bytes = f->bytes;
  return 1;
}

// A NIC's place in the order a new flow chooses by: the least load (in
// 1/32nds of its line rate, or MiB/s where that is not known), then the
// fewest flows sending now, then the fewest open flows. Load first keeps
// an idle long-lived connection (a control channel, a BGP session) from
// weighing like a bulk transfer; the flows sending now tell apart NICs
// whose flows started in the same window, before any load is measured.
static __always_inline __u64 nic_score(const struct lanes_nic *nic, const struct lanes_nic_stats *st, __u64 slot) {
  __u64 unit = nic->line_rate / 32;
  if (!unit) unit = 1ULL << 20;
  __u64 load = nic_rate(st, slot) / unit;
  __u64 recent = nic_recent(st, slot);
  __u64 open = st->flows_active;
  if (load > 0xffff) load = 0xffff;
  if (recent > 0xffff) recent = 0xffff;
  if (open > 0xffff) open = 0xffff;  // also a count that ran below zero
  return load << 32 | recent << 16 | open;
}

// The NIC for a new (or stranded) flow: the NIC the flow's source address
// belongs to, else the up NIC that scores lowest; in bpf-numa mode the
// lowest of the flow's node that is not full, and only if every one of
// them is full (or down) the lowest of all. -1 if no NIC is up.
// The scans run through bpf_loop so the verifier checks their bodies once.
struct pick_ctx {
  const struct lanes_flow_key *key;
  __u32 n;
  __u32 home;
  __u32 numa_mode;
  __s32 bound;
  __s32 best;
  __s32 best_local;
  __u64 best_score;
  __u64 local_score;
  __u64 slot;
};

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
  __u64 score = nic_score(nic, st, c->slot);
  if (score < c->best_score) {
    c->best_score = score;
    c->best = i;
  }
  if (c->numa_mode && nic->numa == c->home && !nic_full(nic, st, c->slot) && score < c->local_score) {
    c->local_score = score;
    c->best_local = i;
  }
  return 0;
}

static __always_inline __u32 cpu_home(void) {
  __u32 cpu = bpf_get_smp_processor_id();
  __u32 *node = bpf_map_lookup_elem(&cpu_node, &cpu);
  return node ? *node : 0;
}

static __always_inline int pick_nic(const struct lanes_config *cfg, const struct lanes_flow_key *key, __u32 home,
                                    __u64 slot, int *bound) {
  struct pick_ctx c = {.key = key,
                       .n = cfg->n_nics,
                       .home = home,
                       .numa_mode = cfg->mode == LANES_MODE_BPF_NUMA,
                       .bound = -1,
                       .best = -1,
                       .best_local = -1,
                       .best_score = ~0ULL,
                       .local_score = ~0ULL,
                       .slot = slot};
  bpf_loop(LANES_MAX_NICS, pick_one, &c, 0);
  *bound = c.bound >= 0;
  if (c.bound >= 0) return c.bound;
  return c.best_local >= 0 ? c.best_local : c.best;
}

// Whether NIC I is off the flow's node (bpf-numa only; counted as spilled).
static __always_inline int off_node(const struct lanes_config *cfg, __u32 i, __u32 home) {
  if (cfg->mode != LANES_MODE_BPF_NUMA) return 0;
  struct lanes_nic *nic = bpf_map_lookup_elem(&nics, &i);
  return nic && nic->numa != home;
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

// The least loaded NICs a flow on NIC CUR could move to: of its own node
// (every NIC, outside bpf-numa mode), and of the others (bpf-numa only,
// and only while its own NIC is full or off its node).
struct light_ctx {
  __u32 n;
  __u32 cur;
  __u32 home;
  __u32 numa_mode;
  __u32 may_leave;  // may move off its node
  __s32 local;
  __s32 remote;
  __u64 local_rate;
  __u64 remote_rate;
  __u64 slot;
};

static long light_one(__u32 i, void *data) {
  struct light_ctx *c = data;
  if (i >= c->n) return 1;
  if (i == c->cur) return 0;
  __u32 idx = i;
  struct lanes_nic *nic = bpf_map_lookup_elem(&nics, &idx);
  struct lanes_nic_stats *st = bpf_map_lookup_elem(&nic_stats, &idx);
  if (!nic || !st || !nic->up) return 0;
  __u64 r = nic_rate(st, c->slot);
  if (!c->numa_mode || nic->numa == c->home) {
    if (r < c->local_rate) {
      c->local_rate = r;
      c->local = i;
    }
  } else if (c->may_leave && r < c->remote_rate) {
    c->remote_rate = r;
    c->remote = i;
  }
  return 0;
}

// Whether NIC I, carrying RATE, has room for a flow of FLOW_RATE: the two
// fit in its line rate (with 1/16 over it for what a window's measurement
// adds: a flow that fills a remote NIC fits an idle one at home), or
// (line rate not known) it is less loaded than the flow's NIC (CUR_RATE)
// by half the flow's rate.
static __always_inline int has_room(__u32 i, __u64 rate, __u64 flow_rate, __u64 cur_rate) {
  struct lanes_nic *nic = bpf_map_lookup_elem(&nics, &i);
  if (!nic) return 0;
  if (nic->line_rate) return rate + flow_rate <= nic->line_rate + nic->line_rate / 16;
  return cur_rate > rate + flow_rate / 2;
}

// Balance by load, flow-sticky: once per window an open flow that sends is
// weighed against the least loaded NIC, and moves there only if that
// lowers the busier of the two by half its own rate or more (a NIC
// carrying two bulk flows gives one to an idle NIC; NICs that are all
// full, or flows that share a NIC evenly with the others, stay put). A
// NIC of the flow's node comes first; in bpf-numa mode a flow leaves its
// node only while its NIC there is full, and goes back as soon as a NIC
// there has room for it. A moved flow stays put for LANES_MOVE_HOLD
// windows, and the two NICs' rates carry its rate until they are measured
// again, so the flows weighed after it in the same window see the move. A
// flow younger than two windows, or sending less than LANES_MOVE_FLOOR (or
// 1/64 of its NIC's line rate), stays put. FORCE (a NIC returned: a new
// epoch) weighs it at once, held or not. The flow's packets in flight on the old NIC may
// arrive after its first ones on the new NIC: a moment of reordering that
// TCP absorbs (the price of using a NIC's bandwidth without waiting for
// flows to end).
static __always_inline __u32 balance(const struct lanes_config *cfg, const struct lanes_flow_key *key,
                                     struct lanes_flow *flow, __u32 cur, __u64 slot, __u64 now, int force) {
  if (flow->closed || flow->rate == 0) return cur;
  __u64 w = window_ns(cfg);
  // a flow younger than two windows has no whole window measured yet
  if (!force && (now - flow->first_ns < 2 * w || (flow->moved_ns && now - flow->moved_ns < LANES_MOVE_HOLD * w)))
    return cur;
  struct lanes_nic *cn = bpf_map_lookup_elem(&nics, &cur);
  struct lanes_nic_stats *cs = bpf_map_lookup_elem(&nic_stats, &cur);
  if (!cn || !cs) return cur;
  __u64 floor = cn->line_rate / 64;
  if (floor < LANES_MOVE_FLOOR) floor = LANES_MOVE_FLOOR;
  if (flow->rate < floor) return cur;
  if (same_addr(key, &cn->job4, cn->job6, 1)) return cur;  // its NIC's own address: it stays
  int numa = cfg->mode == LANES_MODE_BPF_NUMA;
  struct light_ctx c = {.n = cfg->n_nics,
                        .cur = cur,
                        .home = flow->node,
                        .numa_mode = numa,
                        .may_leave = !numa || cn->numa != flow->node || nic_full(cn, cs, slot),
                        .local = -1,
                        .remote = -1,
                        .local_rate = ~0ULL,
                        .remote_rate = ~0ULL,
                        .slot = slot};
  bpf_loop(LANES_MAX_NICS, light_one, &c, 0);
  __u64 rc = nic_rate(cs, slot);
  __u64 margin = flow->rate + flow->rate / 2;
  __s32 to = -1;
  if (c.local >= 0 && rc > c.local_rate + margin)
    to = c.local;
  else if (c.remote >= 0 && rc > c.remote_rate + margin)
    to = c.remote;
  else if (numa && cn->numa != flow->node && c.local >= 0 && has_room(c.local, c.local_rate, flow->rate, rc))
    to = c.local;  // off its node: home as soon as a NIC there has room for it
  if (to < 0) return cur;
  __u32 t = (__u32)to;
  struct lanes_nic_stats *ts = bpf_map_lookup_elem(&nic_stats, &t);
  if (!ts) return cur;
  nic_roll(ts, slot, now);  // an idle NIC's window starts now, so the estimate below holds
  cs->rate = cs->rate > flow->rate ? cs->rate - flow->rate : 0;
  ts->rate += flow->rate;
  move_flow(flow, cur, t, 1);
  flow->moved_ns = now;
  if (off_node(cfg, t, flow->node)) __sync_fetch_and_add(&ts->spilled, 1);
  return t;
}

static __always_inline int egress(struct __sk_buff *skb, struct parsed p) {
  __u32 zero = 0;
  struct lanes_config *cfg = bpf_map_lookup_elem(&config, &zero);
  if (!cfg || cfg->n_nics == 0 || cfg->n_nics > LANES_MAX_NICS) return TC_ACT_OK;

  __u64 now = clock_now(cfg);
  __u64 slot = now / window_ns(cfg);
  int nic_i;
  struct lanes_flow *flow = bpf_map_lookup_elem(&flows, &p.key);
  if (flow) {
    __u32 cur = flow->nic;
    struct lanes_nic *cn = bpf_map_lookup_elem(&nics, &cur);
    int rolled = flow_roll(flow, slot, now);
    if (cn && cn->up) {
      int force = flow->epoch != cfg->epoch;
      flow->epoch = cfg->epoch;
      nic_i = force || rolled ? balance(cfg, &p.key, flow, cur, slot, now, force) : cur;
    } else {
      // its NIC went down: move the flow
      int bound;
      nic_i = pick_nic(cfg, &p.key, flow->node, slot, &bound);
      if (nic_i < 0) return TC_ACT_SHOT;
      move_flow(flow, cur, (__u32)nic_i, 0);
      flow->epoch = cfg->epoch;
    }
  } else {
    __u32 home = cpu_home();
    int bound;
    nic_i = pick_nic(cfg, &p.key, home, slot, &bound);
    if (nic_i < 0) return TC_ACT_SHOT;
    struct lanes_flow f = {.nic = nic_i, .epoch = cfg->epoch, .node = home, .first_ns = now, .win_ns = now};
    bpf_map_update_elem(&flows, &p.key, &f, BPF_NOEXIST);
    flow = bpf_map_lookup_elem(&flows, &p.key);
    __u32 ni = nic_i;
    struct lanes_nic_stats *nst = bpf_map_lookup_elem(&nic_stats, &ni);
    if (nst) {
      __sync_fetch_and_add(&nst->flows_active, 1);
      __sync_fetch_and_add(&nst->flows_total, 1);
      if (!bound && off_node(cfg, ni, home)) __sync_fetch_and_add(&nst->spilled, 1);
    }
  }
  __u32 ni = nic_i;
  struct lanes_nic *nic = bpf_map_lookup_elem(&nics, &ni);
  struct lanes_nic_stats *st = bpf_map_lookup_elem(&nic_stats, &ni);
  if (!nic || !st) return TC_ACT_SHOT;
  nic_roll(st, slot, now);
  __sync_fetch_and_add(&st->tx_packets, 1);
  __sync_fetch_and_add(&st->tx_bytes, skb->len);
  if (flow) {
    if (flow->slot != slot) {
      flow->slot = slot;
      __sync_fetch_and_add(&st->slot_flows, 1);
    }
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
