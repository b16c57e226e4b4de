// unit tier: when lanes' delay line lets packets go (delay_schedule.hpp),
// on a fake clock: the order, the reorder share, the jitter's moments.

#include <catch2/catch.hpp>

#include <cmath>
#include <numeric>

#include "lanes/testbed/delay_schedule.hpp"

using namespace lanes::testbed;

namespace {

Impairment delay(uint32_t delay_us, uint32_t jitter_us = 0, uint32_t reorder_ppm = 0, std::string dist = "") {
  Impairment i;
  i.delay_us = delay_us;
  i.jitter_us = jitter_us;
  i.reorder_ppm = reorder_ppm;
  i.distribution = std::move(dist);
  return i;
}

struct Moments {
  double mean = 0, sd = 0;
  int64_t min = 0, max = 0;
};
// the delays of N packets arriving 10 µs apart
Moments moments(DelaySchedule& s, int n) {
  std::vector<double> d;
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (int i = 0; i < n; ++i) {
    int64_t t = int64_t{i} * 10'000;
    int64_t x = s.release_ns(t) - t;
    d.push_back(static_cast<double>(x));
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  double mean = std::accumulate(d.begin(), d.end(), 0.0) / n, var = 0;
  for (double x : d) var += (x - mean) * (x - mean);
  return {mean, std::sqrt(var / n), lo, hi};
}

}  // namespace

TEST_CASE("delay line schedule: netem's draw, by hand", "[unit]") {
  CHECK(DelaySchedule::table_draw(1000, 0, 12345, {}) == 1000);
  CHECK(DelaySchedule::table_draw(1000, 100, 0, {}) == 900);     // uniform: from mu - sigma
  CHECK(DelaySchedule::table_draw(1000, 100, 199, {}) == 1099);  // to just below mu + sigma
  CHECK(DelaySchedule::table_draw(1000, 100, 0, {8192}) == 1100);   // one standard deviation up
  CHECK(DelaySchedule::table_draw(1000, 100, 0, {-8192}) == 900);   // and down
  CHECK(DelaySchedule::table_draw(1'000'000, 500'000, 0, {4096}) == 1'250'000);  // half of one, a large sigma
}

TEST_CASE("delay line schedule: a fixed delay keeps the order and lets nothing go early", "[unit]") {
  DelaySchedule s(delay(1000), {}, 1);
  ReleaseQueue<int> q;
  for (int i = 0; i < 100; ++i) {
    int64_t t = int64_t{i} * 10'000;
    int64_t r = s.release_ns(t);
    CHECK(r == t + 1'000'000);
    q.push(r, i);
  }
  CHECK(q.pop_due(999'999).empty());  // the first is due at 1 ms
  std::vector<int> out;
  for (int64_t now = 1'000'000; !q.empty(); now += 100'000)
    for (int p : q.pop_due(now)) out.push_back(p);
  std::vector<int> want(100);
  std::iota(want.begin(), want.end(), 0);
  CHECK(out == want);
}

TEST_CASE("delay line schedule: uniform jitter has netem's moments and reorders, never early", "[unit]") {
  // 1 ms ± 500 µs: a uniform on [0.5, 1.5) ms, mean 1 ms, sd 500/√3 µs
  DelaySchedule s(delay(1000, 500), {}, 7);
  auto m = moments(s, 100'000);
  CHECK(m.mean == Approx(1e6).margin(0.01 * 500e3));
  CHECK(m.sd == Approx(500e3 / std::sqrt(3.0)).epsilon(0.02));
  CHECK(m.min >= 500'000);
  CHECK(m.max < 1'500'000);
  // on a fake clock, 10 µs apart: packets overtake each other, none leaves before its time
  DelaySchedule again(delay(1000, 500), {}, 7);
  ReleaseQueue<std::pair<int, int64_t>> q;  // (arrival order, release time)
  for (int i = 0; i < 10'000; ++i) {
    int64_t t = int64_t{i} * 10'000;
    int64_t r = again.release_ns(t);
    q.push(r, {i, r});
  }
  int inversions = 0, last = -1;
  int64_t last_release = 0;
  for (int64_t now = 0; !q.empty(); now += 50'000)
    for (auto [i, r] : q.pop_due(now)) {
      CHECK(r <= now);
      CHECK(r >= last_release);  // in release order
      last_release = r;
      inversions += i < last;
      last = std::max(last, i);
    }
  CHECK(inversions > 1000);  // a jitter of 500 µs on arrivals 10 µs apart reorders most
}

TEST_CASE("delay line schedule: netem's normal table gives the jitter as standard deviation", "[unit]") {
  auto table = netem_distribution("normal");
  REQUIRE(table);  // iproute2's tables come with scripts/setup's iproute2
  REQUIRE_FALSE(table.value().empty());
  DelaySchedule s(delay(10'000, 1'000, 0, "normal"), table.value(), 3);
  auto m = moments(s, 100'000);
  CHECK(m.mean == Approx(10e6).margin(0.02 * 1e6));
  CHECK(m.sd == Approx(1e6).epsilon(0.03));
  CHECK(m.min >= 0);
}

TEST_CASE("delay line schedule: a reorder share leaves at once, the rest after the delay", "[unit]") {
  DelaySchedule s(delay(2000, 0, 250'000), {}, 11);  // 2 ms, reorder 25%
  int now_ones = 0, delayed = 0;
  for (int i = 0; i < 100'000; ++i) {
    int64_t t = int64_t{i} * 10'000;
    int64_t r = s.release_ns(t);
    if (r == t) ++now_ones;
    else if (r == t + 2'000'000) ++delayed;
  }
  CHECK(now_ones + delayed == 100'000);
  CHECK(now_ones / 1e5 == Approx(0.25).margin(0.005));
}

TEST_CASE("delay line schedule: the same seed gives the same times, another seed others", "[unit]") {
  DelaySchedule a(delay(1000, 300), {}, 5), b(delay(1000, 300), {}, 5), c(delay(1000, 300), {}, 6);
  int same = 0, differ = 0;
  for (int i = 0; i < 1000; ++i) {
    int64_t t = int64_t{i} * 1000;
    int64_t x = a.release_ns(t), y = b.release_ns(t), z = c.release_ns(t);
    same += x == y;
    differ += x != z;
  }
  CHECK(same == 1000);
  CHECK(differ > 900);
}

TEST_CASE("delay line schedule: an arrival is the kernel's stamp when recent, never ahead of the packet before it", "[unit]") {
  const int64_t ms = 1'000'000;
  CHECK(DelaySchedule::arrival_ns(-1, 10 * ms, 0) == 10 * ms);              // no stamp: the read
  CHECK(DelaySchedule::arrival_ns(9 * ms, 10 * ms, 0) == 9 * ms);           // a moment before: the stamp
  CHECK(DelaySchedule::arrival_ns(4 * ms, 10 * ms, 0) == 10 * ms);          // 6 ms old: another clock's, the read
  CHECK(DelaySchedule::arrival_ns(11 * ms, 10 * ms, 0) == 10 * ms);         // after the read: the read
  // the first packet's stamp refused (the loop read it late), the next one's
  // taken: the next would go first; it arrives with the one before instead
  int64_t first = DelaySchedule::arrival_ns(2 * ms, 8 * ms, 0);
  int64_t second = DelaySchedule::arrival_ns(7'900'000, 8'000'100, first);
  CHECK(first == 8 * ms);
  CHECK(second == first);
  // with a fixed delay, release times in arrival order
  DelaySchedule s(delay(2000), {}, 1);
  CHECK(s.release_ns(first) <= s.release_ns(second));
}
