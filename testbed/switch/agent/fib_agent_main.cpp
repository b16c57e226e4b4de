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
#include "lanes/core/event_loop.hpp"
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

  EventLoop loop;
  if (auto st = loop.stop_on_signals(); !st) {  // before gRPC starts its threads
    lg::error("{}", st.error().what());
    return 1;
  }
  (void)loop.watch(mon.value().fd(), EPOLLIN, [&](uint32_t) {
    if (auto events = mon.value().read_events())
      for (const auto& e : events.value())
        if (!e.deleted) agent.link_changed(e.name, e.carrier && e.admin_up);
  });

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
  auto on_stream = [&](uint32_t) {
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
    if (!closed) return;
    loop.unwatch(watch->fd());
    watch.reset();
    client.reset();
    follower.lost(Clock::now());
  };
  // gobgpd answers: originate the aggregates (again: a new gobgpd has
  // none), then follow the RIB
  auto try_connect = [&](Clock::time_point now) {
    next_try = now + std::chrono::milliseconds(200);
    auto c = GobgpClient::connect(-1, port, std::chrono::milliseconds(1000));
    if (!c || !c.value().ping()) return;
    auto w = c.value().watch();
    if (!w) return;
    client.emplace(std::move(c).value());
    watch = std::move(w).value();
    (void)loop.watch(watch->fd(), EPOLLIN, on_stream);
    to_originate.assign(cfg.originate.begin(), cfg.originate.end());
    next_originate = now;
    follower.connected(now);
  };
  // what gobgpd did not take yet: tried until it does, or the rack's
  // aggregate never reaches the spines
  auto originate = [&](Clock::time_point now) {
    std::erase_if(to_originate, [&](const std::string& p) {
      auto st = client->originate(p);
      if (!st) lg::warn("originating {} failed ({}); trying again", p, st.error().what());
      return st.ok();
    });
    next_originate = now + std::chrono::seconds(1);
  };
  // after every wake: connect or originate if due, the follower's
  // decisions, the state file; then sleep until the next of them is due
  loop.run([&]() -> std::optional<Clock::time_point> {
    auto now = Clock::now();
    if (!follower.connected() && now >= next_try) try_connect(now);
    if (client && !to_originate.empty() && now >= next_originate) originate(now);
    auto wake = follower.tick(Clock::now());
    save();
    // the settle time of a session, read by the state file, ends within a second
    auto next = Clock::now() + std::chrono::seconds(1);
    if (wake) next = std::min(next, *wake);
    if (!follower.connected()) next = std::min(next, next_try);
    if (client && !to_originate.empty()) next = std::min(next, next_originate);
    return next;
  });
  save();
  lg::info("stopping; kernel routes stay in place");
  return 0;
}
