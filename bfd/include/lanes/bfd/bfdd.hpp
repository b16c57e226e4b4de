#pragma once
// lanes-bfdd: the BFD sessions of a rack switch (its ports towards the
// hosts) or of a rack's job hosts (their NICs: one daemon for the hosts of
// a rack, each host's sockets in its own namespace), in a daemon of its own
// so that a restart of the FIB agent or a host agent never takes a path out
// of use. Each node keeps its own verdict socket and state file; its
// clients hear the verdicts through notify.hpp.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lanes/bfd/link.hpp"
#include "lanes/testbed/deploy.hpp"
#include "lanes/testbed/model.hpp"

namespace lanes::bfd {

// The sessions of one node.
struct BfddConfig {
  std::string node;
  std::string netns;   // the node's namespace ("": the daemon's own)
  std::string socket;  // the verdict socket (notify.hpp)
  std::string state;   // its sessions' status ("": the daemon's --state file)
  std::vector<LinkConfig> links;

  // Throws std::invalid_argument saying what is wrong.
  static BfddConfig from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};

// What one daemon serves: one node, or {"nodes": [...]} (a rack's hosts).
struct BfddPlan {
  std::vector<BfddConfig> nodes;

  // Throws std::invalid_argument saying what is wrong (and which node).
  static BfddPlan from_json(const nlohmann::json& j);
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

// The verdict socket NODE's bfdd will serve from NODE_DIR, or "" when the
// node has no BFD sessions.
std::string bfdd_socket(const testbed::Topology& t, int node, const std::string& node_dir);

// One bfdd for the job hosts NODES (of one rack; NODE_DIRS theirs), each
// node's sessions in its own namespace, its own verdict socket and state
// file in its directory; the daemon's own summary in DIR. Named "bfdd" on
// the first node and serving all. Nothing when none has sessions.
testbed::Status deploy_rack_bfdd(testbed::DeployContext& ctx, const std::vector<int>& nodes,
                                 const std::vector<std::string>& node_dirs, const std::string& dir, int wave);

}  // namespace lanes::bfd
