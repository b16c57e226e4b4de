#include "lanes/testbed/supervisor.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "lanes/testbed/daemon_main.hpp"
#include "lanes/testbed/deploy.hpp"
#include "lanes/testbed/event_loop.hpp"
#include "lanes/testbed/log.hpp"
#include "lanes/testbed/netns.hpp"
#include "lanes/testbed/process.hpp"

namespace lanes::testbed {
namespace {

using Clock = std::chrono::steady_clock;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Notices when the run's owner is gone and whether that leaves the run dead.
class OwnerWatch {
 public:
  OwnerWatch(const RunRegistry& reg, std::string run_id, const SupervisorOwner& o) : reg_(reg), id_(std::move(run_id)) {
    if (o.pid <= 0) return;  // nobody to watch (a test's own run)
    fd_ = Fd(static_cast<int>(::syscall(SYS_pidfd_open, o.pid, 0)));
    // the fd now pins the process; it is the owner only if the start time agrees
    if (!fd_ || process_start_time(o.pid) != o.start_time) owner_gone_ = true;
  }
  // readable once the owner is gone (-1: nobody is watched)
  int fd() const { return fd_.get(); }
  // true once the owner is gone and the run was not left up on its own
  bool run_dead() {
    if (dead_) return true;
    if (!owner_gone_) {
      if (!fd_) return false;
      pollfd p{fd_.get(), POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0) return false;
      owner_gone_ = true;
    }
    auto st = reg_.load(id_);
    if (st && st.value().phase == "up" && !st.value().held) {
      fd_ = Fd();  // left up on purpose: the run is ours now
      owner_gone_ = false;
      return false;
    }
    dead_ = true;
    log::warn("supervisor: the lanes process that owned run {} is gone; stopping", id_);
    return true;
  }

 private:
  const RunRegistry& reg_;
  std::string id_;
  Fd fd_;
  bool owner_gone_ = false, dead_ = false;
};

struct Managed {
  DaemonRequest req;
  ProcessSpec spec;
  Daemon daemon;
  int restarts = 0;
  int64_t started_ms = 0;
  bool waiting = false;  // exited, its restart is due
};

bool file_says_ready(const std::string& path) {
  auto ends = [&](const std::string& x) { return path.size() > x.size() && path.compare(path.size() - x.size(), x.size(), x) == 0; };
  if (ends(".api") || ends(".sock")) return std::filesystem::exists(path);  // a daemon's socket
  try {
    std::ifstream in(path);
    return in && nlohmann::json::parse(in).value("ready", false);
  } catch (const std::exception&) {
    return false;
  }
}

class Supervisor {
 public:
  Supervisor(const RunRegistry& reg, std::string run_id, const SupervisorOwner& owner)
      : reg_(reg), id_(std::move(run_id)), watch_(reg, id_, owner) {}

  int run() {
    sup_ = {{"ready", false}, {"pid", ::getpid()}};
    // findable from the start: the pid is on record before anything runs
    write_json_atomic(supervisor_state_path(reg_, id_), sup_);
    if (stopping()) return 0;
    if (auto st = prepare(); !st) return fail(st.error());
    // wave by wave: each starts once every daemon before it is ready
    std::vector<int> waves;
    for (const auto& m : managed_) waves.push_back(m.req.wave);
    std::sort(waves.begin(), waves.end());
    waves.erase(std::unique(waves.begin(), waves.end()), waves.end());
    for (int w : waves) {
      if (auto st = start_wave(w); !st) return fail(st.error());
      if (auto st = await_wave(w); !st) return fail(st.error());
    }
    sup_["ready"] = true;
    publish();
    append_event({{"node", ""}, {"daemon", "supervisor"}, {"event", "ready"}});
    keep_alive();
    stop(waves);
    sup_["ready"] = false;
    sup_["stopped"] = true;
    publish();
    return 0;
  }

 private:
  // a run whose directory is gone is over, whoever failed to stop us
  bool stopping() { return loop_.stopped() || watch_.run_dead() || !reg_.exists(id_); }

  Status prepare() {
    // a pidfd per daemon: a fleet has thousands
    if (rlimit rl{}; ::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
      rl.rlim_cur = rl.rlim_max;
      ::setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (auto st = loop_.stop_on_signals(); !st) return st;
    ::signal(SIGHUP, SIG_IGN);
    for (auto& r : read_daemon_requests(reg_, id_)) {
      if (!ns_.count(r.netns)) {
        auto o = Netns::open(r.netns);
        if (!o) return o.error();
        ns_.emplace(r.netns, std::move(o).value());
      }
      Managed m;
      m.spec = {r.name + " on " + r.node, r.argv};
      m.spec.netns_fd = ns_.at(r.netns).fd();
      m.spec.env = r.env;
      m.spec.die_with_parent = true;  // a killed supervisor leaves no daemon behind
      m.spec.log_path = r.log.empty() ? reg_.layout(id_).daemon_log(r.node, r.name) : r.log;
      m.req = std::move(r);
      managed_.push_back(std::move(m));
    }
    return {};
  }

  Status start_wave(int wave) {
    Status result;
    for (auto& m : managed_) {
      if (m.req.wave != wave) continue;
      if (stopping()) {
        result = os_error(ECANCELED, "stopped while starting the daemons");
        break;
      }
      progress(false);
      auto d = Daemon::start(m.spec);
      if (!d) {
        result = d.error();
        break;
      }
      m.daemon = std::move(d).value();
      m.started_ms = now_ms();
      ++started_;
    }
    // one append of events for the whole wave
    std::ofstream events(events_path(reg_, id_), std::ios::app);
    for (const auto& m : managed_)
      if (m.req.wave == wave && m.daemon.pid() > 0)
        events << nlohmann::json{{"time_unix_ms", m.started_ms}, {"node", m.req.node}, {"daemon", m.req.name},
                                 {"event", "started"}, {"pid", m.daemon.pid()}}
                      .dump()
               << "\n";
    publish();
    return result;
  }

  // Every daemon of WAVE that has a ready file says so, and no log of a
  // daemon started so far holds one of its fatal lines.
  Status await_wave(int wave) {
    for (auto& m : managed_) {
      if (m.req.wave != wave) continue;
      // 20 s for each daemon after the one before it was ready: they start
      // together, so this bounds a stuck one without cutting off a large run
      auto deadline = Clock::now() + std::chrono::seconds(20);
      progress(false);
      while (!m.req.ready_file.empty() && !file_says_ready(m.req.ready_file)) {
        if (auto st = none_exited(wave); !st) return st;
        if (stopping()) return os_error(ECANCELED, "stopped before the daemons were ready");
        if (Clock::now() > deadline)
          return os_error(ETIMEDOUT, not_ready(m));
        loop_.run_once(std::chrono::milliseconds(20));  // a stop signal is read meanwhile
      }
      ++ready_;
    }
    if (auto st = none_exited(wave); !st) return st;
    // some daemons log a configuration error (gobgpd: a policy it cannot
    // build) and run on without that part: for lanes that is a failed start
    for (const auto& m : managed_) {
      if (m.req.wave > wave || m.req.fatal_log.empty()) continue;
      std::ifstream in(m.spec.log_path);
      for (std::string line; std::getline(in, line);)
        for (const auto& f : m.req.fatal_log)
          if (line.find(f) != std::string::npos)
            return os_error(EINVAL, fmt::format("{} reported an error; see {}:\n  {}", m.spec.name, m.spec.log_path,
                                                line));
    }
    progress(true);
    return {};
  }

  // Why M was not ready in time, as far as lanes can tell: how far the
  // start got, how busy the machine is, and the daemon's last words.
  std::string not_ready(const Managed& m) const {
    double load = 0;
    std::ifstream("/proc/loadavg") >> load;
    long cpus = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
    std::string cause = load > 2.0 * static_cast<double>(cpus)
                            ? fmt::format("the machine is overloaded (load average {:.1f} on {} CPUs): too many "
                                          "daemons, or BFD sending more than it carries (lanes validate names both)",
                                          load, cpus)
                            : fmt::format("load average {:.1f} on {} CPUs", load, cpus);
    std::string tail = log::tail_of(m.spec.log_path, 3, "    ");
    return fmt::format("{} was not ready within 20 s of the daemon before it ({} of {} daemons ready; {}){}; see {}",
                       m.spec.name, ready_, managed_.size(), cause,
                       tail.empty() ? "" : "; its log's last lines:\n" + tail + "\n ", m.spec.log_path);
  }

  // Fails if a daemon of WAVE or an earlier one has exited (one that is
  // waited for, or one it waits for: a FIB agent for its gobgpd) more than
  // kStartAttempts times. Before that it is started again, as it would be
  // once the run is ready: a daemon that crashes at random (gobgpd's Go
  // runtime was seen to, in a GC stack copy, once in a few thousand
  // starts) does not fail a fleet's bring-up; one that cannot start fails
  // it with its last words.
  Status none_exited(int wave) {
    for (auto& m : managed_) {
      if (m.req.wave > wave || m.daemon.pid() <= 0 || m.daemon.running()) continue;
      int status = m.daemon.exit_status().value_or(-1);
      if (m.restarts + 1 >= kStartAttempts)
        return os_error(EIO, fmt::format("{} exited with status {} before the run was ready ({} starts); see {}:\n{}",
                                         m.spec.name, status, m.restarts + 1, m.spec.log_path,
                                         log::tail_of(m.spec.log_path, 5, "  ")));
      append_event({{"node", m.req.node}, {"daemon", m.req.name}, {"event", "exited"}, {"status", status}});
      log::warn("supervisor: {} exited with status {} before the run was ready; starting it again", m.spec.name,
                status);
      if (auto st = relaunch(m); !st) return st;
    }
    return {};
  }
  static constexpr int kStartAttempts = 3;

  // Keeps them alive: a daemon that exits is recorded and restarted with
  // backoff. The loop sleeps until a daemon or the owner exits (their
  // pidfds) or a restart is due: nothing is polled but the run directory,
  // once a second.
  void keep_alive() {
    for (size_t i = 0; i < managed_.size(); ++i) watch_exit(i);
    if (watch_.fd() >= 0)
      (void)loop_.watch(watch_.fd(), EPOLLIN, [this, fd = watch_.fd()](uint32_t) {
        loop_.unwatch(fd);  // gone: dead, or left up on purpose (then the run is ours)
        if (watch_.run_dead()) loop_.stop();
      });
    loop_.run([this]() -> std::optional<EventLoop::Clock::time_point> {
      if (stopping()) loop_.stop();
      return EventLoop::Clock::now() + std::chrono::seconds(1);
    });
  }

  void watch_exit(size_t i) {
    auto st = loop_.on_exit(managed_[i].daemon.pid(), [this, i] { exited(i); });
    if (!st) log::warn("supervisor: {}: {}", managed_[i].spec.name, st.error().what());
  }

  void exited(size_t i) {
    auto& m = managed_[i];
    int status = m.daemon.exit_status().value_or(-1);
    append_event({{"node", m.req.node}, {"daemon", m.req.name}, {"event", "exited"}, {"status", status}});
    log::warn("supervisor: {} exited with status {}; restarting", m.spec.name, status);
    // quick first restart, slower if it keeps failing
    m.waiting = true;
    loop_.at(Clock::now() + std::chrono::milliseconds(std::min(5000, 100 << std::min(m.restarts, 6))),
             [this, i] { restart(i); });
    publish();
  }

  void restart(size_t i) {
    auto& m = managed_[i];
    if (auto st = relaunch(m); !st) {
      log::error("supervisor: restarting {}: {}", m.spec.name, st.error().what());
      loop_.at(Clock::now() + std::chrono::seconds(2), [this, i] { restart(i); });
      return;
    }
    m.waiting = false;
    watch_exit(i);
  }

  // M started again, counted, and on record (events, supervisor.json)
  Status relaunch(Managed& m) {
    auto d = Daemon::start(m.spec);
    if (!d) return d.error();
    m.daemon = std::move(d).value();
    ++m.restarts;
    append_event({{"node", m.req.node}, {"daemon", m.req.name}, {"event", "restarted"}, {"pid", m.daemon.pid()},
                  {"restarts", m.restarts}});
    log::info("supervisor: restarted {} (pid {})", m.spec.name, m.daemon.pid());
    publish();
    return {};
  }

  // Last wave first (they leave the kernel as it is; injectors withdraw
  // and close), each wave at once.
  void stop(const std::vector<int>& waves) {
    for (auto w = waves.rbegin(); w != waves.rend(); ++w) {
      std::vector<Daemon*> wave;
      for (auto& m : managed_)
        if (!m.waiting && m.req.wave == *w) wave.push_back(&m.daemon);
      stop_all(wave, std::chrono::milliseconds(3000));
    }
  }

  // the message, and the code apart: start_supervisor makes the error
  // again for its caller, with no errno's words appended twice
  int fail(const std::system_error& e) {
    std::string why = message_of(e);
    log::error("supervisor: {}", why);
    sup_["error"] = why;
    sup_["errno"] = e.code().value();
    publish();
    std::vector<Daemon*> all;
    for (auto& m : managed_) all.push_back(&m.daemon);
    stop_all(all, std::chrono::milliseconds(2000));
    return 1;
  }

  void publish() {
    nlohmann::json d = nlohmann::json::array();
    for (auto& m : managed_)
      if (m.daemon.pid() > 0 || m.restarts > 0)
        d.push_back(SupervisedDaemon{m.req.node, m.req.name, m.daemon.pid(), m.restarts, m.spec.log_path, m.req.serves}.to_json());
    sup_["daemons"] = d;
    write_json_atomic(supervisor_state_path(reg_, id_), sup_);
  }

  // progress for whoever waits on us (start_supervisor): it gives up only
  // when nothing moves, so a large topology is not cut off by a fixed bound
  void progress(bool force) {
    if (!force && Clock::now() - last_progress_ < std::chrono::milliseconds(250)) return;
    last_progress_ = Clock::now();
    sup_["progress"] = {{"started", started_}, {"ready", ready_}, {"daemons", managed_.size()}};
    write_json_atomic(supervisor_state_path(reg_, id_), sup_);
  }

  void append_event(nlohmann::json e) {
    e["time_unix_ms"] = now_ms();
    std::ofstream out(events_path(reg_, id_), std::ios::app);
    out << e.dump() << "\n";
  }

  const RunRegistry& reg_;
  std::string id_;
  EventLoop loop_;
  OwnerWatch watch_;
  nlohmann::json sup_;
  std::map<std::string, Netns> ns_;
  std::vector<Managed> managed_;
  size_t started_ = 0, ready_ = 0;
  Clock::time_point last_progress_ = Clock::now();
};

}  // namespace

nlohmann::json SupervisedDaemon::to_json() const {
  nlohmann::json j = {{"node", node}, {"name", name}, {"pid", pid}, {"restarts", restarts}, {"log", log}};
  if (!serves.empty()) j["serves"] = serves;
  return j;
}

SupervisedDaemon SupervisedDaemon::from_json(const nlohmann::json& j) {
  return {j.value("node", ""), j.value("name", ""), j.value("pid", pid_t{0}), j.value("restarts", 0),
          j.value("log", ""), j.value("serves", std::vector<std::string>{})};
}

bool SupervisedDaemon::serves_node(const std::string& n) const {
  return node == n || std::find(serves.begin(), serves.end(), n) != serves.end();
}

std::vector<SupervisedDaemon> supervised_daemons(const RunRegistry& reg, const std::string& run_id) {
  std::vector<SupervisedDaemon> out;
  std::ifstream in(supervisor_state_path(reg, run_id));
  if (!in) return out;
  try {
    for (const auto& d : nlohmann::json::parse(in).value("daemons", nlohmann::json::array()))
      out.push_back(SupervisedDaemon::from_json(d));
  } catch (const std::exception&) {
    out.clear();
  }
  return out;
}

std::string supervisor_state_path(const RunRegistry& reg, const std::string& run_id) {
  return reg.layout(run_id).supervisor();
}
std::string events_path(const RunRegistry& reg, const std::string& run_id) { return reg.layout(run_id).events(); }

std::vector<nlohmann::json> read_events(const RunRegistry& reg, const std::string& run_id) {
  std::vector<nlohmann::json> out;
  std::ifstream in(events_path(reg, run_id));
  std::string line;
  while (std::getline(in, line)) {
    try {
      out.push_back(nlohmann::json::parse(line));
    } catch (const std::exception&) {
    }
  }
  return out;
}

int run_supervisor(const RunRegistry& reg, const std::string& run_id, const SupervisorOwner& owner) {
  return Supervisor(reg, run_id, owner).run();
}

namespace {

// the run's start failed: what() is the whole message
class StartCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "lanes start"; }
  std::string message(int) const override { return "the run did not start"; }
};

}  // namespace

std::system_error start_error(int code, const std::string& what) {
  static const StartCategory category;
  return std::system_error(std::error_code(code, category), what);
}

namespace {

// "812 of 1152 daemons ready, 1152 started" from the supervisor's progress
std::string progress_words(const std::string& progress) {
  auto p = nlohmann::json::parse(progress, nullptr, false);
  if (!p.is_object()) return "none started yet";
  return fmt::format("{} of {} daemons ready, {} started", p.value("ready", 0), p.value("daemons", 0),
                     p.value("started", 0));
}

}  // namespace

Result<DaemonRecord> start_supervisor(const RunRegistry& reg, const std::string& run_id,
                                      std::chrono::seconds timeout, const std::string& lanes_bin,
                                      std::optional<std::chrono::steady_clock::time_point> give_up) {
  // the run's log directory is testbed's: a run of hosts alone has one too
  std::error_code ec;
  std::filesystem::create_directories(reg.layout(run_id).logs(), ec);
  std::string log_path = reg.layout(run_id).logs() + "/supervisor.log";
  ProcessSpec spec{"lanes supervisor",
                   {lanes_bin.empty() ? self_dir() + "/lanes" : lanes_bin, "supervise", run_id, "--state-dir",
                    reg.base(), "--owner", fmt::format("{}:{}", ::getpid(), process_start_time(::getpid()))}};
  spec.log_path = log_path;
  auto d = Daemon::start(spec);
  if (!d) return d.error();
  Daemon daemon = std::move(d).value();
  DaemonRecord rec{"supervisor", "", daemon.pid(), process_start_time(daemon.pid()), log_path};
  // TIMEOUT bounds a supervisor that makes no progress, not the whole start:
  // each daemon it starts or sees ready moves the deadline
  auto deadline = Clock::now() + timeout;
  std::string last_progress;
  for (;;) {
    std::ifstream in(supervisor_state_path(reg, run_id));
    if (in) {
      try {
        auto j = nlohmann::json::parse(in);
        if (j.value("ready", false)) break;
        if (j.contains("error")) {
          daemon.wait();
          return start_error(j.value("errno", EIO), j["error"].get<std::string>());
        }
        if (auto p = j.value("progress", nlohmann::json()).dump(); p != last_progress) {
          last_progress = p;
          deadline = Clock::now() + timeout;
        }
      } catch (const std::exception&) {
      }
    }
    if (!daemon.running())
      return os_error(EIO, fmt::format("the supervisor exited with status {}; see {}:\n{}",
                                       daemon.exit_status().value_or(-1), log_path, log::tail_of(log_path, 5, "  ")));
    if (Clock::now() > deadline) {
      (void)daemon.stop();
      return start_error(ETIMEDOUT, fmt::format("the run's daemons made no progress for {} s ({}); see {}",
                                                timeout.count(), progress_words(last_progress), log_path));
    }
    if (give_up && Clock::now() > *give_up) {
      (void)daemon.stop();
      return start_error(ETIMEDOUT, fmt::format("the wait ran out while the daemons were starting ({}); see {}",
                                                progress_words(last_progress), log_path));
    }
    // until the next look at its progress, or at once when the supervisor exits
    (void)daemon.wait_until(Clock::now() + std::chrono::milliseconds(20));
  }
  daemon.detach();
  return rec;
}

}  // namespace lanes::testbed
