#pragma once
// Runs on this machine. Every run has an id and a directory (default
// /run/lanes/<id>, or $LANES_STATE_DIR/<id>) holding its state file, its
// lock, a copy of its topology and its daemon logs. A run is *live* while a
// lanes process holds its lock; a run left in phase "creating" or
// "stopping" by a process that died is *dead*.

#include <sys/types.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "lanes/testbed/handle.hpp"
#include "lanes/testbed/result.hpp"

namespace lanes::testbed {

struct DaemonRecord {
  std::string name;   // "gobgpd", "fib-agent", ...
  std::string node;
  pid_t pid = 0;
  uint64_t start_time = 0;  // /proc/<pid>/stat field 22, guards against pid reuse
  std::string log;
};

struct RunState {
  std::string id;
  std::string topology_name;
  std::string topology_file;  // as given by the user
  std::string phase;          // creating, up, stopping
  pid_t owner = 0;            // the lanes process of the last phase change
  int64_t created_unix = 0;
  std::vector<DaemonRecord> daemons;
  nlohmann::json extra = nlohmann::json::object();  // modules' own state

  nlohmann::json to_json() const;
  static RunState from_json(const nlohmann::json& j);
};

// An exclusive flock on a run's lock file; released on destruction or when
// the holder dies (even by SIGKILL).
class RunLock {
 public:
  RunLock() = default;
  explicit RunLock(Fd fd) : fd_(std::move(fd)) {}
  bool held() const { return fd_.valid(); }

 private:
  Fd fd_;
};

class RunRegistry {
 public:
  explicit RunRegistry(std::string base = default_base());
  static std::string default_base();
  static bool valid_id(const std::string& id);  // 1-8 of [a-z0-9]
  static std::string netns_prefix(const std::string& id) { return "lanes-" + id + "-"; }
  static std::string netns_name(const std::string& id, const std::string& node) {
    return netns_prefix(id) + node;
  }
  // The run id in a namespace name "lanes-<id>-<node>", or "" if not ours.
  static std::string run_of_netns(const std::string& ns);

  const std::string& base() const { return base_; }
  std::string dir(const std::string& id) const { return base_ + "/" + id; }
  std::string state_path(const std::string& id) const { return dir(id) + "/state.json"; }

  // Creates the directory of a new run and locks it. EEXIST if the id is taken.
  Result<RunLock> create(const std::string& id) const;
  // Locks an existing run; with WAIT false, EWOULDBLOCK if another process holds it.
  Result<RunLock> lock(const std::string& id, bool wait) const;
  // true if some process holds the run's lock right now.
  bool in_use(const std::string& id) const;

  std::vector<std::string> list() const;
  bool exists(const std::string& id) const;
  Result<RunState> load(const std::string& id) const;
  Status save(const RunState& s) const;
  Status remove_dir(const std::string& id) const;
  // A fresh random id that no run and no namespace uses.
  std::string new_id() const;

 private:
  std::string base_;
};

// /proc/<pid>/stat start time, 0 if the process is gone (or a zombie).
uint64_t process_start_time(pid_t pid);

}  // namespace lanes::testbed
