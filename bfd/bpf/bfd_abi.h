/* What lanes-bfdd and its receive filter (bfd_rx.bpf.c) share: a slot per
 * session in the filter's .bss, which the daemon reads through the
 * skeleton's mapping without a system call. */
#pragma once

#include <linux/types.h>

#define LANES_BFD_SLOTS 4096
#define LANES_BFD_PACKET 24 /* a BFD control packet without authentication */

struct lanes_bfd_slot {
  /* written by the daemon: the packet its peer sends while both are Up,
   * byte for byte, and where it must come from; valid last (0: every
   * packet goes to the socket) */
  __u8 expect[LANES_BFD_PACKET];
  __u8 peer[16]; /* the peer's address: 4 bytes for IPv4, 16 for IPv6 */
  __u32 v6;
  __u32 valid;
  /* written by the filter: when the last such packet came
   * (CLOCK_MONOTONIC) and how many it took */
  __u64 last_ns;
  __u64 count;
};
