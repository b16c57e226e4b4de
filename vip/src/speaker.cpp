#include "lanes/vip/speaker.hpp"

#include <arpa/inet.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "lanes/testbed/log.hpp"

namespace lanes::vip {
namespace lg = lanes::log;

namespace {

// Each connect attempt gives up after this (the kernel alone would wait
// for its SYN retries, about two minutes).
constexpr std::chrono::milliseconds kConnectTimeout{1000};
// The first attempt after a NIC returns gives up sooner: its SYN may meet
// the path before every hop carries again (seen: 1 return in 4 lost it,
// and waited out the whole second)
constexpr std::chrono::milliseconds kReturnTimeout{250};

int64_t mono_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch()).count();
}

}  // namespace

struct Speaker::Peer {
  std::string local, remote;
  std::string eth;        // the NIC the session rides ("" for none)
  std::vector<int> nics;  // NICs this session announces
  Session session;
  int fd = -1;            // the session's socket once connected
  int watched = -1;       // the fd the loop watches for it (the attempt's, then the session's)
  bool connecting = false;
  Dial dial;              // while connecting: the attempt, which owns its socket
  Clock::time_point next_attempt{};
  // 100 ms doubling to 1 s, each wait up to 25% longer at random
  DialBackoff backoff;
  uint64_t attempts = 0, timeouts = 0;
  bool returning = false;  // the next attempt is the first since its NIC came back
  std::map<int, bool> announced;  // NIC → announced on this session
  Peer(SessionConfig c, uint64_t seed)
      : session(c), backoff(std::chrono::milliseconds(100), std::chrono::milliseconds(1000), 0.25, seed) {}
};

SpeakerConfig SpeakerConfig::from_json(const nlohmann::json& j) {
  SpeakerConfig c;
  c.host = j.value("host", "?");
  c.injector = j.value("injector", "lanes");
  c.task4 = j.value("task4", "");
  c.task6 = j.value("task6", "");
  c.add_path = j.value("mode", "per-nic") == "add-path";
  c.active_backup = j.value("active_backup", false);
  c.local_as = j.value("local_as", 0u);
  c.peer_as = j.value("peer_as", 0u);
  c.hold_time = j.value("hold_time", uint16_t{9});
  for (const auto& n : j.value("nics", nlohmann::json::array()))
    c.nics.push_back({n.value("index", 0), n.value("eth", ""), n.value("nh4", ""), n.value("nh6", ""), true});
  for (const auto& s : j.value("sessions", nlohmann::json::array()))
    c.sessions.push_back(
        {s.value("local", ""), s.value("peer", ""), s.value("nics", std::vector<int>{}), s.value("eth", "")});
  return c;
}

nlohmann::json SpeakerConfig::to_json() const {
  nlohmann::json n = nlohmann::json::array(), s = nlohmann::json::array();
  for (const auto& x : nics) n.push_back({{"index", x.index}, {"eth", x.eth}, {"nh4", x.nh4}, {"nh6", x.nh6}});
  for (const auto& p : sessions)
    s.push_back({{"local", p.local}, {"peer", p.peer}, {"nics", p.nics}, {"eth", p.eth}});
  return {{"host", host},         {"injector", injector},
          {"mode", add_path ? "add-path" : "per-nic"},
          {"task4", task4},       {"task6", task6},
          {"local_as", local_as}, {"peer_as", peer_as},
          {"hold_time", hold_time}, {"nics", n},
          {"sessions", s},        {"active_backup", active_backup}};
}

Speaker::Speaker(SpeakerConfig cfg, testbed::EventLoop& loop, uint64_t seed) : cfg_(std::move(cfg)), loop_(loop) {
  for (const auto& s : cfg_.sessions) {
    SessionConfig sc;
    sc.local_as = cfg_.local_as;
    sc.peer_as = cfg_.peer_as;
    sc.hold_time = cfg_.hold_time;
    sc.add_path_send = cfg_.add_path;
    // the BGP Identifier: the session's IPv4 address, or for a session
    // over IPv6 a nonzero number made from its address (RFC 6286: unique
    // within the AS is all it must be)
    if (inet_pton(AF_INET, s.local.c_str(), &sc.bgp_id) != 1) {
      uint32_t h = 2166136261u;
      for (unsigned char ch : s.local) h = (h ^ ch) * 16777619u;
      sc.bgp_id = htonl((h & 0x00ffffffu) | 0x0a000000u);  // 10.x.y.z: never 0, never an address of lanes'
    }
    auto p = std::make_unique<Peer>(sc, seed++);
    p->local = s.local;
    p->remote = s.peer;
    p->nics = s.nics;
    p->eth = s.eth;
    peers_.push_back(std::move(p));
  }
}

Speaker::~Speaker() {
  for (auto& p : peers_) {
    if (p->watched >= 0) loop_.unwatch(p->watched);
    if (p->fd >= 0) ::close(p->fd);
  }
}

std::vector<Update> Speaker::route_update(const SpeakerConfig::Nic& n, bool withdraw, std::optional<Afi> only) const {
  std::vector<Update> out;
  uint32_t pid = cfg_.add_path ? static_cast<uint32_t>(n.index + 1) : 0;
  if (!cfg_.task4.empty() && only.value_or(Afi::ipv4) == Afi::ipv4) {
    Update u;
    auto p = Prefix::parse(cfg_.task4 + "/32", pid);
    if (withdraw) {
      u.withdrawn = {*p};
    } else {
      u.nlri = {*p};
      u.as_path = {cfg_.local_as};
      std::array<uint8_t, 4> nh{};
      inet_pton(AF_INET, n.nh4.c_str(), nh.data());
      u.next_hop = nh;
    }
    out.push_back(u);
  }
  if (!cfg_.task6.empty() && only.value_or(Afi::ipv6) == Afi::ipv6) {
    Update u;
    auto p = Prefix::parse(cfg_.task6 + "/128", pid);
    if (withdraw) {
      u.mp_unreach = {*p};
    } else {
      u.mp_reach = {*p};
      u.as_path = {cfg_.local_as};
      inet_pton(AF_INET6, n.nh6.c_str(), u.mp_next_hop.data());
    }
    out.push_back(u);
  }
  return out;
}

void Speaker::close_peer(Peer& p, const std::string& why) {
  if (p.watched >= 0) loop_.unwatch(p.watched);  // before its number can be reused
  p.watched = -1;
  if (p.fd >= 0) {
    ::close(p.fd);
    p.fd = -1;
  }
  p.connecting = false;
  p.dial = Dial();
  p.announced.clear();
  p.next_attempt = Clock::now() + p.backoff.next();
  lg::info("{}: session {} -> {} closed: {}", cfg_.host, p.local, p.remote, why);
}

void Speaker::announce(Peer& p, const SpeakerConfig::Nic& n, bool withdraw) {
  if (p.session.state() != State::established) return;
  if (!withdraw && cfg_.active_backup && n.index != active_) return;  // it waits for the active NIC's failure
  if (withdraw == !p.announced[n.index]) return;  // nothing to change
  for (const auto& u : route_update(n, withdraw)) run(p, p.session.send(u));
  p.announced[n.index] = !withdraw;
  lg::info("{}: {} next hop of NIC {} on {} at {} us", cfg_.host, withdraw ? "withdrew" : "announced", n.index,
           p.local, mono_us());
}

void Speaker::run(Peer& p, std::vector<Action> acts) {
  for (auto& a : acts) {
    switch (a.kind) {
      case Action::Kind::send:
        if (p.fd >= 0 && ::send(p.fd, a.bytes.data(), a.bytes.size(), MSG_NOSIGNAL) < 0)
          lg::warn("{}: sending to {}: {}", cfg_.host, p.remote, std::strerror(errno));
        break;
      case Action::Kind::close:
        close_peer(p, a.reason);
        break;
      case Action::Kind::up:
        p.backoff.reset();
        lg::info("{}: session {} -> {} established (hold {} s)", cfg_.host, p.local, p.remote, p.session.hold_time());
        reselect();  // (active-backup: a session up may make its NIC the one)
        for (int i : p.nics)
          for (const auto& n : cfg_.nics)
            if (n.index == i && n.up) announce(p, n, false);
        // the initial announcements are complete (RFC 4724: End-of-RIB)
        for (Afi afi : {Afi::ipv4, Afi::ipv6}) run(p, p.session.end_of_rib(afi));
        break;
      case Action::Kind::refresh:
        readvertise(p, a.afi);
        break;
      case Action::Kind::down:
        break;
    }
  }
}

// The peer asked for AFI's routes again (ROUTE-REFRESH): every next hop
// announced on this session, then End-of-RIB.
void Speaker::readvertise(Peer& p, Afi afi) {
  for (const auto& n : cfg_.nics)
    if (auto it = p.announced.find(n.index); it != p.announced.end() && it->second)
      for (const auto& u : route_update(n, false, afi)) run(p, p.session.send(u));
  run(p, p.session.end_of_rib(afi));
  lg::info("{}: route refresh of {} from {}: re-advertised", cfg_.host, afi == Afi::ipv4 ? "IPv4" : "IPv6", p.remote);
}

// The transport is gone: the session decides (it may close), and the
// socket goes unless it did.
void Speaker::lost(Peer& p, const std::string& why) {
  run(p, p.session.transport_lost(why));
  if (p.connecting || p.fd >= 0 || p.watched >= 0) close_peer(p, why);
  reselect();
}

int choose_active(const std::vector<SpeakerConfig::Nic>& nics, const std::function<bool(int nic)>& established) {
  int first_up = -1, first_est = -1;
  for (const auto& n : nics) {
    if (!n.up) continue;
    if (first_up < 0 || n.index < first_up) first_up = n.index;
    if (established(n.index) && (first_est < 0 || n.index < first_est)) first_est = n.index;
  }
  return first_est >= 0 ? first_est : first_up;
}

int Speaker::pick_active() const {
  return choose_active(cfg_.nics, [this](int nic) {
    for (const auto& p : peers_)
      if (p->session.state() == State::established && std::find(p->nics.begin(), p->nics.end(), nic) != p->nics.end())
        return true;
    return false;
  });
}

void Speaker::reselect() {
  if (!cfg_.active_backup) return;
  int want = pick_active();
  if (want == active_) return;
  int old = active_;
  active_ = want;
  lg::info("{}: active-backup: NIC {} carries the job's ingress now (was {})", cfg_.host, want, old);
  // the new one announced before the old one is withdrawn: no moment without a path
  for (bool withdraw : {false, true})
    for (const auto& n : cfg_.nics)
      if (n.index == (withdraw ? old : want))
        for (auto& p : peers_)
          if (std::find(p->nics.begin(), p->nics.end(), n.index) != p->nics.end()) announce(*p, n, withdraw);
}

void Speaker::dial(Peer& p, Clock::time_point now) {
  ++p.attempts;
  p.dial = Dial::start(p.local, p.remote, 179, p.returning ? kReturnTimeout : kConnectTimeout, now);
  p.returning = false;
  if (p.dial.state() == Dial::State::failed) {
    lg::warn("{}: connecting {} -> {}: {}", cfg_.host, p.local, p.remote, p.dial.error());
    run(p, p.session.transport_lost(p.dial.error()));
    p.next_attempt = now + p.backoff.next();
    return;
  }
  p.connecting = true;
  p.watched = p.dial.fd();
  (void)loop_.watch(p.watched, EPOLLIN | EPOLLOUT, [this, &p](uint32_t ev) { on_socket(p, ev); });
}

void Speaker::on_socket(Peer& p, uint32_t events) {
  auto now = Clock::now();
  if (p.connecting) {
    if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
    auto st = p.dial.poll(now);
    if (st == Dial::State::failed) {
      lost(p, p.dial.error());
      return;
    }
    if (st == Dial::State::pending) return;
    p.fd = p.dial.release();  // the session's socket from now on
    p.connecting = false;
    (void)loop_.rewatch(p.fd, EPOLLIN);
    run(p, p.session.connected(now));
    return;
  }
  if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR))) return;
  uint8_t buf[8192];
  ssize_t r = ::recv(p.fd, buf, sizeof buf, 0);
  if (r > 0) {
    run(p, p.session.received(std::span<const uint8_t>(buf, static_cast<size_t>(r)), now));
  } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
    lost(p, r == 0 ? "peer closed the connection" : std::strerror(errno));
  }
}

void Speaker::link_changed(const std::string& eth, bool up) {
  for (auto& x : cfg_.nics) {
    if (x.eth != eth || up == x.up) continue;
    x.up = up;
    lg::info("{}: {} {} at {} us", cfg_.host, x.eth, up ? "has carrier" : "lost carrier", mono_us());
    for (auto& p : peers_) {
      if (p->eth != x.eth) continue;
      if (!up) {
        // the sessions riding it end now, as the switch ends its side
        // (fast external fallover): one kept through the outage would sit
        // on a connection in retransmit backoff, and hold the reconnect
        // off for seconds after the NIC returns; no new attempt until then
        if (p->connecting || p->fd >= 0) lost(*p, "the NIC lost carrier");
      } else {
        p->backoff.reset();
        p->next_attempt = Clock::now();
        p->returning = true;
      }
    }
    // the other sessions carrying this NIC's next hop (ADD-PATH) withdraw
    // or announce it
    for (auto& p : peers_)
      if (std::find(p->nics.begin(), p->nics.end(), x.index) != p->nics.end()) announce(*p, x, !up);
  }
  reselect();
}

bool Speaker::rides_up_nic(const Peer& p) const {
  if (p.eth.empty()) return true;
  for (const auto& x : cfg_.nics)
    if (x.eth == p.eth) return x.up;
  return true;
}

Clock::time_point Speaker::turn(Clock::time_point now) {
  for (auto& p : peers_) {
    // an attempt past its deadline has failed
    if (p->connecting && p->dial.poll(now) == Dial::State::failed) {
      std::string why = p->dial.error();
      if (why.find("timed out") != std::string::npos) ++p->timeouts;
      lost(*p, why);
      continue;
    }
    if (!p->connecting && p->fd < 0 && now >= p->next_attempt && rides_up_nic(*p)) dial(*p, now);
  }
  for (auto& p : peers_) run(*p, p->session.tick(now));
  // every wake is the sessions' timers, a dial's deadline or a retry, or
  // an event (a socket, a NIC): an idle injector sleeps until its next
  // keepalive (a fleet has a thousand of them on two cores)
  auto deadline = now + std::chrono::seconds(60);
  for (auto& p : peers_) {
    deadline = std::min(deadline, p->session.next_deadline());
    if (p->connecting)
      deadline = std::min(deadline, p->dial.deadline());
    else if (p->fd < 0 && rides_up_nic(*p))
      deadline = std::min(deadline, p->next_attempt);
  }
  return deadline;
}

void Speaker::stop() {
  for (auto& p : peers_) {
    for (const auto& x : cfg_.nics)
      if (p->announced[x.index]) announce(*p, x, true);
    run(*p, p->session.stop());
  }
  lg::info("{}: stopped; everything withdrawn", cfg_.host);
}

bool Speaker::changed() {
  std::vector<uint64_t> says;
  for (auto& p : peers_) {
    uint64_t ann = 0;
    for (auto [nic, on] : p->announced) ann |= static_cast<uint64_t>(on) << (nic & 63);
    says.insert(says.end(), {static_cast<uint64_t>(p->session.state()), p->session.updates_sent(), p->attempts,
                             p->timeouts, ann, p->session.last_error().size(),
                             static_cast<uint64_t>(p->session.hold_time())});
  }
  for (const auto& x : cfg_.nics) says.push_back(x.up);
  if (says == said_) return false;
  said_ = std::move(says);
  return true;
}

nlohmann::json Speaker::state() const {
  nlohmann::json s = nlohmann::json::array();
  for (const auto& p : peers_) {
    nlohmann::json ann = nlohmann::json::array();
    for (auto [nic, on] : p->announced)
      if (on) ann.push_back(nic);
    s.push_back({{"local", p->local}, {"peer", p->remote}, {"nics", p->nics}, {"state", to_string(p->session.state())},
                 {"hold_time", p->session.hold_time()}, {"announced_nics", ann},
                 {"updates_sent", p->session.updates_sent()}, {"last_error", p->session.last_error()},
                 {"connect_attempts", p->attempts}, {"connect_timeouts", p->timeouts}});
  }
  nlohmann::json n = nlohmann::json::array();
  for (const auto& x : cfg_.nics) n.push_back({{"index", x.index}, {"eth", x.eth}, {"up", x.up}});
  return {{"ready", true},
          {"host", cfg_.host},
          {"mode", cfg_.add_path ? "add-path" : "per-nic"},
          {"task4", cfg_.task4},
          {"task6", cfg_.task6},
          {"sessions", s},
          {"nics", n}};
}

}  // namespace lanes::vip
