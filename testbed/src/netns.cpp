#include "lanes/testbed/netns.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

#include "lanes/testbed/log.hpp"
#include "lanes/testbed/process.hpp"
#include "lanes/testbed/rootless.hpp"

namespace lanes::testbed {
namespace {

// Makes /run/netns a shared mount point the way iproute2 does, so bind
// mounts made here propagate to every mount namespace. Touches the mount
// table only, never the root network namespace.
Status prepare_netns_dir() {
  static std::mutex mu;
  static bool done = false;
  std::lock_guard lk(mu);
  if (done) return {};
  // in the rootless world every process shares the world's one mount
  // namespace: its mount points need no propagation
  if (rootless::world_base()) return {};
  if (::mkdir(kNetnsDir, 0755) != 0 && errno != EEXIST) return errno_error("creating /run/netns");
  if (::mount("", kNetnsDir, "none", MS_SHARED | MS_REC, nullptr) != 0) {
    if (errno != EINVAL) return errno_error("making /run/netns a shared mount");
    if (::mount(kNetnsDir, kNetnsDir, "none", MS_BIND | MS_REC, nullptr) != 0)
      return errno_error("bind-mounting /run/netns onto itself");
    if (::mount("", kNetnsDir, "none", MS_SHARED | MS_REC, nullptr) != 0)
      return errno_error("making /run/netns a shared mount");
  }
  done = true;
  return {};
}

Result<ino_t> inode_of(int fd, const std::string& what) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return errno_error(what);
  return st.st_ino;
}

}  // namespace

std::string netns_dir() {
  std::string d = rootless::netns_dir();  // an ordinary user's, or inside the user's world
  return d.empty() ? kNetnsDir : d;
}

NetnsGuard::NetnsGuard(int target_fd) {
  original_.reset(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!original_) {
    err_ = errno;
    return;
  }
  if (::setns(target_fd, CLONE_NEWNET) != 0) {
    err_ = errno;
    return;
  }
  ok_ = true;
}

NetnsGuard::~NetnsGuard() {
  if (ok_ && ::setns(original_.get(), CLONE_NEWNET) != 0)
    log::error("restoring the thread's network namespace: {}", std::strerror(errno));
}

Status run_in_netns(int target_fd, const std::function<Status()>& fn, const std::string& what) {
  Status result;
  std::thread t([&] {
    NetnsGuard guard(target_fd);
    if (!guard.ok()) {
      result = os_error(guard.error(), "entering the namespace for " + what);
      return;
    }
    result = fn();
  });
  t.join();
  return result;
}

Status run_in_new_netns(const std::function<Status()>& fn, const std::string& what) {
  Status st;
  // unshare() moves only the calling thread: do it on a worker thread that
  // then returns to the original namespace
  std::thread worker([&] {
    Fd original(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
    if (!original) {
      st = errno_error("opening the current namespace");
      return;
    }
    if (::unshare(CLONE_NEWNET) != 0) {
      st = errno_error("creating " + what);
      return;
    }
    st = fn();
    if (::setns(original.get(), CLONE_NEWNET) != 0)
      log::error("returning from {}: {}", what, std::strerror(errno));
  });
  worker.join();
  return st;
}

Status write_sysctl(const Sysctl& s) {
  std::string path = "/proc/sys/" + s.key;
  std::replace(path.begin() + 10, path.end(), '.', '/');
  Fd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return errno_error("opening " + path);
  if (::write(fd.get(), s.value.data(), s.value.size()) < 0)
    return errno_error("writing " + s.value + " to " + path);
  return {};
}

ino_t current_netns_inode() {
  struct stat st {};
  if (::stat("/proc/thread-self/ns/net", &st) != 0) return 0;
  return st.st_ino;
}

Result<Netns> Netns::create(const std::string& name, const std::vector<Sysctl>& sysctls) {
  if (auto st = prepare_netns_dir(); !st) return st.error();
  std::string path = netns_dir() + "/" + name;
  {
    Fd mp(::open(path.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0));
    if (!mp) return errno_error("creating the mount point " + path);
  }
  Fd ns_fd;
  Status st = run_in_new_netns(
      [&]() -> Status {
        if (::mount("/proc/thread-self/ns/net", path.c_str(), "none", MS_BIND, nullptr) != 0)
          return errno_error("bind-mounting network namespace " + name);
        ns_fd.reset(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
        if (!ns_fd) return errno_error("opening network namespace " + name);
        for (const auto& s : sysctls)
          if (auto r = write_sysctl(s); !r)
            return os_error(r.error().code().value(), std::string(r.error().what()) + " in " + name);
        return {};
      },
      "network namespace " + name);
  if (!st) {
    ::umount2(path.c_str(), MNT_DETACH);
    ::unlink(path.c_str());
    return st.error();
  }
  auto ino = inode_of(ns_fd.get(), "reading namespace " + name);
  if (!ino) return ino.error();
  log::debug("created network namespace {}", name);
  return Netns(name, std::move(ns_fd), ino.value());
}

Result<Netns> Netns::open(const std::string& name) {
  std::string path = netns_dir() + "/" + name;
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return errno_error("opening network namespace " + name);
  auto ino = inode_of(fd.get(), "reading namespace " + name);
  if (!ino) return ino.error();
  return Netns(name, std::move(fd), ino.value());
}

Status remove_netns(const std::string& name) {
  std::string path = netns_dir() + "/" + name;
  if (::umount2(path.c_str(), MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT)
    return errno_error("unmounting network namespace " + name);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    return errno_error("removing " + path);
  log::debug("removed network namespace {}", name);
  return {};
}

std::vector<std::string> list_netns(const std::string& prefix) {
  std::vector<std::string> out;
  DIR* d = ::opendir(netns_dir().c_str());
  if (!d) return out;
  while (auto* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n.rfind(prefix, 0) == 0 && n != "." && n != "..") out.push_back(n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<pid_t> pids_in_netns(ino_t inode) {
  std::vector<pid_t> out;
  for (pid_t pid : list_pids()) {
    struct stat st {};
    std::string p = "/proc/" + std::to_string(pid) + "/ns/net";
    if (::stat(p.c_str(), &st) == 0 && st.st_ino == inode) out.push_back(pid);
  }
  return out;
}

}  // namespace lanes::testbed
