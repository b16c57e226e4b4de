#pragma once
// A topology split over the K machines of a run over several (a Slurm
// allocation): which machine builds which node, and which links cross
// between machines (each a VXLAN tunnel of its own). The rule, in order:
//   1. whole racks: a rack's switch, hosts and servers on one machine;
//      racks pinned with machine="N" (on <rack> or one of its <host>s)
//      where they are pinned, the rest by host count, largest first, each
//      onto the machine with the fewest hosts so far (ties: the lower
//      machine; racks of equal size in file order);
//   2. spines in file order round-robin over the machines (spine i on
//      machine i mod K) unless pinned, so their tunnels spread;
//   3. a server outside a rack on the machine of the spine or switch it
//      attaches to, unless pinned.
// Deterministic: the same topology and K give the same placement.

#include <cstdint>
#include <string>
#include <vector>

#include "lanes/testbed/model.hpp"

namespace lanes::testbed {

// The first VNI lanes gives a crossing link: link i gets kVniBase + i.
inline constexpr uint32_t kVniBase = 10000;
// Two runs over the same machines share each machine's VXLAN port, where a
// VNI can be in use once: each run's VNIs are moved by a slot of its own,
// kVniRunStride * (a hash of its run id mod kVniRunSlots), so two runs
// meet only by a 1-in-kVniRunSlots chance (then the second is refused:
// the VNI is in use).
inline constexpr uint32_t kVniRunStride = 100000, kVniRunSlots = 160;
uint32_t vni_offset(const std::string& run_id);
// The UDP port of the tunnels unless a run says otherwise (IANA's VXLAN port).
inline constexpr uint16_t kVxlanPort = 4789;

struct CrossLink {
  int link = -1;               // index into Topology::links
  int machine_a = -1;          // machine of the link's side A, and of side B
  int machine_b = -1;
  uint32_t vni = 0;
};

struct MachineShare {
  std::vector<int> racks;      // indices into Topology::racks
  std::vector<int> nodes;      // every node it builds, in topology order
  size_t hosts = 0, switches = 0, servers = 0, nics = 0;
  size_t tunnels = 0;          // crossing links with an end here
};

struct Placement {
  int machines = 1;
  std::vector<int> machine_of;  // per node
  std::vector<MachineShare> share;  // per machine
  std::vector<CrossLink> cross;     // in link order
};

// Places T over MACHINES (1..kMaxMachines). Throws InputError (file:line)
// when it cannot be split: fewer racks than machines, a pin at or beyond
// MACHINES, a machine left with no rack.
Placement place(const Topology& t, int machines);

// A few lines for people: per machine its racks, hosts, spines, servers
// and tunnels, then the crossing links' count.
std::string describe(const Topology& t, const Placement& p);

}  // namespace lanes::testbed
