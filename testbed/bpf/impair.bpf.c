// Link impairments that need no netem (issue 16): on a device's egress,
// each packet is lost, corrupted, or sent twice, with the probability the
// loader wrote into .rodata before loading. A packet is what the device
// sees: a GSO packet counts once. The copy a duplication sends passes
// this program again and is let through (it carries kCloneMark).
//
// Corruption flips one bit where the receiver's checks find it, as a
// wire's FCS would: one random bit of an IPv4 header (its checksum then
// fails: a single flipped bit always changes a ones' complement sum), or
// the top bit of an IPv6 header's version (IPv6 has no header checksum,
// and a TCP or UDP checksum left to offload is never checked on a veth).
// The receiver drops the packet and counts it (InCsumErrors and
// InHdrErrors, Ip6 InHdrErrors). Other packets (ARP) pass untouched.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "impair_abi.h"

const volatile __u32 loss_ppm = 0;       // packets in a million lost
const volatile __u32 duplicate_ppm = 0;  // packets in a million sent twice
const volatile __u32 corrupt_ppm = 0;    // packets in a million with a bit flipped

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct lanes_impair_stats);
} impair_stats SEC(".maps");

static __always_inline int chance(__u32 ppm) {
  return ppm && bpf_get_prandom_u32() % 1000000 < ppm;
}

// 1: a bit of SKB's IP header flipped (see above)
static __always_inline int corrupt(struct __sk_buff *skb) {
  __u32 off, bit;
  if (skb->protocol == bpf_htons(ETH_P_IP)) {
    bit = bpf_get_prandom_u32() % 160;  // the 20 bytes every IPv4 header has
    off = ETH_HLEN + bit / 8;
  } else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
    bit = 7;  // the version's top bit: 6 becomes 14
    off = ETH_HLEN;
  } else {
    return 0;
  }
  __u8 b;
  if (bpf_skb_load_bytes(skb, off, &b, 1)) return 0;
  b ^= (__u8)(1u << (bit % 8));
  return bpf_skb_store_bytes(skb, off, &b, 1, 0) == 0;
}

SEC("tc")
int lanes_impair(struct __sk_buff *skb) {
  __u32 zero = 0;
  struct lanes_impair_stats *st = bpf_map_lookup_elem(&impair_stats, &zero);
  if (skb->mark == LANES_IMPAIR_CLONE_MARK) {  // the copy of a duplicated packet
    skb->mark = 0;
    return TC_ACT_OK;
  }
  if (st) st->packets++;
  if (chance(loss_ppm)) {
    if (st) st->lost++;
    return TC_ACT_SHOT;
  }
  if (chance(corrupt_ppm) && corrupt(skb) && st) st->corrupted++;
  if (chance(duplicate_ppm)) {
    __u32 mark = skb->mark;
    skb->mark = LANES_IMPAIR_CLONE_MARK;
    if (bpf_clone_redirect(skb, skb->ifindex, 0) == 0 && st) st->duplicated++;
    skb->mark = mark;
  }
  return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
