#pragma once
// The Slurm lab (scripts/slurm-lab) as the multi-machine tier uses it: a
// lab of the test's own, stopped on every path, and what is left in its
// machines' namespaces.

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "support.hpp"

namespace lanes::test {

// Ends the test as "not run" where Slurm or munge is not installed.
inline void require_slurm() {
  for (const char* b : {"/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged", "/usr/bin/srun"})
    if (::access(b, X_OK) != 0) not_run("Slurm or munge is not installed (scripts/setup installs them)");
}

struct Lab {
  std::string dir;
  explicit Lab(const std::string& name)
      : dir((std::filesystem::temp_directory_path() / ("lanes-" + name + "-" + std::to_string(::getpid()))).string()) {}
  Lab(const Lab&) = delete;
  Lab& operator=(const Lab&) = delete;
  ~Lab() { (void)run("stop"); }  // on every path
  std::string cmd(const std::string& args) const {
    return "LANES_SLURM_LAB=" + dir + " " + source_dir() + "/scripts/slurm-lab " + args;
  }
  CommandResult run(const std::string& args) const { return run_command(cmd(args)); }
  // CMD on machine M (m1..mK, ctl) in its own namespaces
  CommandResult on(const std::string& m, const std::string& command) const {
    return run("exec " + m + " -- sh -c '" + command + "'");
  }
  // the lab's namespaces by name (the lab network, the controller, the machines)
  std::set<std::string> netns() const {
    std::set<std::string> names;
    std::ifstream in(dir + "/netns");
    for (std::string n; std::getline(in, n);) names.insert(n);
    return names;
  }
  // their inode numbers, to find what is left in them
  std::set<std::string> netns_inodes() const {
    std::set<std::string> inodes;
    for (const auto& n : netns()) {
      struct stat info {};
      if (::stat(("/run/netns/" + n).c_str(), &info) == 0) inodes.insert(std::to_string(info.st_ino));
    }
    return inodes;
  }
};

// pids of processes whose network namespace is one of INODES, and of those
// whose command is COMM when one is given
inline std::set<std::string> in_namespaces(const std::set<std::string>& inodes, const std::string& comm = "") {
  std::set<std::string> pids;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::string pid = e.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::error_code ec;
    auto target = std::filesystem::read_symlink(e.path() / "ns/net", ec).string();
    if (ec) continue;
    if (!comm.empty()) {
      std::ifstream c(e.path() / "comm");
      std::string name;
      std::getline(c, name);
      if (name != comm) continue;
    }
    for (const auto& i : inodes)
      if (target == "net:[" + i + "]") pids.insert(pid);
  }
  return pids;
}

}  // namespace lanes::test
