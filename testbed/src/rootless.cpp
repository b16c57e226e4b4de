#include "lanes/testbed/rootless.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lanes/testbed/handle.hpp"
#include "lanes/testbed/process.hpp"
#include "lanes/testbed/run_registry.hpp"

namespace lanes::testbed::rootless {
namespace {

std::string base_now() {
  if (auto w = world_base()) return *w;
  if (::geteuid() != 0) return user_base();
  return {};
}

std::string under_base(const char* leaf) {
  std::string b = base_now();
  return b.empty() ? std::string() : b + "/" + leaf;
}

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

bool write_text(const std::string& path, const std::string& text) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  return fd && ::write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size());
}

// A zombie is in no namespace that matters: its parent (outside the world,
// often) has yet to reap it.
bool zombie(pid_t pid) {
  std::string stat = read_first_line("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && (stat[close + 2] == 'Z' || stat[close + 2] == 'X');
}

ino_t userns_inode(pid_t pid) {
  struct stat st {};
  std::string p = "/proc/" + std::to_string(pid) + "/ns/user";
  return ::stat(p.c_str(), &st) == 0 ? st.st_ino : 0;
}

struct Keeper {
  pid_t pid = 0;
  uint64_t start_time = 0;
};

std::string world_file(const std::string& base) { return base + "/lanes-world.json"; }

std::optional<Keeper> read_keeper(const std::string& base) {
  std::ifstream in(world_file(base));
  if (!in) return std::nullopt;
  try {
    auto j = nlohmann::json::parse(in);
    Keeper k{j.at("pid").get<pid_t>(), j.at("start_time").get<uint64_t>()};
    if (k.pid > 0 && k.start_time != 0 && process_start_time(k.pid) == k.start_time) return k;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

// Joins the namespaces of KEEPER; the fds are opened, then the keeper's
// start time is checked again, so they are the keeper's.
Status join(const Keeper& k, const std::string& base) {
  std::string proc = "/proc/" + std::to_string(k.pid) + "/ns/";
  Fd user(::open((proc + "user").c_str(), O_RDONLY | O_CLOEXEC));
  Fd mnt(::open((proc + "mnt").c_str(), O_RDONLY | O_CLOEXEC));
  Fd net(::open((proc + "net").c_str(), O_RDONLY | O_CLOEXEC));
  if (!user || !mnt || !net) return errno_error("opening the namespaces of lanes' world keeper (pid " + std::to_string(k.pid) + ")");
  if (process_start_time(k.pid) != k.start_time) return os_error(ESRCH, "lanes' world keeper left while lanes joined it");
  std::error_code ec;
  auto cwd = std::filesystem::current_path(ec);
  if (::setns(user.get(), CLONE_NEWUSER) != 0) {
    int e = errno;
    return os_error(e, e == EINVAL ? "joining lanes' world: the process has more than one thread (a lanes bug)"
                                   : "joining the user namespace of lanes' world");
  }
  if (::setns(mnt.get(), CLONE_NEWNS) != 0) return errno_error("joining the mount namespace of lanes' world");
  if (::setns(net.get(), CLONE_NEWNET) != 0) return errno_error("joining the network namespace of lanes' world");
  if (!ec) std::filesystem::current_path(cwd, ec);  // entering a mount namespace moved the process to its root
  ::setenv(kEnv, base.c_str(), 1);
  return {};
}

}  // namespace

std::optional<std::string> world_base() {
  const char* e = std::getenv(kEnv);
  if (e && *e) return std::string(e);
  return std::nullopt;
}

std::string user_base() {
  if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x && *x && std::filesystem::is_directory(x)) return x;
  if (const char* h = std::getenv("HOME"); h && *h && std::filesystem::is_directory(h))
    return std::string(h) + "/.local/state";
  return {};
}

std::string state_dir() { return under_base("lanes"); }
std::string owners_dir() { return under_base("lanes-owners"); }
std::string netns_dir() { return under_base("lanes-netns"); }

std::string userns_refusal(int err) {
  std::string why = fmt::format("this user may not make a user namespace here ({})", std::strerror(err));
  if (read_first_line("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1")
    return why + ": AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1, "
                 "Ubuntu 23.10 and later). Either allow them (sudo sysctl -w "
                 "kernel.apparmor_restrict_unprivileged_userns=0), or give lanes an AppArmor profile that grants "
                 "'userns,', or run lanes as root";
  if (read_first_line("/proc/sys/kernel/unprivileged_userns_clone") == "0")
    return why + ": the kernel forbids them (kernel.unprivileged_userns_clone=0); allow them with sudo sysctl -w "
                 "kernel.unprivileged_userns_clone=1, or run lanes as root";
  if (read_first_line("/proc/sys/user/max_user_namespaces") == "0")
    return why + ": user.max_user_namespaces is 0; raise it (sudo sysctl -w user.max_user_namespaces=1024), or run "
                 "lanes as root";
  return why + " (a container or seccomp profile may forbid unshare(CLONE_NEWUSER)); run lanes as root, or where "
               "unprivileged user namespaces are allowed";
}

Status enter_world(const std::string& self) {
  std::string base = user_base();
  if (base.empty())
    return os_error(ENOENT, "lanes keeps an ordinary user's runs under $XDG_RUNTIME_DIR or ~/.local/state, and "
                            "neither exists (set XDG_RUNTIME_DIR to a directory of this user's)");
  std::error_code ec;
  for (const char* leaf : {"lanes", "lanes-owners", "lanes-netns"}) {
    std::filesystem::create_directories(base + "/" + leaf, ec);
    if (ec) return std::system_error(ec, "creating " + base + "/" + leaf);
  }
  // one lock orders every joiner and the keeper's leaving: a keeper never
  // leaves while a command is joining it, and two commands never make two worlds
  auto lock = RunRegistry::lock_file(base + "/lanes-world.lock", true);
  if (!lock) return lock.error();
  if (auto k = read_keeper(base)) return join(*k, base);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return errno_error("making a pipe for lanes' world keeper");
  Fd rd(fds[0]), wr(fds[1]);
  pid_t pid = ::fork();
  if (pid < 0) return errno_error("starting lanes' world keeper");
  if (pid == 0) {
    // the ready fd is 3, without close-on-exec
    if (wr.get() == 3 ? ::fcntl(3, F_SETFD, 0) != 0 : ::dup2(wr.get(), 3) != 3) ::_exit(127);
    std::string exe = self;
    const char* argv[] = {exe.c_str(), "keep-world", "--ready-fd", "3", nullptr};
    ::execv(exe.c_str(), const_cast<char* const*>(argv));
    ::_exit(127);
  }
  wr.reset();
  std::string answer;
  char buf[512];
  for (ssize_t n; (n = ::read(rd.get(), buf, sizeof buf)) > 0;) answer.append(buf, static_cast<size_t>(n));
  if (answer.rfind("ok\n", 0) != 0) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    while (!answer.empty() && answer.back() == '\n') answer.pop_back();
    return os_error(EPERM, answer.empty() ? "lanes' world keeper failed to start" : answer);
  }
  // the keeper has detached (a child of its own session) and written its record
  auto k = read_keeper(base);
  if (!k) return os_error(ESRCH, "lanes' world keeper left at once");
  return join(*k, base);
}

int keep_world(int ready_fd) {
  auto say = [&](const std::string& s) {
    std::string t = s + "\n";
    (void)!::write(ready_fd, t.data(), t.size());
  };
  std::string base = user_base();
  if (base.empty()) {
    say("no directory for lanes' world ($XDG_RUNTIME_DIR or ~/.local/state)");
    return 1;
  }
  uid_t uid = ::geteuid();
  gid_t gid = ::getegid();
  if (::unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET) != 0) {
    say(userns_refusal(errno));
    return 1;
  }
  // the user is root in the world and nobody else is anybody: one uid, one gid
  if (!write_text("/proc/self/setgroups", "deny") || !write_text("/proc/self/uid_map", fmt::format("0 {} 1", uid)) ||
      !write_text("/proc/self/gid_map", fmt::format("0 {} 1", gid))) {
    say(userns_refusal(errno));
    return 1;
  }
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    say(userns_refusal(errno));
    return 1;
  }
  ::setsid();
  uint64_t start = process_start_time(::getpid());
  nlohmann::json rec = {{"pid", ::getpid()}, {"start_time", start}, {"uid", uid}};
  std::string tmp = world_file(base) + ".new";
  {
    std::ofstream out(tmp);
    out << rec.dump() << "\n";
    if (!out) {
      say("writing " + tmp + ": " + std::strerror(errno));
      return 1;
    }
  }
  if (::rename(tmp.c_str(), world_file(base).c_str()) != 0) {
    say("writing " + world_file(base) + ": " + std::strerror(errno));
    return 1;
  }
  // hold nothing of the command that started it: not its terminal, not
  // the pipes a test harness waits on
  int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::dup2(null, 2);
  }
  for (int fd = 3; fd < 1024; ++fd)
    if (fd != ready_fd) ::close(fd);
  (void)!::chdir("/");  // holds no directory of the command's; "/" is always there
  ::signal(SIGHUP, SIG_IGN);
  ::signal(SIGINT, SIG_IGN);
  say("ok");
  ::close(ready_fd);
  ino_t self_ns = userns_inode(::getpid());
  // alone in the world for two looks in a row (half a second): leave
  int alone = 0;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    auto lock = RunRegistry::lock_file(base + "/lanes-world.lock", false);
    if (!lock) {  // a command is joining
      alone = 0;
      continue;
    }
    bool others = false;
    for (pid_t p : list_pids())
      if (p != ::getpid() && userns_inode(p) == self_ns && !zombie(p)) {
        others = true;
        break;
      }
    alone = others ? 0 : alone + 1;
    if (alone >= 2) {
      if (auto k = read_keeper(base); k && k->pid == ::getpid()) ::unlink(world_file(base).c_str());
      return 0;
    }
  }
}

}  // namespace lanes::testbed::rootless
