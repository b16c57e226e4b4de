#pragma once
// The emulated switches of a run: gobgpd and the FIB agent on every rack
// switch and spine, started and kept alive by the run's supervisor
// (`lanes supervise RUN`, a detached process that `lanes up` starts and
// `lanes down` stops). Crashes are restarted and recorded in the run's
// events file.

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lanes/testbed/model.hpp"
#include "lanes/testbed/result.hpp"
#include "lanes/testbed/run_registry.hpp"

namespace lanes::testbed {

struct SwitchFiles {
  std::string dir;            // <run>/switches/<node>
  std::string gobgp_config;   // gobgpd.toml
  std::string agent_config;   // fib-agent.json
  std::string agent_state;    // fib-agent-state.json (written by the agent)
  std::string gobgpd_log;     // <run>/logs/<node>-gobgpd.log
  std::string agent_log;      // <run>/logs/<node>-fib-agent.log
};

SwitchFiles switch_files(const RunRegistry& reg, const std::string& run_id, const std::string& node);
bool has_switches(const Topology& topo);
// Renders and writes every switch's configuration; checks each with
// `gobgpd --dry-run`.
Status write_switch_configs(const Topology& topo, const RunRegistry& reg, const std::string& run_id);

// Supervisor state file: <run>/supervisor.json
//   {"ready": bool, "error": "...", "daemons": [{"node","name","pid","restarts","log"}]}
// Events: <run>/events.jsonl, one JSON object per line
//   {"time_unix_ms", "node", "daemon", "event": "started|exited|restarted|ready", "status"}
std::string supervisor_state_path(const RunRegistry& reg, const std::string& run_id);
std::string events_path(const RunRegistry& reg, const std::string& run_id);
std::vector<nlohmann::json> read_events(const RunRegistry& reg, const std::string& run_id);

// The process a supervisor watches: the lanes process that made the run.
// While the run is held by it (being built, or made by lanes run without
// --keep) the supervisor stops its daemons and exits as soon as that
// process is gone; once the run is left up on its own, it carries on.
struct SupervisorOwner {
  pid_t pid = 0;
  uint64_t start_time = 0;
};

// The supervisor's main loop; returns its exit code. Stops on SIGTERM, or
// when its run is dead (see SupervisorOwner).
int run_supervisor(const RunRegistry& reg, const std::string& run_id, const SupervisorOwner& owner);

// Starts the supervisor for RUN_ID (detached; `lanes supervise RUN_ID
// --state-dir BASE --owner PID:START`, this process its owner) and waits
// until every gobgpd answers, or fails with what went wrong and where its
// log is.
// LANES_BIN is the lanes executable that runs `lanes supervise` (default:
// the one beside the running program).
Result<DaemonRecord> start_supervisor(const RunRegistry& reg, const std::string& run_id,
                                      std::chrono::seconds timeout, const std::string& lanes_bin = "");

// What `lanes status` shows for switch NODE of a running run: BGP sessions
// (state, received, accepted, rejected), the FIB agent's routes, daemons.
nlohmann::json switch_status_json(const RunRegistry& reg, const std::string& run_id, const Node& node,
                                  int netns_fd);

// The directory of the running lanes binary (the agent lives beside it).
std::string self_dir();

}  // namespace lanes::testbed
