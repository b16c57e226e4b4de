// Shared between impair.bpf.c and impair.cpp.
#pragma once
#include <linux/types.h>

#define LANES_IMPAIR_CLONE_MARK 0x6c6e4455u  // "lnDU": the copy of a duplicated packet

struct lanes_impair_stats {
  __u64 packets;     // seen (copies not counted)
  __u64 lost;
  __u64 duplicated;
  __u64 corrupted;   // a bit of the IP header flipped
};
