#include "lanes/testbed/process.hpp"

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

// Boost.Process offers vfork only where the feature macros name an old
// POSIX; glibc has vfork whatever they say
#define BOOST_POSIX_HAS_VFORK 1
#include <boost/process.hpp>
#include <boost/process/extend.hpp>
#include <fcntl.h>
#include <poll.h>

#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <filesystem>
#include <thread>

#include "lanes/testbed/log.hpp"
#include "lanes/testbed/run_registry.hpp"

namespace bp = boost::process;

namespace lanes::testbed {
namespace {

// Runs in the child between vfork and exec: the child borrows the parent's
// memory until it execs, so only syscalls here, no allocation, and a failure
// is reported through FAILED (the parent's memory) before _exit.
//
// vfork, not fork: copying the parent's page tables is most of what a
// start costs on a virtual machine with shadow paging (measured here: a
// 60 MB process forks and execs /bin/true in 13 ms, vforks in 2 ms), and a
// fleet starts thousands of daemons and fetchers.
struct ChildSetup : bp::extend::handler {
  int netns_fd = -1;
  bool new_session = true;
  pid_t die_with = 0;  // the parent whose death ends the child
  bool hold_sigusr1 = false;
  int* failed = nullptr;  // the errno of a failed setns, in the parent's memory
  template <typename Exec>
  void on_exec_setup(Exec&) const {
    // the parent's signal handlers would run on the parent's memory: none
    // until exec, which resets them anyway
    sigset_t all;
    sigfillset(&all);
    ::sigprocmask(SIG_SETMASK, &all, nullptr);
    for (int sig = 1; sig < NSIG; ++sig) {
      struct sigaction sa {};
      if (::sigaction(sig, nullptr, &sa) == 0 && sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN) {
        sa.sa_handler = SIG_DFL;
        sa.sa_flags = 0;
        ::sigaction(sig, &sa, nullptr);
      }
    }
    if (new_session) ::setsid();
    if (die_with) {
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != die_with) ::_exit(127);  // the parent died before the flag was set
    }
    if (netns_fd >= 0 && ::setns(netns_fd, CLONE_NEWNET) != 0) {
      if (failed) *failed = errno;
      ::_exit(127);  // never run in the namespace it was started from
    }
    // the mask survives exec: a child starts with none of what its parent
    // blocked for its own loop, and SIGUSR1 held if asked
    sigset_t s;
    sigemptyset(&s);
    if (hold_sigusr1) sigaddset(&s, SIGUSR1);
    ::sigprocmask(SIG_SETMASK, &s, nullptr);
  }
};

// What starting SPEC needs: the program found in PATH, its arguments, the
// environment with SPEC's additions, and the child's set-up.
struct Launch {
  boost::filesystem::path exe;
  std::vector<std::string> args;
  bp::environment env;
  ChildSetup setup;
  std::unique_ptr<int> failed = std::make_unique<int>(0);  // where the child says setns failed
};

Result<Launch> prepare(const ProcessSpec& spec) {
  if (spec.argv.empty()) return os_error(EINVAL, "starting " + spec.name + ": no command");
  Launch l;
  l.exe = spec.argv[0];
  if (spec.argv[0].find('/') == std::string::npos) {
    l.exe = bp::search_path(spec.argv[0]);
    if (l.exe.empty()) return os_error(ENOENT, "starting " + spec.name + ": " + spec.argv[0] + " is not in PATH");
  }
  l.args.assign(spec.argv.begin() + 1, spec.argv.end());
  bp::environment env = boost::this_process::environment();
  for (const auto& [k, v] : spec.env) env[k] = v;
  l.env = std::move(env);
  l.setup.netns_fd = spec.netns_fd;
  l.setup.new_session = spec.new_session;
  l.setup.hold_sigusr1 = spec.hold_sigusr1;
  l.setup.failed = l.failed.get();
  if (spec.die_with_parent) l.setup.die_with = ::getpid();
  return l;
}

// The child ended before exec because it could not enter its namespace:
// reaped, and said.
Status entered(const Launch& l, bp::child& c, const std::string& name) {
  if (*l.failed == 0) return {};
  std::error_code ec;
  c.wait(ec);
  return os_error(*l.failed, "starting " + name + ": entering its network namespace");
}

}  // namespace

struct Daemon::Impl {
  std::string name;
  bp::child child;
  std::optional<int> status;
  bool detached = false;
  bool leader = false;  // it leads a session (new_session): a stop signals its whole process group
  int pidfd = -1;  // opened by wait_until
  ~Impl() {
    if (pidfd >= 0) ::close(pidfd);
  }
};

Daemon::Daemon() = default;
Daemon::Daemon(Daemon&&) noexcept = default;
Daemon& Daemon::operator=(Daemon&&) noexcept = default;

Daemon::~Daemon() {
  if (!impl_ || impl_->detached) return;
  if (running()) {
    auto r = stop();
    if (!r) log::warn("stopping {}: {}", impl_->name, r.error().what());
  }
}

Result<Daemon> Daemon::start(const ProcessSpec& spec) {
  auto launch = prepare(spec);
  if (!launch) return launch.error();
  auto& [exe, args, child_env, setup, failed] = launch.value();

  auto impl = std::make_unique<Impl>();
  impl->name = spec.name;
  impl->leader = spec.new_session;
  std::error_code ec;
  FILE* log = nullptr;
  if (!spec.log_path.empty()) {
    log = std::fopen(spec.log_path.c_str(), "ae");
    if (!log) return errno_error("starting " + spec.name + ": opening log " + spec.log_path);
  }
  try {
    if (log)
      impl->child = bp::child(exe, bp::args = args, bp::std_in < bp::null, bp::std_out > log,
                              bp::std_err > log, child_env, setup, bp::posix::use_vfork, ec);
    else
      impl->child = bp::child(exe, bp::args = args, child_env, setup, bp::posix::use_vfork, ec);
  } catch (const std::exception& e) {
    if (log) std::fclose(log);
    return os_error(EIO, "starting " + spec.name + ": " + e.what());
  }
  if (log) std::fclose(log);
  if (ec) return std::system_error(ec, "starting " + spec.name);
  if (auto st = entered(launch.value(), impl->child, spec.name); !st) return st.error();
  log::debug("started {} (pid {}): {}", spec.name, impl->child.id(), spec.argv[0]);
  Daemon d;
  d.impl_ = std::move(impl);
  return d;
}

pid_t Daemon::pid() const { return impl_ ? impl_->child.id() : 0; }
const std::string& Daemon::name() const {
  static const std::string empty;
  return impl_ ? impl_->name : empty;
}

bool Daemon::running() {
  if (!impl_ || impl_->status) return false;
  std::error_code ec;
  bool r = impl_->child.running(ec);
  if (!r) {
    int native = impl_->child.native_exit_code();
    impl_->status = WIFSIGNALED(native) ? 128 + WTERMSIG(native) : WEXITSTATUS(native);
  }
  return r;
}

std::optional<int> Daemon::exit_status() {
  running();
  return impl_ ? impl_->status : std::nullopt;
}

int Daemon::wait() {
  if (!impl_) return -1;
  if (!impl_->status) {
    std::error_code ec;
    impl_->child.wait(ec);
    running();
  }
  return impl_->status.value_or(-1);
}

bool Daemon::wait_until(std::chrono::steady_clock::time_point deadline) {
  if (!running()) return true;
  if (impl_->pidfd < 0) impl_->pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid(), 0));
  while (running()) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    if (impl_->pidfd < 0) {  // a kernel without pidfds (before 5.3)
      std::this_thread::sleep_for(std::min(left, std::chrono::milliseconds(5)));
      continue;
    }
    // readable once the process has exited
    pollfd p{impl_->pidfd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(1, left.count()))) < 0 && errno != EINTR) return !running();
  }
  return true;
}

Result<int> Daemon::stop(std::chrono::milliseconds grace) {
  if (!impl_) return os_error(ESRCH, "stopping a daemon that was never started");
  if (!running()) return *impl_->status;
  pid_t p = pid();
  pid_t target = impl_->leader ? -p : p;  // signalled while it runs: its group cannot be another's
  ::kill(target, SIGTERM);
  if (!wait_until(std::chrono::steady_clock::now() + grace)) {
    log::warn("{} (pid {}) ignored SIGTERM for {} ms; sending SIGKILL", impl_->name, p, grace.count());
    ::kill(target, SIGKILL);
    std::error_code ec;
    impl_->child.wait(ec);
    running();
  }
  log::debug("stopped {} (pid {}), status {}", impl_->name, p, impl_->status.value_or(-1));
  return impl_->status.value_or(-1);
}

void stop_all(const std::vector<Daemon*>& daemons, std::chrono::milliseconds grace) {
  std::vector<Daemon*> left;
  for (Daemon* d : daemons)
    if (d->running()) {
      d->signal(SIGTERM);
      left.push_back(d);
    }
  // one grace period for them all: each waited for on its pidfd in turn
  auto deadline = std::chrono::steady_clock::now() + grace;
  std::erase_if(left, [&](Daemon* d) { return d->wait_until(deadline); });
  for (Daemon* d : left) {
    log::warn("{} (pid {}) ignored SIGTERM for {} ms; sending SIGKILL", d->name(), d->pid(), grace.count());
    d->signal(SIGKILL);
  }
  for (Daemon* d : left) d->wait();
}

void Daemon::signal(int sig) {
  if (!impl_ || !running()) return;
  ::kill(impl_->leader ? -pid() : pid(), sig);
}

void Daemon::detach() {
  if (!impl_) return;
  impl_->detached = true;
  impl_->child.detach();
}

namespace {
Result<bp::child> spawn_with_pipe(const ProcessSpec& spec, bp::pipe& out) {
  auto launch = prepare(spec);
  if (!launch) return launch.error();
  auto& [exe, args, env, setup, failed] = launch.value();
  std::error_code ec;
  FILE* log = nullptr;
  if (!spec.log_path.empty()) log = std::fopen(spec.log_path.c_str(), "ae");
  bp::child c;
  try {
    if (log)
      c = bp::child(exe, bp::args = args, bp::std_in < bp::null, bp::std_out > out, bp::std_err > log, env, setup,
                    bp::posix::use_vfork, ec);
    else
      c = bp::child(exe, bp::args = args, bp::std_in < bp::null, bp::std_out > out, bp::std_err > bp::null, env,
                    setup, bp::posix::use_vfork, ec);
  } catch (const std::exception& e) {
    if (log) std::fclose(log);
    return os_error(EIO, "starting " + spec.name + ": " + e.what());
  }
  if (log) std::fclose(log);
  if (ec) return std::system_error(ec, "starting " + spec.name);
  if (auto st = entered(launch.value(), c, spec.name); !st) return st.error();
  ::close(out.native_sink());  // our copy of the write end: EOF comes when the child's closes
  out.assign_sink(-1);
  return c;
}

int status_of(bp::child& c) {
  int native = c.native_exit_code();
  return WIFSIGNALED(native) ? 128 + WTERMSIG(native) : WEXITSTATUS(native);
}
}  // namespace

Result<Captured> run_capture(const ProcessSpec& spec, std::chrono::milliseconds timeout) {
  bp::pipe out;
  auto c = spawn_with_pipe(spec, out);
  if (!c) return c.error();
  Captured cap;
  int fd = out.native_source();
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timed_out = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char buf[8192];
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    cap.out.append(buf, static_cast<size_t>(n));
  }
  std::error_code ec;
  if (timed_out) {
    c.value().terminate(ec);
    cap.status = 124;
    return cap;
  }
  c.value().wait(ec);
  cap.status = status_of(c.value());
  return cap;
}

bool kill_process_group(pid_t pid) {
  if (pid <= 0 || process_start_time(pid) == 0) return false;
  pid_t target = ::getpgid(pid) == pid ? -pid : pid;
  return ::kill(target, SIGKILL) == 0;
}

std::vector<pid_t> list_pids() {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  while (auto* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end == '\0' && pid > 0) out.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(d);
  return out;
}

bool stop_pid(pid_t pid, uint64_t start_time, std::chrono::milliseconds grace) {
  if (pid <= 1 || start_time == 0) return false;  // no start time: nothing proves which process it is
  auto same = [&] { return process_start_time(pid) == start_time; };
  // a pidfd taken while it is the same process: readable once that one exits,
  // whoever's child it is (and never another process that took its pid)
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (!same()) {
    if (pidfd >= 0) ::close(pidfd);
    return false;
  }
  // until it is gone or DEADLINE: on the pidfd, or every 5 ms without one (before 5.3)
  auto gone_by = [&](std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      ::waitpid(pid, nullptr, WNOHANG);  // reaps it if it is our child
      if (!same()) return true;
      auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      if (pidfd < 0) {
        std::this_thread::sleep_for(std::min(left, std::chrono::milliseconds(5)));
        continue;
      }
      // readable: it exited (a zombie another parent has yet to reap is gone too)
      pollfd p{pidfd, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) > 0) {
        ::waitpid(pid, nullptr, WNOHANG);
        return true;
      }
    }
  };
  ::kill(pid, SIGTERM);
  if (!gone_by(std::chrono::steady_clock::now() + grace)) {
    ::kill(pid, SIGKILL);
    (void)gone_by(std::chrono::steady_clock::now() + std::chrono::seconds(1));
  }
  if (pidfd >= 0) ::close(pidfd);
  return true;
}

std::string self_dir() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : p.parent_path().string();
}

}  // namespace lanes::testbed
