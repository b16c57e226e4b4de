#pragma once
// The fabric's builder: a resolved Topology turned into kernel objects for one run —
// a namespace per node, a veth pair per link, addresses, line-rate TBF —
// and their removal.

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lanes/testbed/model.hpp"
#include "lanes/testbed/kernel_plan.hpp"
#include "lanes/testbed/netlink.hpp"
#include "lanes/testbed/netns.hpp"
#include "lanes/testbed/partition.hpp"
#include "lanes/testbed/run_registry.hpp"

namespace lanes::testbed {

// What every namespace lanes makes gets: addresses usable at once and kept
// when a link goes down, no router advertisements, no reverse-path filter.
std::vector<Sysctl> base_sysctls();
// L4 hashing for multipath routes, and no next hop over a link that is down.
std::vector<Sysctl> multipath_sysctls();
// The sysctls a node's namespace gets when it is created: the base, and on
// every node but a server forwarding and multipath too.
std::vector<Sysctl> node_sysctls(NodeKind kind);

// What a topology's fabric becomes in the kernel once its namespaces exist
// (fabric.cpp: Fabric::build applies it), stage by stage: a veth pair per
// link from side A with both ends up, then addresses (/31 and /127) and
// permanent neighbours on both ends, TBF where a link has a rate, and the
// servers' default routes. IFINDEX: the interface index each end gets.
struct FabricPlan {
  KernelPlan links, addresses, qdiscs, routes;
  std::map<std::pair<int, std::string>, int> ifindex;  // (node, ifname) → index
};

// One machine's part of a run over several (partition.hpp): it builds the
// nodes placed on it; a link with one end here becomes a VXLAN device at
// that end (VNI from the placement, from this machine's address to the
// other's, UDP port PORT) with the addresses, MAC, neighbour and rate the
// veth end would have had, and a link with no end here is left to others.
struct Shard {
  const Placement* placement = nullptr;
  int machine = 0;
  std::vector<IpAddr> underlay;  // each machine's own address, by machine index
  uint16_t port = kVxlanPort;
  // the smallest MTU of the machines' own networks: a tunnel's inner MTU
  // is the veth's 1500 where it leaves room for VXLAN's headers, lower
  // (and the same on both ends) where it does not
  uint32_t underlay_mtu = 1500;
  // the machine's own network namespace, the tunnels' underlay: -1 is the
  // builder's own (a real machine's); a test gives an emulated machine's
  int underlay_ns_fd = -1;
  bool local(int node) const;
  uint32_t tunnel_mtu() const;
};
// What VXLAN adds to each packet on an IPv4 / IPv6 underlay (outer IP,
// UDP, VXLAN and inner Ethernet headers).
inline constexpr uint32_t kVxlanOverhead4 = 50, kVxlanOverhead6 = 70;
// SHARD, when given, restricts the plan to that machine's part.
FabricPlan fabric_plan(const Topology& topo, const std::string& run_id, const Shard* shard = nullptr);

struct BuildTimings {
  std::chrono::microseconds namespaces{0}, links{0}, addresses{0}, qdiscs{0}, total{0};
};

class Fabric {
 public:
  Fabric(Fabric&&) noexcept;
  Fabric& operator=(Fabric&&) noexcept;
  ~Fabric();  // closes fds and sockets only; the namespaces stay until teardown

  // Builds every namespace and link of TOPO for run RUN_ID (with SHARD:
  // that machine's nodes and its ends of the tunnels; netns() and
  // netlink() of another machine's node are empty). On failure,
  // everything it created is removed again before the error returns.
  static Result<Fabric> build(const Topology& topo, const std::string& run_id, const Shard* shard = nullptr);
  // Opens the namespaces of a run that is up.
  static Result<Fabric> attach(const Topology& topo, const std::string& run_id);

  const Topology& topology() const;
  const std::string& run_id() const;
  Netns& netns(int node);
  Netlink& netlink(int node);
  std::string netns_name(int node) const;
  // Interface index of IFNAME on NODE (assigned at build time, or looked up).
  Result<int> ifindex(int node, const std::string& ifname);
  const BuildTimings& timings() const;

 private:
  struct Impl;
  explicit Fabric(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct TeardownReport {
  int namespaces = 0;
  int processes = 0;
  std::vector<std::string> errors;
};

// Removes every kernel object of run RUN_ID: its supervisor (a recorded one
// in DAEMONS, or any found in /proc, only if its command line names RUN_ID
// and STATE_DIR; "" = the run has none yet), every process inside its
// namespaces (they are the run's), its namespaces (and so every link,
// address, route, qdisc and BPF attachment in them; lanes pins no BPF
// object). Processes are stopped by pid and start time. Leaves the run
// directory alone. The caller has proven the run is dead or its own.
TeardownReport teardown_run(const std::string& run_id, const std::vector<DaemonRecord>& daemons,
                            const std::string& state_dir);


}  // namespace lanes::testbed
