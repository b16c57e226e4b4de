// lanes-vip-injector: the VIP injector. Runs in a job container, dials the
// rack switch from the job's NIC addresses and announces the task IP with
// one next hop per NIC — one session per NIC, or one session carrying one
// ADD-PATH path per NIC. A NIC that loses carrier has its next hop withdrawn
// at once (a netlink event, not a timer); it is announced again when the
// NIC returns. SIGTERM withdraws everything, then closes with a Cease.
//
// usage: lanes-vip-injector --config FILE --state FILE [--log-level L]

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "lanes/core/daemon_main.hpp"
#include "lanes/core/log.hpp"
#include "lanes/core/netlink.hpp"
#include "lanes/vip/dial.hpp"
#include "lanes/vip/session.hpp"

using namespace lanes::vip;
namespace lg = lanes::log;
namespace tb = lanes::testbed;

namespace {

struct Nic {
  int index = 0;
  std::string eth;
  std::string nh4, nh6;  // the job's addresses for this NIC: the next hops
  bool up = true;
};

// Each connect attempt gives up after this (the kernel alone would wait
// for its SYN retries, about two minutes).
constexpr std::chrono::milliseconds kConnectTimeout{1000};

struct Peer {
  std::string local, remote;
  std::string eth;        // per NIC: the NIC the session belongs to
  std::vector<int> nics;  // NICs this session announces
  Session session;
  int fd = -1;            // the session's socket once connected
  bool connecting = false;
  Dial dial;              // while connecting: the attempt, which owns its socket
  Clock::time_point next_attempt{};
  // 100 ms doubling to 1 s, each wait up to 25% longer at random
  DialBackoff backoff;
  uint64_t attempts = 0, timeouts = 0;
  std::map<int, bool> announced;  // NIC → announced on this session
  Peer(SessionConfig c, uint64_t seed)
      : session(c), backoff(std::chrono::milliseconds(100), std::chrono::milliseconds(1000), 0.25, seed) {}
};

int64_t mono_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  tb::DaemonStart ds;
  if (auto rc = tb::daemon_start(argc, argv, "lanes-vip-injector",
                                 "Announces the job's task IP to the rack switch, one next hop per NIC.", ds))
    return *rc;
  const nlohmann::json& cfg = ds.config;
  const std::string& state_path = ds.state_path;
  const auto& g_stop = tb::stop_requested();

  std::string host = cfg.value("host", "?");
  std::string task4 = cfg.value("task4", ""), task6 = cfg.value("task6", "");
  bool add_path = cfg.value("mode", "per-nic") == "add-path";
  auto nl = tb::Netlink::open_here(host + " container");
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
  for (const auto& t : {task4, task6})
    if (!t.empty() && !has(t)) {
      lg::error("refusing to announce {}: it is not configured on this container", t);
      return 2;
    }

  std::vector<Nic> nics;
  auto links = nl.value().links();
  for (const auto& n : cfg["nics"]) {
    Nic x;
    x.index = n.value("index", 0);
    x.eth = n.value("eth", "");
    x.nh4 = n.value("nh4", "");
    x.nh6 = n.value("nh6", "");
    if (links)
      for (const auto& l : links.value())
        if (l.name == x.eth) x.up = l.admin_up && l.carrier;
    nics.push_back(x);
  }
  uint32_t local_as = cfg.value("local_as", 0u), peer_as = cfg.value("peer_as", 0u);
  uint16_t hold = cfg.value("hold_time", uint16_t{9});
  std::vector<std::unique_ptr<Peer>> peers;
  for (const auto& s : cfg["sessions"]) {
    SessionConfig sc;
    sc.local_as = local_as;
    sc.peer_as = peer_as;
    sc.hold_time = hold;
    sc.add_path_send = add_path;
    inet_pton(AF_INET, s.value("local", "").c_str(), &sc.bgp_id);
    auto p = std::make_unique<Peer>(sc, std::random_device{}());
    p->local = s.value("local", "");
    p->remote = s.value("peer", "");
    p->nics = s.value("nics", std::vector<int>{});
    if (!add_path && p->nics.size() == 1)
      for (const auto& x : nics)
        if (x.index == p->nics[0]) p->eth = x.eth;
    peers.push_back(std::move(p));
  }

  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  tb::Fd self_ns(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  auto mon = tb::LinkMonitor::open_in(self_ns.get(), host);
  if (!mon) {
    lg::error("{}", mon.error().what());
    return 1;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = mon.value().fd();
  ::epoll_ctl(ep, EPOLL_CTL_ADD, mon.value().fd(), &ev);

  auto route_update = [&](const Nic& n, bool withdraw) {
    std::vector<Update> out;
    uint32_t pid = add_path ? static_cast<uint32_t>(n.index + 1) : 0;
    if (!task4.empty()) {
      Update u;
      auto p = Prefix::parse(task4 + "/32", pid);
      if (withdraw) {
        u.withdrawn = {*p};
      } else {
        u.nlri = {*p};
        u.as_path = {local_as};
        std::array<uint8_t, 4> nh{};
        inet_pton(AF_INET, n.nh4.c_str(), nh.data());
        u.next_hop = nh;
      }
      out.push_back(u);
    }
    if (!task6.empty()) {
      Update u;
      auto p = Prefix::parse(task6 + "/128", pid);
      if (withdraw) {
        u.mp_unreach = {*p};
      } else {
        u.mp_reach = {*p};
        u.as_path = {local_as};
        inet_pton(AF_INET6, n.nh6.c_str(), u.mp_next_hop.data());
      }
      out.push_back(u);
    }
    return out;
  };

  std::function<void(Peer&, std::vector<Action>)> run;
  auto close_peer = [&](Peer& p, const std::string& why) {
    if (p.fd >= 0) {
      ::epoll_ctl(ep, EPOLL_CTL_DEL, p.fd, nullptr);
      ::close(p.fd);
      p.fd = -1;
    }
    p.connecting = false;
    p.dial = Dial();
    p.announced.clear();
    p.next_attempt = Clock::now() + p.backoff.next();
    lg::info("{}: session {} -> {} closed: {}", host, p.local, p.remote, why);
  };
  auto announce = [&](Peer& p, const Nic& n, bool withdraw) {
    if (p.session.state() != State::established) return;
    if (withdraw == !p.announced[n.index]) return;  // nothing to change
    for (const auto& u : route_update(n, withdraw)) run(p, p.session.send(u));
    p.announced[n.index] = !withdraw;
    lg::info("{}: {} next hop of NIC {} on {} at {} us", host, withdraw ? "withdrew" : "announced", n.index, p.local,
             mono_us());
  };
  run = [&](Peer& p, std::vector<Action> acts) {
    for (auto& a : acts) {
      switch (a.kind) {
        case Action::Kind::send:
          if (p.fd >= 0 && ::send(p.fd, a.bytes.data(), a.bytes.size(), MSG_NOSIGNAL) < 0)
            lg::warn("{}: sending to {}: {}", host, p.remote, std::strerror(errno));
          break;
        case Action::Kind::close:
          close_peer(p, a.reason);
          break;
        case Action::Kind::up:
          p.backoff.reset();
          lg::info("{}: session {} -> {} established (hold {} s)", host, p.local, p.remote, p.session.hold_time());
          for (int i : p.nics)
            for (const auto& n : nics)
              if (n.index == i && n.up) announce(p, n, false);
          break;
        case Action::Kind::down:
          break;
      }
    }
  };

  tb::StateFile state_file(state_path);
  // what the state file says, in a few numbers: rebuilt only when they move
  // (a thousand idle injectors otherwise spend a core rendering JSON)
  std::vector<uint64_t> said, now_says;
  auto publish = [&] {
    now_says.clear();
    for (auto& p : peers) {
      uint64_t ann = 0;
      for (auto [nic, on] : p->announced) ann |= static_cast<uint64_t>(on) << (nic & 63);
      now_says.insert(now_says.end(), {static_cast<uint64_t>(p->session.state()), p->session.updates_sent(),
                                       p->attempts, p->timeouts, ann, p->session.last_error().size(),
                                       static_cast<uint64_t>(p->session.hold_time())});
    }
    for (const auto& x : nics) now_says.push_back(x.up);
    if (now_says == said) return;
    said = now_says;
    nlohmann::json s = nlohmann::json::array();
    for (auto& p : peers) {
      nlohmann::json ann = nlohmann::json::array();
      for (auto [nic, on] : p->announced)
        if (on) ann.push_back(nic);
      s.push_back({{"local", p->local}, {"peer", p->remote}, {"nics", p->nics}, {"state", to_string(p->session.state())},
                   {"hold_time", p->session.hold_time()}, {"announced_nics", ann},
                   {"updates_sent", p->session.updates_sent()}, {"last_error", p->session.last_error()},
                   {"connect_attempts", p->attempts}, {"connect_timeouts", p->timeouts}});
    }
    nlohmann::json n = nlohmann::json::array();
    for (const auto& x : nics) n.push_back({{"index", x.index}, {"eth", x.eth}, {"up", x.up}});
    state_file.publish({{"ready", true}, {"host", host}, {"mode", add_path ? "add-path" : "per-nic"},
                             {"task4", task4}, {"task6", task6}, {"sessions", s}, {"nics", n}});
  };
  publish();
  lg::info("{}: injector for {} {} over {} sessions ({})", host, task4, task6, peers.size(),
           add_path ? "ADD-PATH" : "per NIC");
  auto last_publish = Clock::now();

  while (!g_stop) {
    auto now = Clock::now();
    // connect what is idle and due; give up attempts past their deadline
    for (auto& p : peers) {
      if (p->connecting && p->dial.poll(now) == Dial::State::failed) {
        // closing its socket took it out of the epoll set
        std::string why = p->dial.error();
        if (why.find("timed out") != std::string::npos) ++p->timeouts;
        run(*p, p->session.transport_lost(why));
        if (p->connecting) close_peer(*p, why);  // unless the session's close did
        continue;
      }
      if (p->connecting || p->fd >= 0 || now < p->next_attempt) continue;
      ++p->attempts;
      p->dial = Dial::start(p->local, p->remote, 179, kConnectTimeout, now);
      if (p->dial.state() == Dial::State::failed) {
        run(*p, p->session.transport_lost(p->dial.error()));
        p->next_attempt = now + p->backoff.next();
        continue;
      }
      p->connecting = true;
      epoll_event e{};
      e.events = EPOLLIN | EPOLLOUT;
      e.data.fd = p->dial.fd();
      ::epoll_ctl(ep, EPOLL_CTL_ADD, p->dial.fd(), &e);
    }
    // wait for the next event or timer
    auto deadline = now + std::chrono::milliseconds(500);  // the next publish
    for (auto& p : peers) {
      deadline = std::min(deadline, p->session.next_deadline());
      if (p->connecting) deadline = std::min(deadline, p->dial.deadline());
      else if (p->fd < 0) deadline = std::min(deadline, p->next_attempt);
    }
    int timeout = static_cast<int>(std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count()));
    epoll_event evs[16];
    int n = ::epoll_wait(ep, evs, 16, timeout);
    now = Clock::now();
    for (int i = 0; i < n; ++i) {
      int fd = evs[i].data.fd;
      if (fd == mon.value().fd()) {
        auto events = mon.value().read_events();
        if (!events) continue;
        for (const auto& e : events.value())
          for (auto& x : nics) {
            if (e.name != x.eth || e.deleted) continue;
            bool up = e.admin_up && e.carrier;
            if (up == x.up) continue;
            x.up = up;
            lg::info("{}: {} {} at {} us", host, x.eth, up ? "has carrier" : "lost carrier", mono_us());
            for (auto& p : peers)
              if (std::find(p->nics.begin(), p->nics.end(), x.index) != p->nics.end()) announce(*p, x, !up);
            // the NIC's own session, not established: an attempt begun
            // while the NIC was down went out through another NIC to the
            // switch's address on the dead port, whose answers had no way
            // back, and hung in OpenSent long after the NIC returned (seen
            // when a whole rack's NICs failed at once); one due later should not wait out
            // its backoff once the NIC is back
            for (auto& p : peers)
              if (p->eth == x.eth && p->session.state() != State::established) {
                if (p->connecting || p->fd >= 0) {
                  run(*p, p->session.transport_lost(up ? "the NIC came back" : "the NIC lost carrier"));
                  if (p->connecting || p->fd >= 0) close_peer(*p, up ? "the NIC came back" : "the NIC lost carrier");
                }
                if (up) {
                  p->backoff.reset();
                  p->next_attempt = Clock::now();
                }
              }
          }
        continue;
      }
      for (auto& p : peers) {
        if ((p->connecting ? p->dial.fd() : p->fd) != fd) continue;
        if (p->connecting && (evs[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
          auto st = p->dial.poll(now);
          if (st == Dial::State::failed) {
            std::string why = p->dial.error();
            run(*p, p->session.transport_lost(why));
            if (p->connecting) close_peer(*p, why);
            break;
          }
          if (st == Dial::State::pending) break;
          p->fd = p->dial.release();  // the session's socket from now on
          p->connecting = false;
          epoll_event e{};
          e.events = EPOLLIN;
          e.data.fd = fd;
          ::epoll_ctl(ep, EPOLL_CTL_MOD, fd, &e);
          run(*p, p->session.connected(now));
          continue;
        }
        if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
          uint8_t buf[8192];
          ssize_t r = ::recv(fd, buf, sizeof buf, 0);
          if (r > 0) {
            run(*p, p->session.received(std::span<const uint8_t>(buf, static_cast<size_t>(r)), now));
          } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
            std::string why = r == 0 ? "peer closed the connection" : std::strerror(errno);
            auto acts = p->session.transport_lost(why);
            run(*p, acts);
            if (p->fd >= 0) close_peer(*p, why);
          }
        }
        break;
      }
    }
    for (auto& p : peers) run(*p, p->session.tick(now));
    if (now - last_publish > std::chrono::milliseconds(500)) {
      publish();
      last_publish = now;
    }
  }
  // graceful stop: withdraw everything, then Cease
  for (auto& p : peers) {
    for (const auto& x : nics)
      if (p->announced[x.index]) announce(*p, x, true);
    run(*p, p->session.stop());
  }
  publish();
  lg::info("{}: stopped; everything withdrawn", host);
  return 0;
}
