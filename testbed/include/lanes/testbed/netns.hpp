#pragma once
// Network namespaces held by fds. A namespace lanes creates is bind-mounted
// at /run/netns/NAME (so `ip netns` and a later `lanes down` see it).
// Entering a namespace happens only on worker threads, through NetnsGuard.

#include <sys/types.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "lanes/testbed/handle.hpp"
#include "lanes/testbed/result.hpp"

namespace lanes::testbed {

inline constexpr const char* kNetnsDir = "/run/netns";
// Where namespaces are mounted: kNetnsDir, or in lanes' rootless world the
// user's lanes-netns directory (rootless.hpp).
std::string netns_dir();

struct Sysctl {
  std::string key;  // "net.ipv4.ip_forward"
  std::string value;
};

class Netns {
 public:
  Netns() = default;
  Netns(std::string name, Fd fd, ino_t inode) : name_(std::move(name)), fd_(std::move(fd)), inode_(inode) {}

  // Creates a new namespace named NAME, applies SYSCTLS inside it and brings
  // its loopback up. Fails with EEXIST if the name is taken.
  static Result<Netns> create(const std::string& name, const std::vector<Sysctl>& sysctls);
  // Opens an existing named namespace.
  static Result<Netns> open(const std::string& name);

  const std::string& name() const { return name_; }
  int fd() const { return fd_.get(); }
  ino_t inode() const { return inode_; }
  std::string path() const { return netns_dir() + "/" + name_; }

 private:
  std::string name_;
  Fd fd_;
  ino_t inode_ = 0;
};

// Unmounts and unlinks /run/netns/NAME. The kernel frees the namespace (and
// every link inside it) once no process or fd holds it.
Status remove_netns(const std::string& name);
// Names under /run/netns starting with PREFIX.
std::vector<std::string> list_netns(const std::string& prefix);
// Pids whose network namespace has inode INODE.
std::vector<pid_t> pids_in_netns(ino_t inode);
// Inode of the calling thread's network namespace.
ino_t current_netns_inode();

// Scoped entry into a namespace for the calling thread (never the main
// thread): restores the original namespace on destruction.
class NetnsGuard {
 public:
  explicit NetnsGuard(int target_fd);
  ~NetnsGuard();
  NetnsGuard(const NetnsGuard&) = delete;
  NetnsGuard& operator=(const NetnsGuard&) = delete;
  bool ok() const { return ok_; }
  int error() const { return err_; }

 private:
  Fd original_;
  bool ok_ = false;
  int err_ = 0;
};

// Runs FN on a short-lived thread inside the namespace TARGET_FD and returns
// its status. The main thread's namespace never changes.
Status run_in_netns(int target_fd, const std::function<Status()>& fn, const std::string& what);

// Runs FN on a short-lived thread inside a new, anonymous namespace
// (unshare): it is gone once FN returns, unless FN bind-mounts it or keeps
// an fd or socket of it. The main thread's namespace never changes.
Status run_in_new_netns(const std::function<Status()>& fn, const std::string& what);

// Writes a sysctl of the calling thread's network namespace.
Status write_sysctl(const Sysctl& s);

}  // namespace lanes::testbed
