#pragma once
// Taking runs down and cleaning up after dead ones. A clean first makes a
// plan from what it can prove (the run registry, the machine-wide owner
// records, /proc, the namespaces), and `lanes clean --dry-run` prints that
// same plan instead of carrying it out.

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "lanes/testbed/run_registry.hpp"
#include "lanes/testbed/fabric.hpp"

namespace lanes::testbed {

// One run a clean removes, and what of it exists.
struct CleanTarget {
  std::string id;
  std::string why;                      // "dead run: ...", "orphaned objects: ..."
  std::vector<std::string> namespaces;  // lanes-<id>-*
  std::vector<pid_t> processes;         // its supervisor and what runs in its namespaces
  bool has_dir = false;                 // its directory in this state dir
};

struct CleanPlan {
  std::vector<CleanTarget> targets;
  std::vector<std::string> stale_records;  // owner records of runs that no longer exist anywhere
  std::vector<std::string> hidden_dirs;    // paths of .new-/.gone- directories a killed lanes left
  std::vector<std::string> left_alone;     // what looked like lanes' but is not ours to remove, and why
  int kept_up = 0;                         // runs up (kept unless --all)
  int live = 0;                            // runs a lanes process holds
};

// What `lanes clean` (ALL: `--all`) would remove in REG's state dir.
CleanPlan plan_clean(const RunRegistry& reg, bool all);

struct RemoveResult {
  bool ok = true;
  bool busy = false;  // another lanes process held the run: nothing was done
  bool alive = false;  // only_dead, and the run was up when it was locked: nothing was done
  TeardownReport report;
  std::vector<std::string> errors;
  std::chrono::microseconds took{0};
};

// Takes run ID down: locks it (refused while a lanes process holds it), its
// supervisor, processes, namespaces, directory and owner record. With
// ONLY_DEAD (lanes clean) the run is judged again once it is locked, and
// left alone if it is up: what a clean saw before it took the lock may
// have come up since.
RemoveResult remove_run(const RunRegistry& reg, const std::string& id, bool only_dead = false);

}  // namespace lanes::testbed
