// Link impairments where the kernel has no netem (issue 16): on a device's
// egress, each packet is lost, or sent twice, with the probability the
// loader wrote into .rodata before loading. A packet is what the device
// sees: a GSO packet counts once. The copy a duplication sends passes
// this program again and is let through (it carries kCloneMark).
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

#include "impair_abi.h"

const volatile __u32 loss_ppm = 0;       // packets in a million lost
const volatile __u32 duplicate_ppm = 0;  // packets in a million sent twice

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct lanes_impair_stats);
} impair_stats SEC(".maps");

static __always_inline int chance(__u32 ppm) {
  return ppm && bpf_get_prandom_u32() % 1000000 < ppm;
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
  if (chance(duplicate_ppm)) {
    __u32 mark = skb->mark;
    skb->mark = LANES_IMPAIR_CLONE_MARK;
    if (bpf_clone_redirect(skb, skb->ifindex, 0) == 0 && st) st->duplicated++;
    skb->mark = mark;
  }
  return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
