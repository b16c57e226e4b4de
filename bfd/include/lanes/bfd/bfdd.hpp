#pragma once
// lanes-bfdd: the BFD sessions of one node (a rack switch's ports towards
// the hosts, a host's NICs), in a daemon of its own so that a restart of
// the FIB agent or the host agent never takes a path out of use. Its
// clients hear the verdicts through notify.hpp.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lanes/bfd/link.hpp"
#include "lanes/testbed/deploy.hpp"
#include "lanes/testbed/model.hpp"

namespace lanes::bfd {

struct BfddConfig {
  std::string node;
  std::string socket;  // the verdict socket (notify.hpp)
  std::vector<LinkConfig> links;

  // Throws std::invalid_argument saying what is wrong.
  static BfddConfig from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};

// The BFD sessions of NODE: a rack switch's ports towards its job hosts,
// or a job host's NICs (towards its rack switch), over the links' IPv4
// addresses (IPv6 for an IPv6-only job), at the rack's interval; none
// where the rack has BFD off.
std::vector<LinkConfig> bfd_links(const testbed::Topology& t, int node);

// Where a node's bfdd keeps its files: <node dir>/bfdd.json (BfddConfig),
// bfdd-state.json (its sessions' status) and bfdd.sock.
struct BfddFiles {
  std::string config, state, socket;
};
BfddFiles bfdd_files(const std::string& node_dir);

// For lanes status: the sessions of the bfdd in NODE_DIR as its state file
// has them (DETAILED: with counters), or null where it has none.
nlohmann::json bfd_status(const std::string& node_dir, bool detailed);

// Writes the bfdd config of NODE into NODE_DIR and adds its daemon (in the
// node's namespace, in WAVE) to CTX. Returns its verdict socket, or "" when
// the node has no BFD sessions (and no bfdd).
testbed::Result<std::string> deploy_bfdd(testbed::DeployContext& ctx, int node, const std::string& node_dir, int wave);

}  // namespace lanes::bfd
