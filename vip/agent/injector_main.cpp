// lanes-vip-injector: the VIP injector. Runs in a job container, dials the
// rack switch from the job's NIC addresses and announces the task IP with
// one next hop per NIC (the Speaker) — one session per NIC, or one session
// carrying one ADD-PATH path per NIC. A NIC that loses carrier has its next
// hop withdrawn at once (a netlink event, not a timer); it is announced
// again when the NIC returns. SIGTERM withdraws everything, then closes
// with a Cease.
//
// usage: lanes-vip-injector --config FILE --state FILE [--log-level L]

#include <fcntl.h>
#include <sys/epoll.h>

#include <random>

#include "lanes/testbed/daemon_main.hpp"
#include "lanes/testbed/event_loop.hpp"
#include "lanes/testbed/log.hpp"
#include "lanes/testbed/netlink.hpp"
#include "lanes/vip/speaker.hpp"

using namespace lanes::vip;
namespace lg = lanes::log;
namespace tb = lanes::testbed;

int main(int argc, char** argv) {
  tb::DaemonStart ds;
  if (auto rc = tb::daemon_start(argc, argv, "lanes-vip-injector",
                                 "Announces the job's task IP to the rack switch, one next hop per NIC.", ds))
    return *rc;
  auto cfg = SpeakerConfig::from_json(ds.config);
  auto nl = tb::Netlink::open_here(cfg.host + " container");
  if (!nl) {
    lg::error("{}", nl.error().what());
    return 1;
  }
  // ownership: only task IPs configured on this container are announced
  auto addrs = nl.value().addresses();
  auto has = [&](const std::string& a) {
    if (!addrs) return false;
    for (const auto& x : addrs.value())
      if (x.addr.substr(0, x.addr.find('/')) == a) return true;
    return false;
  };
  for (const auto& t : {cfg.task4, cfg.task6})
    if (!t.empty() && !has(t)) {
      lg::error("refusing to announce {}: it is not configured on this container", t);
      return 2;
    }
  if (auto links = nl.value().links())
    for (auto& x : cfg.nics)
      for (const auto& l : links.value())
        if (l.name == x.eth) x.up = l.admin_up && l.carrier;

  tb::EventLoop loop;
  if (auto st = loop.stop_on_signals(); !st) {
    lg::error("{}", st.error().what());
    return 1;
  }
  tb::Fd self_ns(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  auto mon = tb::LinkMonitor::open_in(self_ns.get(), cfg.host);
  if (!mon) {
    lg::error("{}", mon.error().what());
    return 1;
  }
  lg::info("{}: injector for {} {} over {} sessions ({})", cfg.host, cfg.task4, cfg.task6, cfg.sessions.size(),
           cfg.add_path ? "ADD-PATH" : "per NIC");
  Speaker speaker(cfg, loop, std::random_device{}());
  (void)loop.watch(mon.value().fd(), EPOLLIN, [&](uint32_t) {
    if (auto events = mon.value().read_events())
      for (const auto& e : events.value())
        if (!e.deleted) speaker.link_changed(e.name, e.admin_up && e.carrier);
  });
  tb::StateFile state_file(ds.state_path);
  auto publish = [&] {
    if (speaker.changed()) state_file.publish(speaker.state());
  };
  state_file.publish(speaker.state());  // ready
  publish();
  // after every wake: the speaker's timers and dials, then the state file
  // if one of its numbers moved (rendered only then)
  loop.run([&]() -> std::optional<Clock::time_point> {
    auto wake = speaker.turn(Clock::now());
    publish();
    return wake;
  });
  // graceful stop: withdraw everything, then Cease
  speaker.stop();
  publish();
  return 0;
}
