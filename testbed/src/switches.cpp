#include "lanes/testbed/switches.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "lanes/testbed/daemon_main.hpp"
#include "lanes/testbed/deploy.hpp"
#include "lanes/testbed/log.hpp"
#include "lanes/testbed/netns.hpp"
#include "lanes/testbed/process.hpp"
#include "lanes/testbed/switch_config.hpp"
#include "lanes/testbed/topology_loader.hpp"

namespace lanes::testbed {
namespace {

using Clock = std::chrono::steady_clock;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void append_event(const RunRegistry& reg, const std::string& run_id, nlohmann::json e) {
  e["time_unix_ms"] = now_ms();
  std::ofstream out(events_path(reg, run_id), std::ios::app);
  out << e.dump() << "\n";
}


std::string tail_of(const std::string& path, size_t lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  std::string l;
  while (std::getline(in, l)) all.push_back(l);
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) out += "  " + all[i] + "\n";
  return out;
}

std::atomic<bool> g_stop{false};
extern "C" void on_stop(int) { g_stop = true; }

struct Managed {
  std::string node;
  std::string name;  // gobgpd | fib-agent
  ProcessSpec spec;
  Daemon daemon;
  Fd exit_fd;  // the daemon's pidfd: readable once it has exited
  int restarts = 0;
  Clock::time_point restart_at{};
  bool waiting = false;
};

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

bool gobgp_answers(int ns_fd) {
  ProcessSpec spec{"gobgp", {"gobgp", "-u", "127.0.0.1", "-p", std::to_string(kGobgpApiPort), "global"}};
  spec.netns_fd = ns_fd;
  spec.new_session = false;
  auto r = run_capture(spec, std::chrono::seconds(2));
  return r && r.value().status == 0;
}

}  // namespace

std::string self_dir() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : p.parent_path().string();
}

SwitchFiles switch_files(const RunRegistry& reg, const std::string& run_id, const std::string& node) {
  SwitchFiles f;
  f.dir = reg.dir(run_id) + "/switches/" + node;
  f.gobgp_config = f.dir + "/gobgpd.toml";
  f.agent_config = f.dir + "/fib-agent.json";
  f.agent_state = f.dir + "/fib-agent-state.json";
  f.gobgpd_log = reg.dir(run_id) + "/logs/" + node + "-gobgpd.log";
  f.agent_log = reg.dir(run_id) + "/logs/" + node + "-fib-agent.log";
  return f;
}

std::string supervisor_state_path(const RunRegistry& reg, const std::string& run_id) {
  return reg.dir(run_id) + "/supervisor.json";
}
std::string events_path(const RunRegistry& reg, const std::string& run_id) {
  return reg.dir(run_id) + "/events.jsonl";
}

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

bool has_switches(const Topology& t) { return t.count(NodeKind::rack_switch) + t.count(NodeKind::spine) > 0; }

Status write_switch_configs(const Topology& t, const RunRegistry& reg, const std::string& run_id) {
  std::error_code ec;
  std::filesystem::create_directories(reg.dir(run_id) + "/logs", ec);
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    const Node& n = t.nodes[i];
    if (n.kind != NodeKind::rack_switch && n.kind != NodeKind::spine) continue;
    auto f = switch_files(reg, run_id, n.name);
    std::filesystem::create_directories(f.dir, ec);
    if (ec) return std::system_error(ec, "creating " + f.dir);
    {
      std::ofstream o(f.gobgp_config, std::ios::trunc);
      o << render_gobgp_config(t, static_cast<int>(i));
      if (!o) return errno_error("writing " + f.gobgp_config);
    }
    {
      std::ofstream o(f.agent_config, std::ios::trunc);
      o << render_agent_config(t, static_cast<int>(i)).dump(2) << "\n";
      if (!o) return errno_error("writing " + f.agent_config);
    }
    ProcessSpec check{"gobgpd --dry-run", {"gobgpd", "--dry-run", "-f", f.gobgp_config, "-t", "toml"}};
    check.log_path = f.gobgpd_log;
    check.new_session = false;
    auto r = run_capture(check, std::chrono::seconds(10));
    if (!r) return r.error();
    if (r.value().status != 0)
      return os_error(EINVAL, fmt::format("gobgpd rejects the configuration of {} ({}); see {}:\n{}", n.name,
                                          f.gobgp_config, f.gobgpd_log, tail_of(f.gobgpd_log, 3)));
  }
  return {};
}

int run_supervisor(const RunRegistry& reg, const std::string& run_id, const SupervisorOwner& owner) {
  OwnerWatch watch(reg, run_id, owner);
  // a run whose directory is gone is over, whoever failed to stop us
  auto stopping = [&] { return g_stop || watch.run_dead() || !reg.exists(run_id); };
  nlohmann::json sup = {{"ready", false}, {"pid", ::getpid()}};
  // findable from the start: the pid is on record before anything runs
  write_json_atomic(supervisor_state_path(reg, run_id), sup);
  if (stopping()) return 0;
  std::string topo_path = reg.dir(run_id) + "/topology.xml";
  Topology topo;
  try {
    topo = load_topology(topo_path);
  } catch (const std::exception& e) {
    log::error("supervisor: {}", e.what());
    return 1;
  }
  // a pidfd per daemon: a fleet has thousands
  if (rlimit rl{}; ::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  ::signal(SIGHUP, SIG_IGN);

  std::string agent_bin = self_dir() + "/lanes-fib-agent";
  std::map<std::string, Netns> ns;
  std::vector<Managed> managed;
  auto publish = [&] {
    nlohmann::json d = nlohmann::json::array();
    for (auto& m : managed)
      d.push_back({{"node", m.node}, {"name", m.name}, {"pid", m.daemon.pid()}, {"restarts", m.restarts},
                   {"log", m.spec.log_path}});
    sup["daemons"] = d;
    write_json_atomic(supervisor_state_path(reg, run_id), sup);
  };
  auto fail = [&](const std::string& why) {
    log::error("supervisor: {}", why);
    sup["error"] = why;
    publish();
    std::vector<Daemon*> all;
    for (auto& m : managed) all.push_back(&m.daemon);
    stop_all(all, std::chrono::milliseconds(2000));
    return 1;
  };

  for (const auto& n : topo.nodes) {
    if (n.kind != NodeKind::rack_switch && n.kind != NodeKind::spine) continue;
    auto o = Netns::open(RunRegistry::netns_name(run_id, n.name));
    if (!o) return fail(o.error().what());
    ns.emplace(n.name, std::move(o).value());
  }
  // gobgpd everywhere first, then the agents
  for (const auto& [node, netns] : ns) {
    auto f = switch_files(reg, run_id, node);
    Managed m;
    m.node = node;
    m.name = "gobgpd";
    m.spec = {"gobgpd on " + node,
              {"gobgpd", "-f", f.gobgp_config, "-t", "toml", "-p", "-l", "info", "--api-hosts",
               std::string(kGobgpApi), "--pprof-disable"}};
    m.spec.netns_fd = netns.fd();
    // one Go scheduler thread: twenty gobgpds on two cores otherwise spend
    // their time waking each other's threads
    m.spec.env = {{"GOMAXPROCS", "1"}};
    m.spec.die_with_parent = true;  // a killed supervisor leaves no daemon behind
    m.spec.log_path = f.gobgpd_log;
    auto d = Daemon::start(m.spec);
    if (!d) return fail(d.error().what());
    m.daemon = std::move(d).value();
    append_event(reg, run_id, {{"node", node}, {"daemon", "gobgpd"}, {"event", "started"}, {"pid", m.daemon.pid()}});
    managed.push_back(std::move(m));
  }
  publish();
  // wait until every gobgpd answers on its API
  auto deadline = Clock::now() + std::chrono::seconds(20);
  for (auto& m : managed) {
    while (!gobgp_answers(ns.at(m.node).fd())) {
      if (!m.daemon.running())
        return fail(fmt::format("gobgpd on {} exited with status {} before it was ready; see {}:\n{}", m.node,
                                m.daemon.exit_status().value_or(-1), m.spec.log_path, tail_of(m.spec.log_path, 5)));
      if (stopping()) return fail("stopped before the switches were ready");
      if (Clock::now() > deadline)
        return fail(fmt::format("gobgpd on {} did not answer within 20 s; see {}", m.node, m.spec.log_path));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  // gobgpd logs some configuration errors (a policy it cannot build) and
  // runs on without that part: for lanes that is a failed start
  for (auto& m : managed) {
    std::ifstream in(m.spec.log_path);
    std::string line;
    while (std::getline(in, line))
      if (line.find("level=error") != std::string::npos || line.find("level=fatal") != std::string::npos)
        return fail(fmt::format("gobgpd on {} reported a configuration error; see {}:\n  {}", m.node,
                                m.spec.log_path, line));
  }
  for (const auto& [node, netns] : ns) {
    auto f = switch_files(reg, run_id, node);
    Managed m;
    m.node = node;
    m.name = "fib-agent";
    m.spec = {"fib agent on " + node, {agent_bin, "--config", f.agent_config, "--state", f.agent_state}};
    m.spec.netns_fd = netns.fd();
    m.spec.die_with_parent = true;  // a killed supervisor leaves no daemon behind
    m.spec.log_path = f.agent_log;
    auto d = Daemon::start(m.spec);
    if (!d) return fail(d.error().what());
    m.daemon = std::move(d).value();
    append_event(reg, run_id, {{"node", node}, {"daemon", "fib-agent"}, {"event", "started"}, {"pid", m.daemon.pid()}});
    managed.push_back(std::move(m));
  }
  // daemons the deployers asked for (host agents, injectors)
  std::map<std::string, Netns> other_ns;
  std::vector<std::pair<size_t, std::string>> awaiting;  // managed index, ready file
  auto requests = read_daemon_requests(reg, run_id);
  // progress for whoever waits on us (start_supervisor): it gives up only
  // when nothing moves, so a large topology is not cut off by a fixed bound
  auto last_progress = Clock::now();
  auto progress = [&](size_t started, size_t ready, bool force = false) {
    if (!force && Clock::now() - last_progress < std::chrono::milliseconds(250)) return;
    last_progress = Clock::now();
    sup["progress"] = {{"started", started}, {"ready", ready}, {"daemons", requests.size()}};
    write_json_atomic(supervisor_state_path(reg, run_id), sup);
  };
  const size_t first = managed.size();
  for (const auto& r : requests) {
    if (!other_ns.count(r.netns)) {
      auto o = Netns::open(r.netns);
      if (!o) return fail(o.error().what());
      other_ns.emplace(r.netns, std::move(o).value());
    }
    Managed m;
    m.node = r.node;
    m.name = r.name;
    m.spec = {r.name + " on " + r.node, r.argv};
    m.spec.netns_fd = other_ns.at(r.netns).fd();
    m.spec.die_with_parent = true;  // a killed supervisor leaves no daemon behind
    m.spec.log_path = reg.dir(run_id) + "/logs/" + r.node + "-" + r.name + ".log";
    managed.push_back(std::move(m));
    if (!r.ready_file.empty()) awaiting.emplace_back(managed.size() - 1, r.ready_file);
  }
  {
    bool failed = false;
    std::string error;
    std::vector<int64_t> started_ms(managed.size());  // one append of events for them all
    for (size_t i = first; i < managed.size(); ++i) {
      if (stopping()) {
        failed = true;
        break;
      }
      progress(i, 0);
      auto d = Daemon::start(managed[i].spec);
      if (!d) {
        error = d.error().what();
        failed = true;
        break;
      }
      managed[i].daemon = std::move(d).value();
      started_ms[i] = now_ms();
    }
    std::ofstream events(events_path(reg, run_id), std::ios::app);
    for (size_t i = first; i < managed.size(); ++i)
      if (managed[i].daemon.pid() > 0)
        events << nlohmann::json{{"time_unix_ms", started_ms[i]}, {"node", managed[i].node}, {"daemon", managed[i].name},
                                 {"event", "started"}, {"pid", managed[i].daemon.pid()}}
                      .dump()
               << "\n";
    events.close();
    if (failed) return fail(error.empty() ? "stopped while starting the daemons" : error);
  }
  publish();
  size_t n_ready = 0;
  for (auto& [i, file] : awaiting) {
    // 20 s for each daemon after the one before it was ready: they start
    // together, so this bounds a stuck one without cutting off a large run
    auto ready_deadline = Clock::now() + std::chrono::seconds(20);
    progress(awaiting.size(), n_ready++);
    for (;;) {
      bool ready = false;
      try {
        std::ifstream in(file);
        if (in) ready = nlohmann::json::parse(in).value("ready", false);
      } catch (const std::exception&) {
      }
      if (ready) break;
      auto& m = managed[i];
      if (!m.daemon.running())
        return fail(fmt::format("{} exited with status {} before it was ready; see {}:\n{}", m.spec.name,
                                m.daemon.exit_status().value_or(-1), m.spec.log_path, tail_of(m.spec.log_path, 5)));
      if (stopping()) return fail("stopped before the daemons were ready");
      if (Clock::now() > ready_deadline)
        return fail(fmt::format("{} was not ready within 20 s; see {}", m.spec.name, m.spec.log_path));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  sup["ready"] = true;
  publish();
  append_event(reg, run_id, {{"node", ""}, {"daemon", "supervisor"}, {"event", "ready"}});

  // keep them alive: a daemon that exits is recorded and restarted with
  // backoff. The loop sleeps until a daemon or the owner exits (their
  // pidfds) or a restart is due: nothing is polled.
  Fd ep(::epoll_create1(EPOLL_CLOEXEC));
  auto watch_exit = [&](size_t i) {
    managed[i].exit_fd = Fd(static_cast<int>(::syscall(SYS_pidfd_open, managed[i].daemon.pid(), 0)));
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.u64 = i;
    if (managed[i].exit_fd) ::epoll_ctl(ep.get(), EPOLL_CTL_ADD, managed[i].exit_fd.get(), &e);
  };
  for (size_t i = 0; i < managed.size(); ++i) watch_exit(i);
  if (watch.fd() >= 0) {
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.u64 = managed.size();
    ::epoll_ctl(ep.get(), EPOLL_CTL_ADD, watch.fd(), &e);
  }
  while (!stopping()) {
    bool changed = false;
    for (size_t i = 0; i < managed.size(); ++i) {
      auto& m = managed[i];
      if (m.waiting) {
        if (Clock::now() < m.restart_at) continue;
        m.waiting = false;
        auto d = Daemon::start(m.spec);
        if (!d) {
          log::error("supervisor: restarting {}: {}", m.spec.name, d.error().what());
          m.waiting = true;
          m.restart_at = Clock::now() + std::chrono::seconds(2);
          continue;
        }
        m.daemon = std::move(d).value();
        watch_exit(i);
        ++m.restarts;
        append_event(reg, run_id, {{"node", m.node}, {"daemon", m.name}, {"event", "restarted"},
                                   {"pid", m.daemon.pid()}, {"restarts", m.restarts}});
        log::info("supervisor: restarted {} (pid {})", m.spec.name, m.daemon.pid());
        changed = true;
        continue;
      }
      if (!m.daemon.running()) {
        int status = m.daemon.exit_status().value_or(-1);
        append_event(reg, run_id, {{"node", m.node}, {"daemon", m.name}, {"event", "exited"}, {"status", status}});
        log::warn("supervisor: {} exited with status {}; restarting", m.spec.name, status);
        // quick first restart, slower if it keeps failing
        auto backoff = std::chrono::milliseconds(std::min(5000, 100 << std::min(m.restarts, 6)));
        m.waiting = true;
        m.restart_at = Clock::now() + backoff;
        m.exit_fd = Fd();  // out of the epoll set with it
        changed = true;
      }
    }
    if (changed) publish();
    auto wake = Clock::now() + std::chrono::seconds(1);
    for (const auto& m : managed)
      if (m.waiting) wake = std::min(wake, m.restart_at);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(wake - Clock::now()).count();
    epoll_event evs[16];
    (void)::epoll_wait(ep.get(), evs, 16, static_cast<int>(std::max<int64_t>(ms, 0)));
  }
  // orderly stop: agents and injectors first (they leave the kernel as it
  // is; injectors withdraw and close), then gobgpd; each wave at once
  for (bool gobgpd : {false, true}) {
    std::vector<Daemon*> wave;
    for (auto& m : managed)
      if (!m.waiting && (m.name == "gobgpd") == gobgpd) wave.push_back(&m.daemon);
    stop_all(wave, std::chrono::milliseconds(3000));
  }
  sup["ready"] = false;
  sup["stopped"] = true;
  publish();
  return 0;
}

Result<DaemonRecord> start_supervisor(const RunRegistry& reg, const std::string& run_id,
                                      std::chrono::seconds timeout, const std::string& lanes_bin) {
  std::string log_path = reg.dir(run_id) + "/logs/supervisor.log";
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
          return os_error(EIO, j["error"].get<std::string>());
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
                                       daemon.exit_status().value_or(-1), log_path, tail_of(log_path, 5)));
    if (Clock::now() > deadline) {
      (void)daemon.stop();
      return os_error(ETIMEDOUT, fmt::format("the run's daemons made no progress for {} s; see {}", timeout.count(),
                                             log_path));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  daemon.detach();
  return rec;
}

}  // namespace lanes::testbed
