#include "lanes/testbed/limits.hpp"

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
  return estimate_footprint(topo, [](int) { return true; });
}

Footprint estimate_footprint(const Topology& topo, const std::function<bool(int)>& counts) {
  Footprint f;
  std::map<int, uint64_t> sessions;  // switch node -> BGP sessions
  for (size_t i = 0; i < topo.nodes.size(); ++i) {
    const Node& n = topo.nodes[i];
    if (!counts(static_cast<int>(i))) continue;
    ++f.namespaces;
    if (n.kind == NodeKind::host && n.job) {
      ++f.job_hosts;
      ++f.namespaces;  // its job container
    }
    if (n.kind == NodeKind::spine || n.kind == NodeKind::rack_switch) ++f.switches;
  }
  for (const auto& l : topo.links) {
    // one injector session per NIC (per-NIC mode)
    if (l.kind == LinkKind::host_nic && counts(l.a.node)) ++sessions[l.a.node];
    if (l.kind == LinkKind::fabric) {
      if (counts(l.a.node)) ++sessions[l.a.node];
      if (counts(l.b.node)) ++sessions[l.b.node];
    }
  }
  for (const auto& [node, s] : sessions) f.max_sessions = std::max(f.max_sessions, s);
  f.processes = 2 * f.job_hosts + 2 * f.switches + 1;  // + the supervisor
  // and in a rack with BFD on, a lanes-bfdd on its switch and one for its
  // job hosts (those counted)
  for (const auto& r : topo.racks) {
    if (r.sw.bfd_interval_ms == 0) continue;
    if (counts(r.switch_node)) ++f.processes;
    for (int h : r.hosts)
      if (topo.nodes.at(static_cast<size_t>(h)).job && counts(h)) {
        ++f.processes;
        break;
      }
  }
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

namespace {

// the sessions of each rack with BFD on
std::vector<uint64_t> sessions_per_rack(const Topology& topo) {
  std::vector<uint64_t> n(topo.racks.size(), 0);
  for (const auto& l : topo.links) {
    if (l.kind != LinkKind::host_nic) continue;
    const auto& host = topo.nodes.at(static_cast<size_t>(l.b.node));
    if (!host.job || host.rack < 0) continue;
    ++n.at(static_cast<size_t>(host.rack));
  }
  return n;
}

double packets(uint64_t sessions, uint32_t interval_ms) {
  return interval_ms == 0 ? 0.0 : 2.0 * static_cast<double>(sessions) * 1000.0 / interval_ms;
}

}  // namespace

BfdLoad bfd_load(const Topology& topo) {
  BfdLoad b;
  auto per_rack = sessions_per_rack(topo);
  for (size_t r = 0; r < topo.racks.size(); ++r) {
    uint32_t iv = topo.racks[r].sw.bfd_interval_ms;
    if (iv == 0 || per_rack[r] == 0) continue;
    b.sessions += per_rack[r];
    b.packets_per_s += packets(per_rack[r], iv);
    b.min_interval_ms = b.min_interval_ms == 0 ? iv : std::min(b.min_interval_ms, iv);
    b.max_interval_ms = std::max(b.max_interval_ms, iv);
  }
  b.cpus = b.packets_per_s * kBfdCpuPerPacket;
  return b;
}

double bfd_budget(uint64_t cpus) { return kBfdCpuShare * static_cast<double>(std::max<uint64_t>(cpus, 1)); }

std::string adapt_bfd_default(Topology& topo, uint64_t cpus) {
  auto per_rack = sessions_per_rack(topo);
  // what the racks that give an interval cost, and how many sessions the others have
  double given = 0;
  uint64_t left = 0;
  size_t racks_left = 0;
  for (size_t r = 0; r < topo.racks.size(); ++r) {
    const auto& sw = topo.racks[r].sw;
    if (sw.bfd_interval_given) given += packets(per_rack[r], sw.bfd_interval_ms);
    else if (per_rack[r] > 0) left += per_rack[r], ++racks_left;
  }
  if (left == 0) return "";
  double budget = bfd_budget(cpus), room = std::max(0.0, budget / kBfdCpuPerPacket - given);
  uint32_t chosen = kBfdIntervals[std::size(kBfdIntervals) - 1];
  for (uint32_t iv : kBfdIntervals)
    if (packets(left, iv) <= room) {
      chosen = iv;
      break;
    }
  if (chosen == kBfdIntervals[0]) return "";
  for (auto& rack : topo.racks)
    if (!rack.sw.bfd_interval_given) rack.sw.bfd_interval_ms = chosen;
  const uint32_t mult = topo.racks.empty() ? 3 : topo.racks.front().sw.bfd_multiplier;
  return fmt::format(
      "BFD every {} ms, not the default 100 ms: {} sessions on {} rack{} without bfd-interval= would send {:.0f} "
      "packets a second at 100 ms, about {:.1f} CPUs of this machine's {} (BFD's share is {:.0f}%, {:.1f} CPUs); at "
      "{} ms {:.0f} packets a second, {:.2f} CPUs, failures found in {} ms (x {}). Give bfd-interval= on <rack> to "
      "choose",
      chosen, left, racks_left, racks_left == 1 ? "" : "s", packets(left, 100), packets(left, 100) * kBfdCpuPerPacket,
      cpus, 100 * kBfdCpuShare, budget, chosen, packets(left, chosen), packets(left, chosen) * kBfdCpuPerPacket,
      chosen * mult, mult);
}

std::vector<std::string> bfd_warnings(const Topology& topo, uint64_t cpus) {
  std::vector<std::string> out;
  BfdLoad b = bfd_load(topo);
  double budget = bfd_budget(cpus);
  if (b.sessions == 0 || b.cpus <= budget) return out;
  std::string intervals = b.min_interval_ms == b.max_interval_ms
                              ? fmt::format("{} ms", b.min_interval_ms)
                              : fmt::format("{}-{} ms", b.min_interval_ms, b.max_interval_ms);
  out.push_back(fmt::format(
      "BFD on {} sessions at {} sends {:.0f} packets a second, about {:.1f} CPUs of this machine's {} (more than "
      "BFD's {:.1f}): expect sessions to flap and paths to be taken out of use, daemons to miss their start, and BGP "
      "not to converge. A longer bfd-interval= on <rack>, or none (lanes then picks one that fits), or 0 (BFD off)",
      b.sessions, intervals, b.packets_per_s, b.cpus, cpus, budget));
  return out;
}

}  // namespace lanes::testbed
