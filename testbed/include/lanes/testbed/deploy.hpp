#pragma once
// What a role's deploy step gets (role.hpp) and gives back: the built
// testbed, and the daemons it wants the run's supervisor to start and keep
// alive, in waves.

#include <functional>
#include <string>
#include <vector>

#include "lanes/testbed/features.hpp"
#include "lanes/testbed/model.hpp"
#include "lanes/testbed/result.hpp"
#include "lanes/testbed/run_registry.hpp"
#include "lanes/testbed/fabric.hpp"

namespace lanes::testbed {

// Start order of daemons: a wave starts once every daemon of the waves
// before it is ready; they stop in reverse order.
inline constexpr int kWaveFabric = 0;        // the switches' BGP speakers
inline constexpr int kWaveFabricAgents = 1;  // what follows them (FIB agents)
inline constexpr int kWaveHosts = 2;         // the hosts' and jobs' daemons

// A daemon a deployer wants supervised.
struct DaemonRequest {
  std::string node;                 // the node it belongs to (for status)
  std::vector<std::string> serves;  // other nodes it serves too (a rack's hosts' bfdd)
  std::string name;                 // "host-agent", "vip-injector", ...
  std::vector<std::string> argv;
  std::string netns;                // namespace to run in
  std::string ready_file;           // ready once this JSON file says "ready": true ("" = at once),
                                    // or, a path ending in ".api" or ".sock", once that socket exists
  int wave = kWaveHosts;
  std::vector<std::pair<std::string, std::string>> env;  // added to lanes' environment
  std::string log;                  // "" = <run>/logs/<node>-<name>.log
  std::vector<std::string> fatal_log;  // a line holding one of these, once its wave is ready, fails the start
};

struct DeployContext {
  Fabric& tb;
  const RunRegistry& reg;
  std::string run_id;
  KernelFeatures features;
  std::string bin_dir;              // where lanes' executables are
  std::vector<DaemonRequest> daemons;
  // a run over several machines: this machine's part (fabric.hpp); a role
  // deploys onto the nodes local() says are here
  const Shard* shard = nullptr;
  bool local(int node) const { return !shard || shard->local(node); }
};

// <run>/daemons.json: the requests, read by the supervisor.
std::string daemon_requests_path(const RunRegistry& reg, const std::string& run_id);
Status write_daemon_requests(const RunRegistry& reg, const std::string& run_id, const std::vector<DaemonRequest>& d);
std::vector<DaemonRequest> read_daemon_requests(const RunRegistry& reg, const std::string& run_id);

}  // namespace lanes::testbed
