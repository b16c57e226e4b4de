// lanes-fib-agent: runs inside a switch's namespace, follows gobgpd's best
// paths through its gRPC API (WatchEvent: the table, then every change, and
// the sessions' states) and programs resilient nexthop groups. Started and
// supervised by lanes.
//
// usage: lanes-fib-agent --config FILE --state FILE [--log-level L]

#include <sys/epoll.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <set>

#include "lanes/core/daemon_main.hpp"
#include "lanes/core/log.hpp"
#include "lanes/switch/fib_agent.hpp"
#include "lanes/switch/gobgp_client.hpp"
#include "lanes/switch/rib_follower.hpp"

using namespace lanes::testbed;
namespace lg = lanes::log;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  DaemonStart ds;
  if (auto rc = daemon_start(argc, argv, "lanes-fib-agent",
                             "Follows gobgpd's RIB in this namespace and programs resilient nexthop groups.", ds))
    return *rc;
  AgentConfig cfg;
  uint16_t port = kGobgpApiPort;
  try {
    cfg = AgentConfig::from_json(ds.config);
    if (auto colon = cfg.api.rfind(':'); colon != std::string::npos)
      port = static_cast<uint16_t>(std::stoul(cfg.api.substr(colon + 1)));
  } catch (const std::exception& e) {
    std::cerr << "lanes-fib-agent: " << ds.config_path << ": " << e.what() << "\n";
    return 2;
  }
  const auto& g_stop = stop_requested();
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
    std::ifstream in(ds.state_path);
    if (in)
      for (const auto& n : nlohmann::json::parse(in).value("established", std::vector<std::string>{}))
        expected.insert(n);
  } catch (const std::exception&) {
  }
  RibFollower::Timing timing;
  timing.stale_timeout = cfg.stale_timeout;
  RibFollower follower(agent, timing, std::move(expected), !agent.state()["routes"].empty(), Clock::now());

  Fd ep(::epoll_create1(EPOLL_CLOEXEC));
  auto watch_fd = [&](int fd) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    ::epoll_ctl(ep.get(), EPOLL_CTL_ADD, fd, &ev);
  };
  watch_fd(mon.value().fd());

  std::optional<GobgpClient> client;
  std::unique_ptr<GobgpWatch> watch;
  std::vector<std::string> to_originate;  // aggregates gobgpd has not taken yet
  Clock::time_point next_try = Clock::now(), next_originate = Clock::now();
  StateFile state_file(ds.state_path);
  auto save = [&] {
    auto j = agent.state();
    j["connected"] = follower.connected();
    j["ready"] = follower.connected();  // for the supervisor: the hosts' daemons start once gobgpd answers here
    auto back = follower.settled(Clock::now());
    j["established"] = std::vector<std::string>(back.begin(), back.end());
    j["gobgpd_losses"] = follower.losses();
    j["rib_events"] = follower.events();
    state_file.publish(j);
  };
  auto lost = [&] {
    if (watch) ::epoll_ctl(ep.get(), EPOLL_CTL_DEL, watch->fd(), nullptr);
    watch.reset();
    client.reset();
    follower.lost(Clock::now());
  };
  save();

  while (!g_stop) {
    auto now = Clock::now();
    if (!follower.connected() && now >= next_try) {
      next_try = now + std::chrono::milliseconds(200);
      // gobgpd answers: originate the aggregates (again: a new gobgpd has
      // none), then follow the RIB
      auto c = GobgpClient::connect(-1, port, std::chrono::milliseconds(1000));
      if (c && c.value().ping()) {
        if (auto w = c.value().watch()) {
          client.emplace(std::move(c).value());
          watch = std::move(w).value();
          watch_fd(watch->fd());
          to_originate.assign(cfg.originate.begin(), cfg.originate.end());
          next_originate = now;
          follower.connected(now);
        }
      }
    }
    // what gobgpd did not take yet: tried until it does, or the rack's
    // aggregate never reaches the spines
    if (client && !to_originate.empty() && now >= next_originate) {
      std::erase_if(to_originate, [&](const std::string& p) {
        auto st = client->originate(p);
        if (!st) lg::warn("originating {} failed ({}); trying again", p, st.error().what());
        return st.ok();
      });
      next_originate = now + std::chrono::seconds(1);
    }
    auto due = follower.tick(Clock::now());
    // wake for a due decision, a retry, or at least once a second
    auto wake = Clock::now() + std::chrono::seconds(1);
    if (due) wake = std::min(wake, *due);
    if (!follower.connected()) wake = std::min(wake, next_try);
    if (!to_originate.empty()) wake = std::min(wake, next_originate);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(wake - Clock::now()).count();
    epoll_event evs[8];
    int n = ::epoll_wait(ep.get(), evs, 8, static_cast<int>(std::max<int64_t>(ms, 0)));
    for (int i = 0; i < n; ++i) {
      if (evs[i].data.fd == mon.value().fd()) {
        if (auto events = mon.value().read_events())
          for (const auto& e : events.value())
            if (!e.deleted) agent.link_changed(e.name, e.carrier && e.admin_up);
      } else if (watch && evs[i].data.fd == watch->fd()) {
        bool closed = false;
        for (auto& e : watch->take()) {
          switch (e.kind) {
            case GobgpWatch::Event::Kind::table:
              follower.table(e.paths, e.snapshot, Clock::now());
              break;
            case GobgpWatch::Event::Kind::peer:
              follower.peer(e.neighbor, e.state, Clock::now());
              break;
            case GobgpWatch::Event::Kind::closed:
              closed = true;
              break;
          }
        }
        if (closed) lost();
      }
    }
    save();
  }
  save();
  lg::info("stopping; kernel routes stay in place");
  return 0;
}
