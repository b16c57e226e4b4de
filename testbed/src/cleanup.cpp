#include "lanes/testbed/cleanup.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "lanes/testbed/log.hpp"
#include "lanes/testbed/netns.hpp"

namespace lanes::testbed {
namespace {

// The processes a teardown of ID would stop: its supervisors, then every
// process inside its namespaces.
std::vector<pid_t> run_processes(const RunRegistry& reg, const std::string& id,
                                 const std::vector<std::string>& namespaces) {
  std::vector<pid_t> out;
  for (auto [pid, st] : find_supervisors(id, reg.base())) out.push_back(pid);
  for (const auto& n : namespaces) {
    auto ns = Netns::open(n);
    if (!ns) continue;
    for (pid_t p : pids_in_netns(ns.value().inode()))
      if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  }
  return out;
}

CleanTarget target(const RunRegistry& reg, const std::string& id, std::string why) {
  CleanTarget t;
  t.id = id;
  t.why = std::move(why);
  t.namespaces = list_netns(RunRegistry::netns_prefix(id));
  t.processes = run_processes(reg, id, t.namespaces);
  t.has_dir = reg.exists(id);
  return t;
}

// The lanes process that claimed a run id is still the one running.
bool creator_alive(const OwnerRecord& o) { return o.pid > 0 && process_start_time(o.pid) == o.start_time; }

bool has_bpf_dir(const std::string& id) {
  std::error_code ec;
  return std::filesystem::exists("/sys/fs/bpf/lanes-" + id, ec);
}

// Why run ID of STATE_DIR is not orphaned, if it is not: its directory is
// being made, is there, or is being removed. Each step of a run's life
// renames one into the next, so they are looked at in that order.
std::optional<std::string> run_present(const std::string& state_dir, const RunRegistry& reg,
                                       const std::string& id) {
  std::error_code ec;
  if (std::filesystem::exists(state_dir + "/" + RunRegistry::kNewPrefix + id, ec))
    return fmt::format("run {} is being created; not touched", id);
  if (state_dir == reg.base() && reg.exists(id))
    return fmt::format("run {} appeared since this clean looked; not touched", id);
  if (state_dir != reg.base() && RunRegistry(state_dir, reg.owners()).exists(id))
    return fmt::format("run {} belongs to state dir {}; not touched (LANES_STATE_DIR={} lanes clean)", id,
                       state_dir, state_dir);
  if (std::filesystem::exists(state_dir + "/" + RunRegistry::kGonePrefix + id, ec))
    return fmt::format("run {} is being removed; not touched", id);
  return std::nullopt;
}

}  // namespace

CleanPlan plan_clean(const RunRegistry& reg, bool all) {
  CleanPlan plan;
  std::set<std::string> seen;
  // 1. runs of this state dir
  for (const auto& id : reg.list()) {
    seen.insert(id);
    if (auto o = reg.owner_of(id); o && o->state_dir != reg.base()) {
      plan.left_alone.push_back(fmt::format("run {}: its owner record names state dir {}; not touched", id,
                                            o->state_dir));
      continue;
    }
    RunHealth h = reg.assess(id);
    if (!h.live && !reg.exists(id)) continue;  // removed since the listing
    if (h.live) {
      ++plan.live;
    } else if (h.phase == "dead") {
      plan.targets.push_back(target(reg, id, "dead run: " + h.reason));
    } else if (all) {
      plan.targets.push_back(target(reg, id, "run " + h.phase + " (--all)"));
    } else {
      ++plan.kept_up;
    }
  }
  // 2. objects of runs with no directory here: only what the owner records
  // prove to be a dead run's
  std::set<std::string> ids;
  for (const auto& ns : list_netns("lanes-"))
    if (auto id = RunRegistry::run_of_netns(ns); !id.empty() && !seen.count(id)) ids.insert(id);
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/sys/fs/bpf", ec)) {
    std::string n = e.path().filename().string();
    if (n.rfind("lanes-", 0) == 0 && RunRegistry::valid_id(n.substr(6)) && !seen.count(n.substr(6)))
      ids.insert(n.substr(6));
  }
  for (const auto& s : find_supervisors(reg.base()))
    if (!seen.count(s.id)) ids.insert(s.id);
  for (const auto& id : ids) {
    auto o = reg.owner_of(id);
    if (!o) {
      // a supervisor of this state dir is ours whatever its record says
      if (!find_supervisors(id, reg.base()).empty()) {
        plan.targets.push_back(target(reg, id, "orphaned supervisor (no run directory, no owner record)"));
        continue;
      }
      plan.left_alone.push_back(
          fmt::format("lanes-{}-*: no owner record, so nothing proves lanes made it; not touched", id));
      continue;
    }
    // made, up, or being removed: looked for in the order of a run's life
    // (.new-, its own name, .gone-), so a run that moves on while this looks
    // is seen in its next place (CI once saw a down rename the directory
    // between a look for .gone- and a look for the run)
    if (auto where = run_present(o->state_dir, reg, id)) {
      plan.left_alone.push_back(std::move(*where));
      continue;
    }
    auto t = target(reg, id, "orphaned objects: the run's directory in " + o->state_dir + " is gone");
    // a run that went down to the end while this looked left nothing
    if (t.namespaces.empty() && t.processes.empty() && !has_bpf_dir(id)) continue;
    plan.targets.push_back(std::move(t));
    seen.insert(id);
  }
  // 3. directories of creators and removers killed before they finished
  // (a creator's owner record comes before its directory; a remover unlinks
  // the lock last)
  for (const auto& name : reg.hidden_dirs()) {
    std::string path = reg.base() + "/" + name;
    if (RunRegistry::locked(path + "/lock")) continue;
    if (name.rfind(RunRegistry::kNewPrefix, 0) == 0) {
      auto o = reg.owner_of(name.substr(std::strlen(RunRegistry::kNewPrefix)));
      if (o && creator_alive(*o)) continue;
    } else if (!std::filesystem::exists(path + "/lock")) {
      std::error_code empty_ec;
      if (!std::filesystem::is_empty(path, empty_ec) || empty_ec) continue;  // a remover between its last two steps
    }
    plan.hidden_dirs.push_back(path);
  }
  // 4. owner records of runs that exist nowhere any more
  for (const auto& id : reg.owned_ids()) {
    if (seen.count(id)) continue;
    auto o = reg.owner_of(id);
    if (!o) continue;  // unreadable: maybe being written
    if (!creator_alive(*o) && !RunRegistry(o->state_dir, reg.owners()).exists(id) &&
        list_netns(RunRegistry::netns_prefix(id)).empty())
      plan.stale_records.push_back(id);
  }
  return plan;
}

RemoveResult remove_run(const RunRegistry& reg, const std::string& id, bool only_dead) {
  auto t0 = std::chrono::steady_clock::now();
  RemoveResult res;
  std::vector<DaemonRecord> daemons;
  std::optional<RunLock> lock;
  if (reg.exists(id)) {
    auto l = reg.lock(id, false);
    if (!l) {
      res.errors.push_back("run " + id + " is in use by another lanes process; not touched");
      res.ok = false;
      res.busy = true;
      return res;
    }
    lock.emplace(std::move(l).value());
    if (only_dead && reg.assess_held(id).phase == "up") {
      res.alive = true;
      return res;
    }
    if (auto st = reg.load(id); st) {
      RunState s = st.value();
      daemons = s.daemons;
      s.phase = "stopping";
      s.owner = ::getpid();
      (void)reg.save(s);
    }
  }
  res.report = teardown_run(id, daemons, reg.base());
  for (const auto& e : res.report.errors) res.errors.push_back("run " + id + ": " + e);
  res.ok = res.errors.empty();
  if (res.ok) {
    if (reg.exists(id)) {
      if (auto st = reg.remove_dir(id); !st) {
        res.errors.push_back(st.error().what());
        res.ok = false;
      }
    } else if (auto o = reg.owner_of(id); o && !RunRegistry(o->state_dir, reg.owners()).exists(id)) {
      reg.forget(id);  // the record of a run whose directory is gone
    }
  }
  res.took = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0);
  return res;
}

}  // namespace lanes::testbed
