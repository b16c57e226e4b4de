#include "lanes/testbed/delay_schedule.hpp"

#include <algorithm>

namespace lanes::testbed {

namespace {
constexpr int64_t kDistScale = 8192;  // netem's NETEM_DIST_SCALE: a table entry of 8192 is one standard deviation
}

DelaySchedule::DelaySchedule(const Impairment& imp, std::vector<int16_t> table, uint64_t seed)
    : delay_ns_(int64_t{imp.delay_us} * 1000),
      jitter_ns_(int64_t{imp.jitter_us} * 1000),
      reorder_ppm_(imp.reorder_ppm),
      table_(std::move(table)),
      rng_(seed) {}

int64_t DelaySchedule::table_draw(int64_t mu, int64_t sigma, uint32_t rnd, const std::vector<int16_t>& table) {
  if (sigma == 0) return mu;
  if (table.empty()) return static_cast<int64_t>(rnd % static_cast<uint64_t>(2 * sigma)) + mu - sigma;
  // sigma * entry / 8192, rounded to nearest, without overflowing (netem's way)
  int64_t t = table[rnd % table.size()];
  int64_t x = (sigma % kDistScale) * t;
  x += x >= 0 ? kDistScale / 2 : -kDistScale / 2;
  return x / kDistScale + (sigma / kDistScale) * t + mu;
}

int64_t DelaySchedule::arrival_ns(int64_t stamped, int64_t read_ns, int64_t previous_ns) {
  // (a packet may carry a stamp of another clock: TCP's departure time is monotonic)
  int64_t t = stamped >= 0 && stamped <= read_ns && read_ns - stamped < 5'000'000 ? stamped : read_ns;
  return std::max(t, previous_ns);
}

int64_t DelaySchedule::release_ns(int64_t arrival_ns) {
  if (reorder_ppm_ && std::uniform_int_distribution<uint32_t>(0, 999'999)(rng_) < reorder_ppm_) return arrival_ns;
  uint32_t rnd = static_cast<uint32_t>(rng_());
  return arrival_ns + std::max<int64_t>(0, table_draw(delay_ns_, jitter_ns_, rnd, table_));
}

}  // namespace lanes::testbed
