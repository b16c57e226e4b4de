#pragma once
// The address plan, a pure step after loading: from the topology's pools it
// gives every link end its interface name and /31 + /127, every switch and
// spine its router id and loopback, every host NIC its container link, every
// rack its task blocks, and every job its task IPs, NIC addresses and ASN —
// keeping what the file fixed by hand and checking that no address is used
// twice.

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lanes/testbed/model.hpp"

namespace lanes::testbed {

// What the topology file fixed by hand, and where (lines for messages).
struct FixedAddresses {
  std::map<int, std::pair<std::optional<Ip4>, std::optional<Ip6>>> task;  // host node → its task IPs
  std::map<int, std::pair<bool, bool>> block;  // rack → (block4, block6) given (already in the rack)
  std::map<int, int> rack_line, host_line;     // rack / host node → its line in FILE
};

// Assigns TOPO's addresses; the problems ("FILE:line: message") where the
// pools are too small or addresses collide (empty: the plan holds).
std::vector<std::string> plan_addresses(Topology& topo, const FixedAddresses& fixed, const std::string& file);

}  // namespace lanes::testbed
