/* A user's egress program whose nics map does not match the ABI (4-byte
 * values): lanes must refuse it at bring-up, naming the map. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

#include "hostnet_abi.h"

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct lanes_config);
} config SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, LANES_MAX_NICS);
  __type(key, __u32);
  __type(value, __u32);
} nics SEC(".maps");

SEC("tc")
int lanes_egress(struct __sk_buff *skb) { return TC_ACT_OK; }

char LICENSE[] SEC("license") = "GPL";
