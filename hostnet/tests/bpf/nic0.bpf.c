/* A user's egress program as lanes' tests load it in place of lanes' own
 * (<job egress="bpf" program="nic0.bpf.o">): built against the installed
 * ABI header, it fills nothing lanes does not and sends every packet out of
 * NIC 0. Deliberately bad: throughput on four NICs is one NIC's, and
 * lanes' scenarios must say so. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "hostnet_abi.h"
#include "hostnet_maps.h"

static __always_inline int out_of_nic0(struct __sk_buff *skb) {
  __u32 zero = 0;
  struct lanes_nic *nic = bpf_map_lookup_elem(&nics, &zero);
  if (!nic || !nic->ifindex) return TC_ACT_OK;
  struct bpf_redir_neigh nh = {};
  if (skb->protocol == bpf_htons(ETH_P_IP)) {
    nh.nh_family = 2; /* AF_INET */
    nh.ipv4_nh = nic->gw4;
  } else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
    nh.nh_family = 10; /* AF_INET6 */
    __builtin_memcpy(nh.ipv6_nh, nic->gw6, 16);
  } else {
    return TC_ACT_OK;
  }
  return bpf_redirect_neigh(nic->ifindex, &nh, sizeof(nh), 0);
}

SEC("tc")
int lanes_egress(struct __sk_buff *skb) { return out_of_nic0(skb); }

SEC("tc")
int lanes_egress_l3(struct __sk_buff *skb) { return out_of_nic0(skb); }

char LICENSE[] SEC("license") = "GPL";
