// lanes-bfdd's receive filter (a socket filter on each session's UDP
// socket): a packet that is byte for byte the one the session's peer sends
// while both are Up, from the peer's address with TTL 255, is taken here:
// its arrival time and a count go to the session's slot and the packet
// goes no further (no queueing, no wake-up, no read). Any other packet
// (a handshake, a changed state, a Poll, a wrong source or TTL) reaches
// the socket and the daemon as before. Runs after the kernel's routing and
// netfilter, so a drop there (a silent-drop fault) still starves the
// session.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "bfd_abi.h"

struct lanes_bfd_slot slots[LANES_BFD_SLOTS];

// socket cookie -> slot
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, LANES_BFD_SLOTS);
  __type(key, __u64);
  __type(value, __u32);
} slot_of SEC(".maps");

SEC("socket")
int bfd_rx(struct __sk_buff* skb) {
  const int keep = skb->len;
  __u64 cookie = bpf_get_socket_cookie(skb);
  __u32* idx = bpf_map_lookup_elem(&slot_of, &cookie);
  if (!idx || *idx >= LANES_BFD_SLOTS) return keep;
  struct lanes_bfd_slot* s = &slots[*idx];
  if (!s->valid || skb->len != 8 + LANES_BFD_PACKET) return keep;
  // the UDP payload (the socket sees the packet from its UDP header on)
  __u8 pkt[LANES_BFD_PACKET];
  if (bpf_skb_load_bytes(skb, 8, pkt, sizeof pkt)) return keep;
  for (int i = 0; i < LANES_BFD_PACKET; i++)
    if (pkt[i] != s->expect[i]) return keep;
  // TTL (hop limit) 255 and the peer's source address (RFC 5881 §5)
  __u8 hdr[24];
  if (s->v6) {
    if (bpf_skb_load_bytes_relative(skb, 0, hdr, 24, BPF_HDR_START_NET)) return keep;
    if (hdr[7] != 255) return keep;
    for (int i = 0; i < 16; i++)
      if (hdr[8 + i] != s->peer[i]) return keep;
  } else {
    if (bpf_skb_load_bytes_relative(skb, 0, hdr, 20, BPF_HDR_START_NET)) return keep;
    if (hdr[8] != 255) return keep;
    for (int i = 0; i < 4; i++)
      if (hdr[12 + i] != s->peer[i]) return keep;
  }
  s->last_ns = bpf_ktime_get_ns();
  __sync_fetch_and_add(&s->count, 1);
  return 0;
}

char LICENSE[] SEC("license") = "GPL";
