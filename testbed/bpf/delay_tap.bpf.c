// lanes' own delay line (issue 34), where the kernel has no netem: on an
// impaired device's egress, every packet is taken off its way and sent
// into the device's tap (one end of a veth pair of the same namespace, no
// addresses), where lanes-delay reads it, holds it until its release time
// and sends it out of the device again with LANES_DELAY_MARK. A packet
// with that mark passes on (mark cleared) to the filters after this one:
// lanes' impairment program (loss, duplication, corruption, once a
// packet), then the device's TBF. The copy of a duplicated packet
// (LANES_IMPAIR_CLONE_MARK) is already past its delay: it passes too.
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

#include "delay_abi.h"
#include "impair_abi.h"

const volatile __u32 tap_ifindex = 0;

SEC("tc")
int lanes_delay_tap(struct __sk_buff *skb) {
  if (skb->mark == LANES_DELAY_MARK) {
    skb->mark = 0;
    return TC_ACT_UNSPEC;
  }
  if (skb->mark == LANES_IMPAIR_CLONE_MARK) return TC_ACT_UNSPEC;
  return bpf_redirect(tap_ifindex, 0);
}

char LICENSE[] SEC("license") = "GPL";
