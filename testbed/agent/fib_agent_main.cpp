// lanes-fib-agent: runs inside a switch's namespace, follows gobgpd's best
// paths through `gobgp monitor global rib -j` (an event stream) and programs
// resilient nexthop groups. Started and supervised by lanes.
//
// usage: lanes-fib-agent --config FILE --state FILE [--log-level L]

#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <ctime>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <thread>

#include "lanes/testbed/daemon_main.hpp"
#include "lanes/testbed/fib_agent.hpp"
#include "lanes/testbed/log.hpp"
#include "lanes/testbed/netns.hpp"
#include "lanes/testbed/process.hpp"

using namespace lanes::testbed;
namespace lg = lanes::log;
using Clock = std::chrono::steady_clock;

namespace {

struct Gobgp {
  std::string host = "127.0.0.1";
  std::string port = "50051";

  std::vector<std::string> argv(std::initializer_list<std::string> rest) const {
    std::vector<std::string> a = {"gobgp", "-u", host, "-p", port};
    a.insert(a.end(), rest);
    return a;
  }
  Result<Captured> run(std::initializer_list<std::string> rest) const {
    ProcessSpec spec{"gobgp", argv(rest)};
    spec.new_session = false;
    return run_capture(spec, std::chrono::seconds(5));
  }
};

// Neighbors that are Established and have sent at least one path (their
// Adj-RIB-In is not empty) or have been up for two seconds: a session that
// just came back counts once its updates are in, not at the OPEN, and one
// that announces nothing (or withdrew everything) still counts. CONFIGURED,
// if given, gets every neighbor gobgpd is configured with.
std::optional<std::set<std::string>> established(const Gobgp& g, std::set<std::string>* configured = nullptr) {
  auto r = g.run({"neighbor", "-j"});
  if (!r || r.value().status != 0) return std::nullopt;
  std::set<std::string> out;
  try {
    auto j = nlohmann::json::parse(r.value().out);
    if (configured) configured->clear();
    for (const auto& n : j) {
      if (configured) configured->insert(n["conf"].value("neighbor_address", ""));
      if (n["state"].value("session_state", 0) != 6) continue;
      uint64_t received = 0;
      for (const auto& af : n.value("afi_safis", nlohmann::json::array()))
        received += af.value("state", nlohmann::json::object()).value("received", uint64_t{0});
      int64_t up_since = n.value("timers", nlohmann::json::object())
                             .value("state", nlohmann::json::object())
                             .value("uptime", nlohmann::json::object())
                             .value("seconds", int64_t{0});
      bool settled = up_since > 0 && static_cast<int64_t>(std::time(nullptr)) - up_since >= 2;
      if (received > 0 || settled) out.insert(n["conf"].value("neighbor_address", ""));
    }
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  DaemonStart ds;
  if (auto rc = daemon_start(argc, argv, "lanes-fib-agent",
                             "Follows gobgpd's RIB in this namespace and programs resilient nexthop groups.", ds))
    return *rc;
  AgentConfig cfg;
  try {
    cfg = AgentConfig::from_json(ds.config);
  } catch (const std::exception& e) {
    std::cerr << "lanes-fib-agent: " << ds.config_path << ": " << e.what() << "\n";
    return 2;
  }
  const std::string& state_path = ds.state_path;
  const auto& g_stop = stop_requested();
  Gobgp g;
  if (auto colon = cfg.api.rfind(':'); colon != std::string::npos) {
    g.host = cfg.api.substr(0, colon);
    g.port = cfg.api.substr(colon + 1);
  }
  auto nl = Netlink::open_here(cfg.node);
  if (!nl) {
    lg::error("{}", nl.error().what());
    return 1;
  }
  NetlinkFib fib(std::move(nl).value());
  FibAgent agent(cfg, fib);
  if (auto st = agent.start(); !st) {
    lg::error("starting: {}", st.error().what());
    return 1;
  }
  Fd self_ns(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  auto mon = LinkMonitor::open_in(self_ns.get(), cfg.node);
  if (!mon) {
    lg::error("{}", mon.error().what());
    return 1;
  }

  // sessions that were up before: the RIB counts as re-learned once they are back
  std::set<std::string> expected;
  try {
    std::ifstream in(state_path);
    if (in) {
      auto j = nlohmann::json::parse(in);
      for (const auto& n : j.value("established", std::vector<std::string>{})) expected.insert(n);
    }
  } catch (const std::exception&) {
  }
  bool had_routes = !agent.state()["routes"].empty();
  if (had_routes) agent.set_stale(true);  // restarted agent: keep what is there until the RIB is read

  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = mon.value().fd();
  ::epoll_ctl(ep, EPOLL_CTL_ADD, mon.value().fd(), &ev);

  // The RIB comes from one stream: `gobgp monitor global rib -j --current`
  // prints the whole RIB as its first line ("[]" when empty: GoBGP's watch
  // sends the table as one event, every address family whatever -a says),
  // then one line per change, each with the complete path set of the
  // prefixes it names. Nothing is read beside it, so no update can fall
  // between a snapshot and the stream, or be replayed out of order.
  std::optional<StreamingChild> monitor;
  std::string linebuf;
  bool dump_pending = false;
  std::map<std::string, std::vector<std::string>> rib;  // as of the last line read
  std::set<std::string> up_now;
  std::set<std::string> neighbors;  // every neighbor gobgpd is configured with
  Clock::time_point stale_since = Clock::now();
  std::optional<Clock::time_point> reconcile_at;
  Clock::time_point next_try = Clock::now(), next_state = Clock::now(), next_originate = Clock::now();
  std::vector<std::string> to_originate;  // aggregates gobgpd has not taken yet
  uint64_t gobgpd_losses = 0, events = 0;
  bool connected = false;

  StateFile state_file(state_path);
  auto save = [&] {
    auto j = agent.state();
    j["connected"] = connected;
    j["established"] = std::vector<std::string>(up_now.begin(), up_now.end());
    j["gobgpd_losses"] = gobgpd_losses;
    j["rib_events"] = events;
    state_file.publish(j);
  };
  auto lost_gobgpd = [&] {
    if (monitor) ::epoll_ctl(ep, EPOLL_CTL_DEL, monitor->fd(), nullptr);
    monitor.reset();
    connected = false;
    reconcile_at.reset();
    ++gobgpd_losses;
    // whom the returning gobgpd must give back before the reconcile: the
    // sessions last seen up, and every neighbor whose path is in the RIB
    // (one that came up since the last look is in the RIB already)
    if (!up_now.empty()) expected = up_now;
    for (const auto& [prefix, nhs] : rib)
      for (const auto& nh : nhs)
        if (neighbors.count(nh)) expected.insert(nh);
    agent.set_stale(true);
    stale_since = Clock::now();
    lg::warn("lost gobgpd; routes kept as stale until its sessions are back");
  };
  auto on_line = [&](const std::string& line) {
    auto paths = parse_gobgp_paths(nlohmann::json::parse(line));
    if (dump_pending) {  // the whole RIB
      dump_pending = false;
      rib = paths;
      if (agent.stale()) {
        for (const auto& [prefix, nhs] : rib) agent.update(prefix, nhs);  // adds only while stale
        lg::info("connected to gobgpd; waiting for {} sessions before reconciling", expected.size());
      } else {
        agent.reconcile(rib);
        lg::info("connected to gobgpd; {} prefixes in the RIB", rib.size());
      }
      save();
      return;
    }
    for (const auto& [prefix, nhs] : paths) {
      if (nhs.empty()) rib.erase(prefix);
      else rib[prefix] = nhs;
      agent.update(prefix, nhs);
      ++events;
    }
  };

  while (!g_stop) {
    auto now = Clock::now();
    if (!connected && now >= next_try) {
      next_try = now + std::chrono::milliseconds(200);
      // gobgpd answers: originate the aggregates (again: a new gobgpd has
      // none), then follow the RIB
      if (auto ok = g.run({"global"}); ok && ok.value().status == 0) {
        to_originate.assign(cfg.originate.begin(), cfg.originate.end());
        ProcessSpec spec{"gobgp monitor", g.argv({"monitor", "global", "rib", "-j", "--current"})};
        spec.new_session = false;
        if (auto m = StreamingChild::start(spec)) {
          monitor.emplace(std::move(m).value());
          ev.data.fd = monitor->fd();
          ::epoll_ctl(ep, EPOLL_CTL_ADD, monitor->fd(), &ev);
          connected = true;
          dump_pending = true;
          linebuf.clear();
        }
      }
    }
    // what gobgpd did not take yet (a busy gobgpd times the CLI out): tried
    // until it does, or the rack's aggregate never reaches the spines
    if (connected && !to_originate.empty() && now >= next_originate) {
      std::erase_if(to_originate, [&](const std::string& p) {
        auto r = g.run({"global", "rib", "add", "-a", p.find(':') != std::string::npos ? "ipv6" : "ipv4", p});
        bool ok = r && r.value().status == 0;
        if (!ok) lg::warn("originating {} failed; trying again", p);
        return ok;
      });
      next_originate = now + std::chrono::seconds(1);
    }
    // stale: reconcile once the sessions that were up are back (or on
    // timeout), after giving the returning sessions 300 ms to deliver their
    // updates (the loop keeps reading the stream meanwhile)
    if (connected && !dump_pending && agent.stale()) {
      if (!reconcile_at) {
        auto est = established(g);
        bool back = est && std::includes(est->begin(), est->end(), expected.begin(), expected.end());
        if (back || Clock::now() - stale_since > cfg.stale_timeout) {
          if (!back) lg::warn("stale timeout: reconciling without every session back");
          reconcile_at = Clock::now() + std::chrono::milliseconds(300);
        }
      } else if (Clock::now() >= *reconcile_at) {
        reconcile_at.reset();
        agent.reconcile(rib);
        save();
      }
    }
    epoll_event evs[8];
    int n = ::epoll_wait(ep, evs, 8, reconcile_at ? 50 : agent.stale() ? 200 : 500);
    for (int i = 0; i < n; ++i) {
      if (evs[i].data.fd == mon.value().fd()) {
        auto events_read = mon.value().read_events();
        if (events_read)
          for (const auto& e : events_read.value())
            if (!e.deleted) agent.link_changed(e.name, e.carrier && e.admin_up);
      } else if (monitor && evs[i].data.fd == monitor->fd()) {
        bool alive = monitor->read_some(linebuf);
        size_t pos;
        while ((pos = linebuf.find('\n')) != std::string::npos) {
          std::string line = linebuf.substr(0, pos);
          linebuf.erase(0, pos + 1);
          if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
          try {
            on_line(line);
          } catch (const std::exception& e) {
            lg::warn("unparsable monitor line: {}", e.what());
          }
        }
        if (!alive) lost_gobgpd();
      }
    }
    if (Clock::now() >= next_state) {
      // the sessions that are up (asked of gobgpd, a process each time):
      // every second while stale, else every 5 s. A session that came up
      // since the last look is still waited for after a gobgpd restart if
      // its path is in the RIB (lost_gobgpd). Asked every second while the
      // RIB moved, 20 switches' `gobgp neighbor` were a fifth of the CPU
      // while a fleet came up.
      next_state = Clock::now() + std::chrono::seconds(agent.stale() ? 1 : 5);
      if (connected)
        if (auto est = established(g, &neighbors)) up_now = *est;
      save();
    }
  }
  save();
  lg::info("stopping; kernel routes stay in place");
  return 0;
}
