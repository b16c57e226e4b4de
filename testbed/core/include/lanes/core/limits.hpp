#pragma once
// What bounds the size of a run on this machine, and what a topology needs.
// A run's daemons are two per job host (host agent, VIP injector) and two
// per switch (gobgpd, FIB agent), so process and
// thread limits and memory bind before the kernel's objects do. Read from
// /proc and getrlimit; nothing is changed.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lanes/core/model.hpp"

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

// One line per limit the footprint comes near (80%) or passes.
std::vector<std::string> footprint_warnings(const Footprint& f, const MachineLimits& m);

}  // namespace lanes::testbed
