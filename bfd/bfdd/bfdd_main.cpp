// lanes-bfdd: runs in a node's namespace (a rack switch or a host) and
// keeps one single-hop BFD session (RFC 5880/5881) per configured link.
// Its clients hear which paths are usable on its verdict socket; its state
// file shows every session. A link that loses carrier starts its session
// afresh. On SIGTERM every session says AdminDown, so the peers keep the
// paths in use. Started and supervised by lanes.
//
// usage: lanes-bfdd --config FILE --state FILE [--log-level L]

#include <fcntl.h>
#include <sys/epoll.h>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>

#include "lanes/bfd/bfdd.hpp"
#include "lanes/bfd/notify.hpp"
#include "lanes/testbed/daemon_main.hpp"
#include "lanes/testbed/event_loop.hpp"
#include "lanes/testbed/log.hpp"
#include "lanes/testbed/netlink.hpp"

using namespace lanes::testbed;
using namespace lanes::bfd;
namespace lg = lanes::log;

namespace {

Verdicts verdicts(const std::vector<std::unique_ptr<LinkSession>>& links) {
  Verdicts v;
  for (const auto& l : links) v[l->config().ifname] = l->usable();
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  DaemonStart ds;
  if (auto rc = daemon_start(argc, argv, "lanes-bfdd",
                             "Runs in a node's namespace: one BFD session per link, its verdicts on a socket.", ds))
    return *rc;
  BfddConfig cfg;
  try {
    cfg = BfddConfig::from_json(ds.config);
  } catch (const std::exception& e) {
    lg::error("{}: {}", ds.config_path, e.what());
    return 2;
  }
  EventLoop loop;
  if (auto st = loop.stop_on_signals(); !st) {
    lg::error("{}", st.error().what());
    return 1;
  }
  auto now = EventLoop::Clock::now();
  std::vector<std::unique_ptr<LinkSession>> links;
  for (const auto& lc : cfg.links) {
    auto l = LinkSession::open(lc, now);
    if (!l) {
      lg::error("{}: {}", cfg.node, l.error().what());
      return 1;
    }
    links.push_back(std::move(l).value());
  }
  auto notifier = Notifier::open(cfg.socket);
  if (!notifier) {
    lg::error("{}: {}", cfg.node, notifier.error().what());
    return 1;
  }
  Fd self_ns(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  auto mon = LinkMonitor::open_in(self_ns.get(), cfg.node);
  if (!mon) {
    lg::error("{}", mon.error().what());
    return 1;
  }
  Verdicts told = verdicts(links);
  StateFile state_file(ds.state_path);
  auto status = [&] {
    nlohmann::json s = nlohmann::json::array();
    for (const auto& l : links) s.push_back(l->status());
    return nlohmann::json{{"ready", true}, {"node", cfg.node}, {"clients", notifier.value().clients()}, {"sessions", s}};
  };
  EventLoop::Clock::time_point next_status{};
  // a state change is logged, and reaches the clients if a verdict changed
  auto changed = [&](const LinkSession& l) {
    const auto& s = l.session();
    lg::info("{}: BFD {} ({} to {}): {}{}", cfg.node, l.config().ifname, l.config().local, l.config().remote,
             to_string(s.state()), s.diag() == Diag::none ? "" : fmt::format(", diag {}", to_string(s.diag())));
    next_status = {};
    Verdicts v = verdicts(links);
    if (v == told) return;
    for (const auto& [ifname, usable] : v)
      if (told[ifname] != usable) lg::info("{}: {} {}", cfg.node, ifname, usable ? "usable again" : "out of use: its path failed");
    told = v;
    notifier.value().publish(v);
  };
  (void)loop.watch(notifier.value().fd(), EPOLLIN, [&](uint32_t) {
    notifier.value().accept(told);
    next_status = {};
  });
  // a link's session starts afresh when it loses carrier (once per loss:
  // the monitor reports every change of the link, and a read afresh after
  // an overrun repeats the state)
  std::map<std::string, bool> carrier;
  for (const auto& l : links) carrier[l->config().ifname] = true;
  (void)loop.watch(mon.value().fd(), EPOLLIN, [&](uint32_t) {
    auto events = mon.value().read_events();
    if (!events) return;
    for (const auto& e : events.value()) {
      auto c = carrier.find(e.name);
      if (c == carrier.end()) continue;
      bool has = !e.deleted && e.carrier && e.admin_up;
      if (c->second && !has)
        for (auto& l : links)
          if (l->config().ifname == e.name) {
            l->reset(EventLoop::Clock::now());
            changed(*l);
          }
      c->second = has;
    }
  });
  lg::info("{}: bfdd ready ({} sessions)", cfg.node, links.size());
  // One pass per deadline, not a wake-up per packet: the sockets are read
  // only in a pass (each packet keeps its arrival time, so a session's
  // detection time runs from when the packet came, however late it is
  // read; and every socket is read before any detection time is judged),
  // and every session whose packet may go (75% of its interval or more
  // since its last) sends in the same pass. A daemon of N sessions at
  // 100 ms wakes about 10-13 times a second, not 20 times N; what the
  // peer sends is read within one interval (a quarter of one while the
  // session is not Up).
  // which sessions' sockets hold packets: one epoll_wait for them all in
  // a pass, not a read per session (level-triggered: what a pass leaves
  // is there for the next)
  Fd pending(::epoll_create1(EPOLL_CLOEXEC));
  for (size_t i = 0; i < links.size(); ++i) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = i;
    if (!pending || ::epoll_ctl(pending.get(), EPOLL_CTL_ADD, links[i]->fd(), &ev) != 0) {
      lg::error("{}: watching the BFD sockets: {}", cfg.node, std::strerror(errno));
      return 1;
    }
  }
  std::vector<epoll_event> ready(std::max<size_t>(links.size(), 1));
  loop.run([&] {
    auto t = EventLoop::Clock::now();
    int n = ::epoll_wait(pending.get(), ready.data(), static_cast<int>(ready.size()), 0);
    for (int i = 0; i < n; ++i) {
      auto& l = links[ready[static_cast<size_t>(i)].data.u64];
      if (l->readable(t)) changed(*l);
    }
    for (auto& l : links)
      if (l->tick(t, true)) changed(*l);
    // the counters change with every packet: the state file at most every
    // 5 s, and at once after a state change (a file written each second by
    // each of a fleet's daemons was a fifth of a host daemon's CPU)
    if (t >= next_status) {
      state_file.publish(status());
      next_status = t + std::chrono::seconds(5);
    }
    auto next = next_status;
    for (const auto& l : links) {
      next = std::min(next, l->next_deadline());
      // a session on its way up is read four times an interval: its
      // handshake waits for the peer's packets
      if (l->session().state() != State::up) next = std::min(next, t + l->session().tx_interval() / 4);
    }
    return std::optional(next);
  });
  auto t = EventLoop::Clock::now();
  for (auto& l : links) l->admin_down(t);
  lg::info("{}: bfdd stopping; its sessions said AdminDown", cfg.node);
  return 0;
}
