#pragma once
// Bounded waits: poll a probe until what it sees is acceptable, a deadline
// passes or the caller is stopped, and keep what was seen last (as FRR's
// topotests' run_and_expect does), so a failed wait can say what it saw.

#include <chrono>
#include <functional>
#include <thread>
#include <type_traits>

namespace lanes::testbed {

template <typename T>
struct Observed {
  bool ok = false;  // ACCEPT held before the deadline
  T last{};         // what PROBE returned last
  explicit operator bool() const { return ok; }
};

// Calls PROBE every EVERY until ACCEPT(its value) holds, TIMEOUT passes or
// STOP returns true; PROBE runs at least once.
template <typename Probe, typename Accept>
auto poll_until(Probe probe, Accept accept, std::chrono::milliseconds timeout, std::chrono::milliseconds every,
                const std::function<bool()>& stop = nullptr) -> Observed<std::invoke_result_t<Probe>> {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  Observed<std::invoke_result_t<Probe>> o;
  for (;;) {
    o.last = probe();
    if (accept(o.last)) {
      o.ok = true;
      return o;
    }
    if (std::chrono::steady_clock::now() >= deadline || (stop && stop())) return o;
    std::this_thread::sleep_for(every);
  }
}

// Sleeps for D unless STOP returns true first (looked at every 50 ms):
// false when it was stopped.
inline bool pause_for(std::chrono::milliseconds d, const std::function<bool()>& stop) {
  auto end = std::chrono::steady_clock::now() + d;
  for (;;) {
    if (stop && stop()) return false;
    auto left = end - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return true;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(left, std::chrono::milliseconds(50)));
  }
}

// PRED holds within TIMEOUT (polled every EVERY, given up early on STOP).
template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout, std::chrono::milliseconds every,
                const std::function<bool()>& stop = nullptr) {
  return poll_until([&] { return static_cast<bool>(pred()); }, [](bool b) { return b; }, timeout, every, stop).ok;
}

}  // namespace lanes::testbed
