#pragma once
// A member returning to a resilient nexthop group that carries traffic.
//
// The kernel balances a resilient group by bucket counts. With more buckets
// than flows it balances a returned member with idle buckets alone: the
// member gets buckets but no flow, and stays idle until flows end. Its
// unbalanced timer forces busy buckets to move only while the counts are
// unbalanced. So for one unbalanced timer the returned members get a
// weight under which they want every idle bucket plus their share of the
// busy ones: the kernel hands them the idle buckets at once and, the group
// still unbalanced when the timer expires, the busy buckets they lack.
// Then the weights go back to equal, and only idle buckets leave them
// again. The flows that moved may see a moment of reordering; none breaks.

#include <chrono>
#include <cstdint>
#include <vector>

#include "lanes/testbed/netlink.hpp"

namespace lanes::testbed {

// A bucket that carried a packet within this long counts as busy. The
// kernel counts a bucket's idle time from its group's last change too, so
// a group changed less than this long ago cannot tell busy from fresh.
inline constexpr std::chrono::milliseconds kBusyWindow{1000};
inline constexpr uint64_t kBusyBucketCs = kBusyWindow.count() / 10;

// The weight for RETURNED of MEMBERS (the others weigh 1), given the
// group's BUCKETS: each other member then wants N / (n - m + m·w) buckets,
// its share of the busy ones. 1 (nothing to do) when no bucket is busy,
// when every member is returning, or when the kernel would move busy
// buckets anyway.
uint16_t rejoin_weight(const std::vector<BucketInfo>& buckets, size_t members, size_t returned);

// The kernel has given member NH of a group of MEMBERS up its share of
// BUCKETS: at least an even share, one short allowed (the rest of a bucket
// count that does not divide evenly).
bool holds_share(const std::vector<BucketInfo>& buckets, uint32_t nh, size_t members);

// Every one of MEMBERS holds its share of BUCKETS (holds_share). An empty
// table is not balanced: it is a read that found no group.
bool balanced(const std::vector<BucketInfo>& buckets, const std::vector<uint32_t>& members);

// How long the weighted phase lasts: the unbalanced timer and a margin for
// the kernel's upkeep to run.
inline std::chrono::milliseconds rejoin_phase(uint32_t unbalanced_timer_s) {
  return std::chrono::seconds(unbalanced_timer_s) + std::chrono::milliseconds(500);
}

}  // namespace lanes::testbed
