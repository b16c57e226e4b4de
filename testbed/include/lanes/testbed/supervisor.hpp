#pragma once
// A run's supervisor (`lanes supervise RUN`, a detached process that `lanes
// up` starts and `lanes down` stops): starts the daemons the run's roles
// asked for (<run>/daemons.json, see deploy.hpp) wave by wave, keeps them
// alive (a daemon that exits is restarted with backoff and recorded in the
// run's events file) and stops them in reverse order. It knows no daemon
// by name.

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lanes/testbed/result.hpp"
#include "lanes/testbed/run_registry.hpp"

namespace lanes::testbed {

// Supervisor state file: <run>/supervisor.json
//   {"ready": bool, "error": "...", "daemons": [{"node","name","pid","restarts","log"}]}
// Events: <run>/events.jsonl, one JSON object per line
//   {"time_unix_ms", "node", "daemon", "event": "started|exited|restarted|ready", "status"}
std::string supervisor_state_path(const RunRegistry& reg, const std::string& run_id);
std::string events_path(const RunRegistry& reg, const std::string& run_id);
std::vector<nlohmann::json> read_events(const RunRegistry& reg, const std::string& run_id);

// A daemon the supervisor keeps, as it publishes it in supervisor.json.
struct SupervisedDaemon {
  std::string node, name;
  pid_t pid = 0;  // 0 while it is not running
  int restarts = 0;
  std::string log;
  std::vector<std::string> serves;  // other nodes it serves (DaemonRequest::serves)
  // NODE's daemon: its own or one that serves it too
  bool serves_node(const std::string& n) const;
  nlohmann::json to_json() const;
  static SupervisedDaemon from_json(const nlohmann::json& j);
};
// The daemons of RUN_ID's supervisor as it last published them (none
// before it has, or when its file cannot be read): the one reader of
// supervisor.json outside the supervisor.
std::vector<SupervisedDaemon> supervised_daemons(const RunRegistry& reg, const std::string& run_id);

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
// until every daemon is ready, or fails with what went wrong and where its
// log is. TIMEOUT bounds a supervisor that makes no progress.
// LANES_BIN is the lanes executable that runs `lanes supervise` (default:
// the one beside the running program).
// GIVE_UP (when set) bounds the whole start, progress or not (lanes up
// --wait): past it the supervisor is stopped and the error says how far
// the daemons got.
Result<DaemonRecord> start_supervisor(const RunRegistry& reg, const std::string& run_id,
                                      std::chrono::seconds timeout, const std::string& lanes_bin = "",
                                      std::optional<std::chrono::steady_clock::time_point> give_up = std::nullopt);
// An error of the run's start whose message says it all (what was waited
// for, how long, the likely cause): its text ends there, with no errno's
// words after it.
std::system_error start_error(int code, const std::string& what);

}  // namespace lanes::testbed
