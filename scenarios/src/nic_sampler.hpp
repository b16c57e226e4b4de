#pragma once
// The phase's NIC counters, sampled in the background every 100 ms on a
// thread of their own (its own netlink sockets, one per host namespace),
// as Gbit/s series per NIC and direction for the results and the report;
// and the progress line (the busiest hosts' NICs) while a long step runs.

#include <chrono>
#include <condition_variable>
#include <atomic>
#include <map>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "lanes/reports/result.hpp"

namespace lanes::scenarios {

class NicSampler {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr double kSampleS = 0.1;
  struct Nic {
    int host;
    std::string host_name;
    int nic;
    std::string ifname;
    int ns_fd;
  };
  NicSampler(std::vector<Nic> nics, Clock::time_point t0, std::ostream* progress);
  ~NicSampler() { stop(); }
  NicSampler(const NicSampler&) = delete;
  NicSampler& operator=(const NicSampler&) = delete;
  void stop();
  // Blocks until a sample taken after T exists (at most a second).
  void wait_sample_after(Clock::time_point t);
  // the step the progress line names (LONG_STEP: one worth a progress line)
  void set_step(const std::string& s, bool long_step);
  // Gbit/s per sample and NIC (sample i covers (i, i+1] * 100 ms)
  std::vector<reports::Series> series() const;

 private:
  void loop();
  void print_progress(Clock::time_point& last);

  std::vector<Nic> nics_;
  Clock::time_point t0_;
  std::ostream* progress_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Clock::time_point last_sample_;
  std::vector<std::vector<uint64_t>> tx_, rx_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::string step_;
  Clock::time_point step_start_ = Clock::now();
  bool long_step_ = false, tty_ = false, printed_ = false;
};

}  // namespace lanes::scenarios
