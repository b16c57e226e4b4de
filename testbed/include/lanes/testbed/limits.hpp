#pragma once
// What bounds the size of a run on this machine, and what a topology needs.
// A run's daemons are two per job host (host agent, VIP injector) and two
// per switch (gobgpd, FIB agent), so process and
// thread limits and memory bind before the kernel's objects do. Read from
// /proc and getrlimit; nothing is changed.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <functional>
#include <string>
#include <vector>

#include "lanes/testbed/model.hpp"

namespace lanes::testbed {

struct MachineLimits {
  uint64_t pid_max = 0;            // /proc/sys/kernel/pid_max
  uint64_t threads_max = 0;        // /proc/sys/kernel/threads-max
  uint64_t nofile = 0;             // RLIMIT_NOFILE (soft) that daemons inherit
  uint64_t gc_thresh3 = 0;         // neighbour entries of all namespaces that are not permanent
  uint64_t netdev_max_backlog = 0; // packets a CPU queues on receive, every namespace's veths alike: a burst
                                   // beyond it drops (fleet-bootstrap's SYNs, connected 1 s late)
  uint64_t mem_available = 0;      // bytes, MemAvailable
  uint64_t cpus = 0;

  nlohmann::json to_json() const;
};

MachineLimits read_machine_limits();

// What a run of a topology costs, as measured here (RSS per daemon at
// fabric-1k: host agent 5.2 MB, injector 4.7 MB, gobgpd 40 MB, FIB agent
// 12 MB) and counted from the topology.
struct Footprint {
  uint64_t job_hosts = 0, switches = 0;
  uint64_t namespaces = 0;
  uint64_t processes = 0;       // daemons lanes starts
  uint64_t threads = 0;         // gobgpd is a Go program with about 12
  uint64_t memory = 0;          // bytes of daemon RSS
  uint64_t max_sessions = 0;    // BGP sessions on the busiest switch (file descriptors of its gobgpd)

  nlohmann::json to_json() const;
};

Footprint estimate_footprint(const Topology& topo);
// The part of it on the nodes COUNTS says yes to (one machine's share of a
// run over several; the supervisor counted once).
Footprint estimate_footprint(const Topology& topo, const std::function<bool(int)>& counts);

// One line per limit the footprint comes near (80%) or passes.
std::vector<std::string> footprint_warnings(const Footprint& f, const MachineLimits& m);

// What BFD costs. Every job-host NIC link of a rack with BFD on is one
// session, and both its ends send at the interval once it is up. Measured
// here with lanes-bfdd reading its sockets once a pass and sending every
// packet that may go in it (rack-64 at 100 ms: 256 sessions, 5120 packets
// a second, the machine 0.22 CPU busy of which the bfdd processes 0.15;
// fabric-256 at 100 ms: 20 480 packets a second, 0.70 busy, bfdd 0.50):
// about 35 us a packet sent and received. (A wake-up per packet cost 90.)
inline constexpr double kBfdCpuPerPacket = 35e-6;  // CPU-seconds per packet
// BFD may take this share of the machine's CPUs when lanes chooses its interval
inline constexpr double kBfdCpuShare = 0.3;
// The intervals lanes chooses from, shortest first (the default first)
inline constexpr uint32_t kBfdIntervals[] = {100, 200, 300, 500, 1000, 2000, 5000};

struct BfdLoad {
  uint64_t sessions = 0;      // job-host NIC links with BFD on
  double packets_per_s = 0;   // both ends, once up
  double cpus = 0;            // what that costs at kBfdCpuPerPacket
  uint32_t min_interval_ms = 0, max_interval_ms = 0;  // over the racks with BFD on (0: none)
};
BfdLoad bfd_load(const Topology& topo);
// The budget: kBfdCpuShare of CPUS, in CPUs.
double bfd_budget(uint64_t cpus);

// Where a rack leaves bfd-interval to lanes, the interval is the default
// 100 ms, or, when the racks that leave it would cost more than the
// budget at 100 ms, the shortest of kBfdIntervals that fits it (at least
// the longest lanes offers), the same on every such rack. Racks that give
// bfd-interval keep it. Returns what was chosen and why, in a sentence, or
// "" when every such rack keeps 100 ms (or there is none).
std::string adapt_bfd_default(Topology& topo, uint64_t cpus);
// Said when the intervals the topology gives cost more than the budget:
// the packet rate, what it costs, and what to do.
std::vector<std::string> bfd_warnings(const Topology& topo, uint64_t cpus);

}  // namespace lanes::testbed
