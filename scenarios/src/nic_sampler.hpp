#pragma once
// The phase's NIC counters, sampled in the background every 100 ms on a
// thread of their own (its own netlink sockets, one per host namespace),
// as Gbit/s series per NIC and direction for the results and the report;
// and the progress line (the busiest hosts' NICs) while a long step runs.
// NICs on another machine (a run over several) are sampled there, by a
// process the first rank starts through Slurm (lanes nic-counters), on
// the same ticks of the wall clock; its lines are read here.

#include <chrono>
#include <functional>
#include <condition_variable>
#include <atomic>
#include <map>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "lanes/reports/result.hpp"
#include "lanes/testbed/process.hpp"

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
    int ns_fd;        // here; -1 for a NIC on another machine
    int machine = -1; // that machine
    std::string node; // its namespace's node name, as lanes nic-counters takes it
  };
  // The process that samples MACHINE's NICS ("NODE:IFNAME") on ticks from
  // T0 (wall clock, ns since the epoch), its lines to LOG.
  using RemoteSampler = std::function<testbed::ProcessSpec(int machine, const std::vector<std::string>& nics,
                                                           int64_t t0_unix_ns, const std::string& log)>;
  NicSampler(std::vector<Nic> nics, Clock::time_point t0, std::ostream* progress, const RemoteSampler& remote = {},
             const std::string& log_dir = "");
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
  // a remote machine's sampler: its process, its log, the NICs it samples (indices into nics_)
  struct Feed {
    testbed::Daemon proc;
    std::string log;
    std::vector<size_t> nics;
    std::streamoff read = 0;
    int64_t last_tick = -1;
  };
  void read_feeds();
  std::vector<Feed> feeds_;
  std::thread feed_thread_;

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
