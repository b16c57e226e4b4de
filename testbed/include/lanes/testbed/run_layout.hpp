#pragma once
// Where a run's files are, in one place: <state>/<run>/ and what is in it.
// Modules add their own files through node_dir() and publish path
// functions of their own (switch_files, host_agent_files, injector_files),
// so no module spells another module's file path.

#include <string>
#include <string_view>

namespace lanes::testbed {

class RunLayout {
 public:
  explicit RunLayout(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }
  std::string topology() const { return dir_ + "/topology.xml"; }      // the topology as the run was made from it
  std::string daemons() const { return dir_ + "/daemons.json"; }       // the roles' daemon requests
  std::string supervisor() const { return dir_ + "/supervisor.json"; } // the supervisor's state
  std::string events() const { return dir_ + "/events.jsonl"; }        // daemon starts, exits, restarts
  std::string logs() const { return dir_ + "/logs"; }
  std::string lanes_log() const { return dir_ + "/lanes.log"; }       // lanes up's own log of the run
  // <logs>/<node>-<daemon>.log
  std::string daemon_log(std::string_view node, std::string_view daemon) const {
    return logs() + "/" + std::string(node) + "-" + std::string(daemon) + ".log";
  }
  // A node's files of one role: <run>/<role>/<node> (role: "hosts", "switches")
  std::string node_dir(std::string_view role, std::string_view node) const {
    return dir_ + "/" + std::string(role) + "/" + std::string(node);
  }

 private:
  std::string dir_;
};

}  // namespace lanes::testbed
