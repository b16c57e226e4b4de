#pragma once
// The emulated switch's configuration, rendered from the topology: the TOML
// that Debian's gobgpd reads, and the JSON that lanes' FIB agent reads.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lanes/switches/fib_agent.hpp"
#include "lanes/testbed/model.hpp"

namespace lanes::switches {

using testbed::Topology;

inline constexpr const char* kGobgpApi = "127.0.0.1:50051";
inline constexpr uint16_t kGobgpApiPort = 50051;

// A BGP neighbor of a switch as lanes configures it.
struct SwitchNeighbor {
  std::string address;     // the peer's session address
  std::string local;       // this switch's address for the session
  uint32_t peer_as = 0;
  std::string description; // "h1 nic0", "spine1 swp1"
  bool host = false;       // a VIP injector (passive, multihop)
  int host_node = -1;
  std::string address6;    // a fabric peer's IPv6 address on the link
};

// The rack whose switch is NODE; null for a spine.
const testbed::Rack* rack_of_switch(const Topology& topo, int node);
// The prefixes of the servers hanging off NODE (their link /31 and /127):
// announced so that other racks reach them.
std::vector<std::string> server_prefixes(const Topology& topo, int node);

// The neighbors NODE (a rack switch or spine) has in TOPO.
std::vector<SwitchNeighbor> switch_neighbors(const Topology& topo, int node);
// The prefix limit of a host session NB of switch NODE, per address family
// (max-prefixes, times the NICs for an ADD-PATH session); 0 for none.
uint32_t session_prefix_limit(const Topology& topo, int node, const SwitchNeighbor& nb);
// gobgpd's TOML configuration for NODE.
std::string render_gobgp_config(const Topology& topo, int node);
// The FIB agent's configuration for NODE.
AgentConfig render_agent_config(const Topology& topo, int node);

}  // namespace lanes::switches
