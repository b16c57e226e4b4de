#pragma once
// A node role — the emulated switches, the hosts' job containers, the VIP
// injectors — plugs into a run through this one interface: what it deploys
// onto a freshly built testbed (files and daemon requests), and what
// `lanes status` shows of a node. The lanes executable's main makes the
// roles and passes them in; core knows none of them.

#include <iosfwd>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lanes/testbed/deploy.hpp"
#include "lanes/testbed/model.hpp"
#include "lanes/testbed/result.hpp"
#include "lanes/testbed/run_registry.hpp"

namespace lanes::testbed {

class Role {
 public:
  virtual ~Role() = default;
  virtual const char* name() const = 0;
  // Adds the role's files and daemon requests to the run in CTX.
  virtual Status deploy(DeployContext& ctx) const = 0;
  // Where lanes status puts this role's view of a node ("bgp", "hostnet", ...).
  virtual const char* status_key() const = 0;
  // The role's view of NODE of a running run (null: the role has nothing
  // on it). NETNS_FD is the node's namespace (-1 if it is gone). DETAILED:
  // everything, not just what a fleet summary counts.
  virtual nlohmann::json status(const RunRegistry& reg, const std::string& run_id, const Node& node, int netns_fd,
                                bool detailed) const = 0;
  // What lanes status prints for a person of VIEW (what status() gave,
  // detailed), under the node's own line; NODE is the node's whole status
  // (its interfaces too), for what the view refers to.
  virtual void print_status(const nlohmann::json& view, const nlohmann::json& node, std::ostream& out) const = 0;
};

using Roles = std::vector<std::shared_ptr<const Role>>;

}  // namespace lanes::testbed
