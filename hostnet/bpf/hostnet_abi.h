/* Structures shared by lanes' host datapath BPF programs and user space.
 * One header, fixed-width types, included by both sides. */
#ifndef LANES_HOSTNET_ABI_H
#define LANES_HOSTNET_ABI_H

#include <linux/types.h>

#define LANES_MAX_NICS 16
#define LANES_MAX_CPUS 256
#define LANES_FLOW_ENTRIES 65536
#define LANES_WINDOW_NS 50000000ULL /* the load measurement's window unless lanes_config.window_ns says */

enum lanes_mode {
  LANES_MODE_BPF = 0,      /* least-loaded NIC per new flow */
  LANES_MODE_BPF_NUMA = 1, /* same, preferring NICs on the sending CPU's NUMA node */
};

/* A flow: 5-tuple with addresses in network order (IPv4 in addr[0]). */
struct lanes_flow_key {
  __u32 saddr[4];
  __u32 daddr[4];
  __u16 sport;
  __u16 dport;
  __u8 family; /* 4 or 6 */
  __u8 proto;
  __u8 pad[2];
};

struct lanes_flow {
  __u32 nic;     /* index into the nics map */
  __u32 closed;  /* FIN or RST seen: no longer counted as active */
  __u32 epoch;   /* the config's epoch when the flow's NIC was last chosen */
  __u32 node;    /* the NUMA node of the CPU that sent its first packet */
  __u64 packets;
  __u64 bytes;
  __u64 first_ns;
  __u64 last_ns;
  /* its load, measured per window (lanes_config.window_ns) */
  __u64 slot;      /* the last window it sent in (now / window_ns) */
  __u64 win_ns;    /* when the current measurement began */
  __u64 win_bytes; /* its bytes then */
  __u64 rate;      /* bytes/s over its last whole window; 0 after an idle one */
  __u64 moved_ns;  /* when the balancer last moved it (0: never) */
};

/* Per NIC, written by user space. */
struct lanes_nic {
  __u32 ifindex;     /* the physical NIC in the host namespace */
  __u32 up;          /* carrier and admin state */
  __u32 numa;        /* NUMA node */
  __u32 gw4;         /* the switch port's IPv4 address (network order) */
  __u32 gw6[4];      /* the switch port's IPv6 address */
  __u32 job4;        /* the job's address for this NIC: flows from it stay on it */
  __u32 job6[4];
  __u32 pad;
  __u64 line_rate;   /* bytes/s the NIC carries at most; 0: not known (unshaped) */
};

/* Per NIC, written by the programs (atomic adds). */
struct lanes_nic_stats {
  __u64 tx_packets;
  __u64 tx_bytes;
  __u64 rx_packets;  /* ingress fast path to the container */
  __u64 rx_bytes;
  __u64 flows_active;
  __u64 flows_total;
  __u64 moved;       /* flows moved away from this NIC when it went down */
  __u64 rebalanced;  /* flows moved onto this NIC from a busier one (load, or a NIC's return) */
  __u64 spilled;     /* of those and of new flows, the ones off their CPU's node (bpf-numa: its NICs were full) */
  /* its load, measured per window like a flow's */
  __u64 slot;        /* the window it last sent in */
  __u64 slot_flows;  /* flows that sent on it in that window */
  __u64 prev_flows;  /* ... and in the one before, if it sent then */
  __u64 win_ns;      /* when the current measurement began */
  __u64 win_bytes;   /* tx_bytes then */
  __u64 rate;        /* bytes/s over its last whole window (an estimate between measurements: flows moved on or off) */
};

/* Global settings, written by user space (array map, one element). */
struct lanes_config {
  __u32 n_nics;
  __u32 mode;            /* enum lanes_mode */
  __u32 container_ifindex[LANES_MAX_NICS]; /* host-side device of each container link */
  __u8 container_mac[LANES_MAX_NICS][6];   /* the container side's MAC per link */
  __u8 host_mac[LANES_MAX_NICS][6];        /* the host side's MAC per link */
  __u32 task4;           /* the job's task IP (network order) */
  __u32 task6[4];
  __u32 epoch;           /* raised by user space when a NIC returns: every
                            flow is weighed once more against the least
                            loaded NIC, and moves if that restores balance */
  __u64 window_ns;       /* the load measurement's window (0: 50 ms) */
  __u64 clock_ns;        /* 0: the kernel's monotonic clock; otherwise the
                            programs' clock stands at this time (lanes' bpf
                            tests drive the windows with it) */
};

#endif
