#include "lanes/testbed/cpu_load.hpp"

#include <fstream>
#include <sstream>
#include <thread>

#include "lanes/testbed/interrupt.hpp"

namespace lanes::testbed {

std::optional<CpuTimes> parse_cpu_times(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cpu ", 0) != 0) continue;
    std::istringstream f(line.substr(4));
    uint64_t user = 0, nice = 0, sys = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    if (!(f >> user >> nice >> sys >> idle)) return std::nullopt;
    f >> iowait >> irq >> softirq >> steal;  // older kernels stop early
    CpuTimes t;
    t.busy = user + nice + sys + irq + softirq + steal;
    t.total = t.busy + idle + iowait;
    return t;
  }
  return std::nullopt;
}

std::optional<CpuTimes> read_cpu_times() {
  std::ifstream in("/proc/stat");
  if (!in) return std::nullopt;
  std::stringstream s;
  s << in.rdbuf();
  return parse_cpu_times(s.str());
}

double busy_share(const CpuTimes& a, const CpuTimes& b) {
  if (b.total <= a.total || b.busy < a.busy) return 0;
  return static_cast<double>(b.busy - a.busy) / static_cast<double>(b.total - a.total);
}

std::optional<double> wait_for_idle_cpu(double max_busy, std::chrono::milliseconds window,
                                        std::chrono::milliseconds timeout) {
  auto end = std::chrono::steady_clock::now() + timeout;
  auto before = read_cpu_times();
  if (!before) return std::nullopt;
  for (;;) {
    std::this_thread::sleep_for(window);
    auto after = read_cpu_times();
    if (!after) return std::nullopt;
    double share = busy_share(*before, *after);
    if (share < max_busy || std::chrono::steady_clock::now() >= end || interrupted()) return share;
    before = after;
  }
}

}  // namespace lanes::testbed
