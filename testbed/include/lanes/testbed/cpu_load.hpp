#pragma once
// How busy the machine is, from /proc/stat: a run's figures are the NICs'
// only while the CPU has room, and the kernel goes on working after a big
// run is gone (a thousand namespaces take it many seconds to free).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace lanes::testbed {

struct CpuTimes {
  uint64_t busy = 0;   // user, nice, system, irq, softirq, steal (jiffies, all CPUs)
  uint64_t total = 0;  // busy + idle + iowait
};

// The "cpu" line of TEXT (/proc/stat's format), or none if it has none.
std::optional<CpuTimes> parse_cpu_times(const std::string& text);
std::optional<CpuTimes> read_cpu_times();

// The busy share (0..1) between two readings; 0 when no time passed.
double busy_share(const CpuTimes& before, const CpuTimes& after);

// Waits until the machine was less than MAX_BUSY busy over one WINDOW, or
// TIMEOUT passes, or lanes is interrupted. Returns the last window's share
// (none where /proc/stat cannot be read).
std::optional<double> wait_for_idle_cpu(double max_busy, std::chrono::milliseconds window,
                                        std::chrono::milliseconds timeout);

}  // namespace lanes::testbed
