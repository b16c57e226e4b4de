/* A user's egress object without the program lanes attaches
 * (lanes_egress): refused at bring-up, naming what is missing. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

#include "hostnet_abi.h"
#include "hostnet_maps.h"

SEC("tc")
int my_egress(struct __sk_buff *skb) { return TC_ACT_OK; }

char LICENSE[] SEC("license") = "GPL";
