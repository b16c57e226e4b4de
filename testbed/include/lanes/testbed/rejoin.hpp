#pragma once
// A member returning to a resilient nexthop group that carries traffic.
//
// The kernel balances a resilient group by bucket counts. With more buckets
// than flows it balances a returned member with idle buckets alone: the
// member gets buckets but no flow, and stays idle until flows end. Its
// unbalanced timer forces busy buckets to move only while the counts are
// unbalanced. So until the kernel has forced the busy buckets over, the
// returned members get a weight under which they want every idle bucket
// plus their share of the busy ones: the kernel hands them the idle buckets
// at once and, the group still unbalanced when the timer expires, the busy
// buckets they lack. Then the weights go back to equal, and only idle
// buckets leave them again. The flows that moved may see a moment of
// reordering; none breaks.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "lanes/testbed/netlink.hpp"

namespace lanes::testbed {

// The kernel calls a bucket idle once it has carried no packet for the
// group's idle timer, and only idle buckets leave an overweight member
// before the unbalanced timer forces the rest (in index order, blind to
// flows). So lanes counts busy buckets by that same timer: a bucket whose
// idle time is under IDLE_TIMER_CS is busy. A moved bucket counts as fresh
// (busy) for one idle timer too, so a group changed less than one idle
// timer ago cannot tell busy from fresh; with a long idle timer nothing
// looks idle and the weighted phase would only scatter the flows.

// The weight for RETURNED of MEMBERS (the others weigh 1), given the
// group's BUCKETS and its idle timer: each other member then wants
// N / (n - m + m·w) buckets, its share of the busy ones. 1 (nothing to do)
// when no bucket is busy, when every member is returning, or when every
// bucket is busy (the kernel would move busy buckets anyway).
uint16_t rejoin_weight(const std::vector<BucketInfo>& buckets, size_t members, size_t returned,
                       uint64_t idle_timer_cs);

// The kernel has given member NH of a group of MEMBERS up its share of
// BUCKETS: at least an even share, one short allowed (the rest of a bucket
// count that does not divide evenly).
bool holds_share(const std::vector<BucketInfo>& buckets, uint32_t nh, size_t members);

// Every one of MEMBERS holds its share of BUCKETS (holds_share). An empty
// table is not balanced: it is a read that found no group.
bool balanced(const std::vector<BucketInfo>& buckets, const std::vector<uint32_t>& members);

// The weighted phase has done its work: no member other than the returned
// ones holds more than it wants under the weights — ceil(N / (n - m + m·w))
// buckets — so the busy buckets it had to give up have moved. An empty
// table (no group to read) has nothing left to wait for.
bool rejoin_settled(const std::vector<BucketInfo>& buckets, const std::vector<uint32_t>& others, size_t members,
                    size_t returned, uint16_t weight);

// When to look first whether the weighted phase has settled: the kernel
// forces busy buckets over once the unbalanced timer has passed, at its next
// upkeep, and it runs upkeep at most every half second
// (NH_RES_UPKEEP_DW_MINIMUM_INTERVAL); the idle buckets the returned members
// were handed are idle at once (unused since they moved). Until it has
// settled, look again every kRejoinRecheck, for at most rejoin_limit: a
// group the kernel cannot settle gets its even weights back regardless.
inline std::chrono::milliseconds rejoin_phase(uint32_t unbalanced_timer_s) {
  return std::chrono::seconds(unbalanced_timer_s) + std::chrono::milliseconds(600);
}
inline constexpr std::chrono::milliseconds kRejoinRecheck{250};
inline std::chrono::milliseconds rejoin_limit(uint32_t unbalanced_timer_s) {
  return std::chrono::seconds(unbalanced_timer_s) + std::chrono::seconds(5);
}

}  // namespace lanes::testbed
