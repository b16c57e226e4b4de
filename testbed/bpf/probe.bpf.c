// The smallest tc program: loaded once by `lanes features` to learn whether
// this process may load BPF programs at all (root, CAP_BPF, no lockdown).
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

SEC("tc")
int lanes_probe(struct __sk_buff *skb) {
  (void)skb;
  return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
