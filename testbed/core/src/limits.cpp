#include "lanes/core/limits.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fstream>
#include <map>
#include <sstream>

namespace lanes::testbed {
namespace {

uint64_t read_number(const std::string& path) {
  std::ifstream in(path);
  uint64_t v = 0;
  in >> v;
  return v;
}

uint64_t mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

constexpr uint64_t kMiB = 1024 * 1024;
// measured RSS per daemon (fabric-1k on this machine)
constexpr uint64_t kHostAgentRss = 5 * kMiB + kMiB / 4;
constexpr uint64_t kInjectorRss = 4 * kMiB + 3 * kMiB / 4;
constexpr uint64_t kGobgpdRss = 40 * kMiB;
constexpr uint64_t kFibAgentRss = 21 * kMiB;  // with gRPC (rack-64)
constexpr uint64_t kGobgpThreads = 12;
constexpr uint64_t kFibAgentThreads = 9;  // its own and gRPC's (rack-64)

std::string gib(uint64_t b) { return fmt::format("{:.1f} GiB", static_cast<double>(b) / (1024.0 * kMiB)); }

}  // namespace

MachineLimits read_machine_limits() {
  MachineLimits m;
  m.pid_max = read_number("/proc/sys/kernel/pid_max");
  m.threads_max = read_number("/proc/sys/kernel/threads-max");
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) == 0) m.nofile = r.rlim_cur == RLIM_INFINITY ? UINT64_MAX : r.rlim_cur;
  m.gc_thresh3 = read_number("/proc/sys/net/ipv4/neigh/default/gc_thresh3");
  m.netdev_max_backlog = read_number("/proc/sys/net/core/netdev_max_backlog");
  m.mem_available = mem_available();
  long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  m.cpus = n > 0 ? static_cast<uint64_t>(n) : 0;
  return m;
}

nlohmann::json MachineLimits::to_json() const {
  return {{"pid_max", pid_max},         {"threads_max", threads_max}, {"nofile", nofile},
          {"neighbour_gc_thresh3", gc_thresh3}, {"netdev_max_backlog", netdev_max_backlog},
          {"mem_available_bytes", mem_available}, {"cpus", cpus}};
}

Footprint estimate_footprint(const Topology& topo) {
  Footprint f;
  std::map<int, uint64_t> sessions;  // switch node -> BGP sessions
  for (const auto& n : topo.nodes) {
    ++f.namespaces;
    if (n.kind == NodeKind::host && n.job) {
      ++f.job_hosts;
      ++f.namespaces;  // its job container
    }
    if (n.kind == NodeKind::spine || n.kind == NodeKind::rack_switch) ++f.switches;
  }
  for (const auto& l : topo.links) {
    if (l.kind == LinkKind::host_nic) ++sessions[l.a.node];  // one injector session per NIC (per-NIC mode)
    if (l.kind == LinkKind::fabric) ++sessions[l.a.node], ++sessions[l.b.node];
  }
  for (const auto& [node, s] : sessions) f.max_sessions = std::max(f.max_sessions, s);
  f.processes = 2 * f.job_hosts + 2 * f.switches + 1;  // + the supervisor
  f.threads = 2 * f.job_hosts + f.switches * (kGobgpThreads + kFibAgentThreads) + 1;
  f.memory = f.job_hosts * (kHostAgentRss + kInjectorRss) + f.switches * (kGobgpdRss + kFibAgentRss);
  return f;
}

nlohmann::json Footprint::to_json() const {
  return {{"job_hosts", job_hosts}, {"switches", switches}, {"namespaces", namespaces}, {"processes", processes},
          {"threads", threads},     {"memory_bytes", memory},  {"max_sessions_per_switch", max_sessions}};
}

std::vector<std::string> footprint_warnings(const Footprint& f, const MachineLimits& m) {
  std::vector<std::string> out;
  auto near = [](uint64_t need, uint64_t limit) { return limit > 0 && need * 10 >= limit * 8; };
  if (near(f.memory, m.mem_available))
    out.push_back(fmt::format("its daemons need about {} of memory; {} are available", gib(f.memory),
                              gib(m.mem_available)));
  if (near(f.processes, m.pid_max))
    out.push_back(fmt::format("it starts {} processes; kernel.pid_max is {}", f.processes, m.pid_max));
  if (near(f.threads, m.threads_max))
    out.push_back(fmt::format("it starts about {} threads; kernel.threads-max is {}", f.threads, m.threads_max));
  if (near(f.max_sessions + 64, m.nofile))
    out.push_back(fmt::format("its busiest switch holds {} BGP sessions; gobgpd may open {} files", f.max_sessions,
                              m.nofile));
  // measured here: fabric-256 (270 daemons per CPU) converges in seconds;
  // fabric-1k (1050 per CPU) came up but its startup and polling starved
  // the machine before it converged
  if (m.cpus > 0 && f.processes > 400 * m.cpus)
    out.push_back(fmt::format("it runs {} daemons on {} CPUs: expect slow convergence (about {} per CPU)",
                              f.processes, m.cpus, f.processes / m.cpus));
  return out;
}

}  // namespace lanes::testbed
