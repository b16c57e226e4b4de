#pragma once
// Runs on this machine. Every run has an id and a directory (default
// /run/lanes/<id>, or $LANES_STATE_DIR/<id>) holding its state file, its
// lock, a copy of its topology and its daemon logs.
//
// Every run also has an *owner record*, /run/lanes-owners/<id>.json, made
// before anything else of the run exists: it claims the id on the whole
// machine (whatever state dir a run uses) and names the state dir that owns
// the run, so a lanes process working with another state dir can tell a
// live run's namespaces from a dead one's without seeing its directory.
//
// Liveness (RunRegistry::assess): a run is *live* while a lanes process
// holds its lock. Otherwise it is *up* when its state says so, it was left
// up on purpose (not held by an owner that has died) and its supervisor, if
// it has one, is still that very process; everything else is *dead*.

#include <sys/types.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "lanes/testbed/handle.hpp"
#include "lanes/testbed/overrides.hpp"
#include "lanes/testbed/result.hpp"
#include "lanes/testbed/run_layout.hpp"

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
  // true while the run lives only as long as the process that made it
  // (lanes run without --keep): once that process is gone the run is dead
  bool held = false;
  int64_t created_unix = 0;
  Overrides overrides;  // a scenario's, which its topology was loaded with
  std::vector<DaemonRecord> daemons;

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

// Who owns a run id on this machine (the owner record).
struct OwnerRecord {
  std::string state_dir;  // absolute base of the registry that made the run
  pid_t pid = 0;          // the lanes process that claimed the id
  uint64_t start_time = 0;
};

// What lanes can tell of a run without touching it.
struct RunHealth {
  std::string phase;   // creating, up, stopping (live or up), or dead
  std::string reason;  // why it is dead, for people
  bool live = false;   // a lanes process holds its lock
};

class RunRegistry {
 public:
  explicit RunRegistry(std::string base = default_base(), std::string owners = default_owners());
  static std::string default_base();
  static std::string default_owners();
  static bool valid_id(const std::string& id);  // 1-8 of [a-z0-9]
  static std::string netns_prefix(const std::string& id) { return "lanes-" + id + "-"; }
  static std::string netns_name(const std::string& id, const std::string& node) {
    return netns_prefix(id) + node;
  }
  // The run id in a namespace name "lanes-<id>-<node>", or "" if not ours.
  static std::string run_of_netns(const std::string& ns);

  const std::string& base() const { return base_; }
  const std::string& owners() const { return owners_; }
  std::string dir(const std::string& id) const { return base_ + "/" + id; }
  RunLayout layout(const std::string& id) const { return RunLayout(dir(id)); }
  std::string state_path(const std::string& id) const { return dir(id) + "/state.json"; }

  // Claims the id machine-wide (the owner record), creates the directory of
  // the new run and locks it. EEXIST if the id is taken, here or elsewhere.
  Result<RunLock> create(const std::string& id) const;
  std::optional<OwnerRecord> owner_of(const std::string& id) const;
  // Ids with an owner record, whichever state dir owns them.
  std::vector<std::string> owned_ids() const;
  // Removes the owner record of ID if this registry owns it.
  void release(const std::string& id) const;
  // Removes the owner record of ID whoever it names (a dead run's).
  void forget(const std::string& id) const;
  // true if the owner record of ID names this registry's state dir.
  bool owns(const std::string& id) const;
  // Live, up or dead, and why (see the top of this file).
  RunHealth assess(const std::string& id) const;
  // The same, for a caller that holds the run's lock (its state is then
  // what its last holder left): up or dead.
  RunHealth assess_held(const std::string& id) const;
  // Locks an existing run; with WAIT false, EWOULDBLOCK if another process holds it.
  Result<RunLock> lock(const std::string& id, bool wait) const;
  // true if some process holds the run's lock right now (a test that takes
  // nothing, so it never makes a concurrent lock() fail).
  bool in_use(const std::string& id) const;
  // Hidden directories of this state dir (names, not runs): create() builds
  // a run in ".new-<id>" and renames it into place, remove_dir() renames it
  // to ".gone-<id>" before removing it. Left over only by a killed lanes.
  static constexpr const char* kNewPrefix = ".new-";
  static constexpr const char* kGonePrefix = ".gone-";
  std::vector<std::string> hidden_dirs() const;
  static Result<RunLock> lock_file(const std::string& path, bool wait);
  static bool locked(const std::string& path);

  std::vector<std::string> list() const;
  bool exists(const std::string& id) const;
  Result<RunState> load(const std::string& id) const;
  Status save(const RunState& s) const;
  // Removes the run's directory (renamed out of sight first) and its owner
  // record, the record before the directory's last trace.
  Status remove_dir(const std::string& id) const;
  // A fresh random id that no run and no namespace uses.
  std::string new_id() const;

 private:
  RunHealth judge(const std::string& id, const Result<RunState>& st) const;
  std::string base_;
  std::string owners_;
};

// /proc/<pid>/stat start time, 0 if the process is gone (or a zombie).
uint64_t process_start_time(pid_t pid);

// /proc/<pid>/cmdline split at NULs; empty if the process is gone.
std::vector<std::string> process_cmdline(pid_t pid);

// The run's supervisor is "lanes supervise ID --state-dir BASE ...": true if
// PID (started at START_TIME, 0 = any) is that process for this id and base.
bool is_supervisor_of(pid_t pid, uint64_t start_time, const std::string& id, const std::string& base);

// Every running supervisor of run ID of state dir BASE, found in /proc.
std::vector<std::pair<pid_t, uint64_t>> find_supervisors(const std::string& id, const std::string& base);

// Every running supervisor of state dir BASE: (run id, pid, start time).
struct SupervisorProcess {
  std::string id;
  pid_t pid = 0;
  uint64_t start_time = 0;
};
std::vector<SupervisorProcess> find_supervisors(const std::string& base);

}  // namespace lanes::testbed
