#pragma once
// When lanes' own delay line (issue 34: an impaired link end where the
// kernel has no netem) lets each packet go: pure, on the caller's clock,
// so that ordering, reordering and the jitter's distribution are checked
// on a fake one.
//
// As netem: a packet that arrives at t leaves at t + delay + jitter, the
// jitter drawn uniformly from ±jitter or from one of netem's tables
// (normal, pareto, paretonormal: iproute2's .dist files, in units of
// standard deviations scaled by 8192) with jitter as its standard
// deviation, never before it arrived. A reorder share leaves at once,
// ahead of the delayed ones. Packets leave in the order of their release
// times (the same time: in arrival order), so jitter reorders them as it
// does in netem.

#include <cstdint>
#include <queue>
#include <random>
#include <utility>
#include <vector>

#include "lanes/testbed/impair.hpp"

namespace lanes::testbed {

class DelaySchedule {
 public:
  // IMP's delay, jitter and reorder; TABLE: its distribution's netem table
  // (empty: uniform); SEED: the draws (the same seed, the same times)
  DelaySchedule(const Impairment& imp, std::vector<int16_t> table, uint64_t seed);
  // the release time (ns, the caller's clock) of a packet arriving at ARRIVAL_NS
  int64_t release_ns(int64_t arrival_ns);
  // netem's tabledist: MU ± SIGMA by TABLE's entry for RND (uniform without one)
  static int64_t table_draw(int64_t mu, int64_t sigma, uint32_t rnd, const std::vector<int16_t>& table);
  // When a packet read at READ_NS arrived: the kernel's STAMPED time (-1:
  // none) when it is a moment (under 5 ms) before the read, else the read;
  // never before the packet read ahead of it (PREVIOUS_NS), since a socket
  // hands packets over in the order they came: a stamp refused for one
  // packet and taken for the next must not put the next ahead of it.
  static int64_t arrival_ns(int64_t stamped, int64_t read_ns, int64_t previous_ns);

 private:
  int64_t delay_ns_, jitter_ns_;
  uint32_t reorder_ppm_;
  std::vector<int16_t> table_;
  std::mt19937_64 rng_;
};

// Packets waiting for their release time: the earliest first, ties in the
// order they came.
template <typename Packet>
class ReleaseQueue {
 public:
  void push(int64_t release_ns, Packet p) { heap_.push(Item{release_ns, seq_++, std::move(p)}); }
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  // the next release time (empty(): none)
  int64_t next_ns() const { return heap_.top().release_ns; }
  // every packet due at NOW_NS, in release order
  std::vector<Packet> pop_due(int64_t now_ns) {
    std::vector<Packet> out;
    while (!heap_.empty() && heap_.top().release_ns <= now_ns) {
      out.push_back(std::move(const_cast<Item&>(heap_.top()).packet));
      heap_.pop();
    }
    return out;
  }

 private:
  struct Item {
    int64_t release_ns;
    uint64_t seq;
    Packet packet;
  };
  struct Later {
    bool operator()(const Item& a, const Item& b) const {
      return a.release_ns != b.release_ns ? a.release_ns > b.release_ns : a.seq > b.seq;
    }
  };
  std::priority_queue<Item, std::vector<Item>, Later> heap_;
  uint64_t seq_ = 0;
};

}  // namespace lanes::testbed
