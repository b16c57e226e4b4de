#include "lanes/switches/fib_agent_daemon.hpp"

#include <fcntl.h>
#include <sys/epoll.h>

#include <fstream>
#include <set>

#include "lanes/bfd/notify.hpp"
#include "lanes/testbed/log.hpp"
#include "lanes/testbed/netlink.hpp"

namespace lanes::switches {

using namespace lanes::testbed;

namespace lg = lanes::log;

FibAgentDaemon::FibAgentDaemon(AgentConfig cfg, uint16_t api_port, KernelFib& fib, std::string state_path)
    : cfg_(std::move(cfg)), port_(api_port), agent_(cfg_, fib), state_path_(state_path), state_file_(std::move(state_path)) {}

int FibAgentDaemon::run() {
  if (auto st = agent_.start(); !st) {
    lg::error("starting: {}", st.error().what());
    return 1;
  }
  Fd self_ns(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  auto mon = LinkMonitor::open_in(self_ns.get(), cfg_.node);
  if (!mon) {
    lg::error("{}", mon.error().what());
    return 1;
  }
  // sessions that were up before: the RIB counts as re-learned once they are back
  std::set<std::string> expected;
  try {
    std::ifstream in(state_path_);
    if (in)
      for (const auto& n : nlohmann::json::parse(in).value("established", std::vector<std::string>{}))
        expected.insert(n);
  } catch (const std::exception&) {
  }
  RibFollower::Timing timing;
  timing.stale_timeout = cfg_.stale_timeout;
  follower_.emplace(agent_, timing, std::move(expected), !agent_.state()["routes"].empty(), Clock::now());
  if (auto st = loop_.stop_on_signals(); !st) {  // before gRPC starts its threads
    lg::error("{}", st.error().what());
    return 1;
  }
  (void)loop_.watch(mon.value().fd(), EPOLLIN, [this, &mon](uint32_t) {
    if (auto events = mon.value().read_events())
      for (const auto& e : events.value())
        if (!e.deleted) link_changed(e.name, e.carrier && e.admin_up);
  });
  std::optional<bfd::VerdictFollower> bfd;
  if (!cfg_.bfd_socket.empty())
    bfd.emplace(loop_, cfg_.bfd_socket, [this](const bfd::Verdicts& v) {
      for (const auto& [ifname, usable] : v) end_sessions(ifname + " failed (BFD)", agent_.bfd_changed(ifname, usable));
    });
  loop_.run([this] { return turn(); });
  save();
  lg::info("stopping; kernel routes stay in place");
  return 0;
}

// A port's carrier: the agent's groups, and on its loss the injector
// sessions riding it are reset (fast external fallover) — a session kept
// through the outage would sit on a TCP connection in retransmit backoff,
// and hold the peer's reconnect off for seconds after the NIC returns.
void FibAgentDaemon::link_changed(const std::string& ifname, bool carrier) {
  end_sessions(ifname + " lost carrier", agent_.link_changed(ifname, carrier));
}

// The sessions of a port that failed are reset (deleted, then made again).
void FibAgentDaemon::end_sessions(const std::string& why, const std::vector<std::string>& sessions) {
  for (const auto& n : sessions) {
    if (!client_) break;  // gobgpd is away: its sessions are gone anyway
    if (!peer_configs_.count(n))
      if (auto c = client_->peer_configs()) peer_configs_ = std::move(c).value();
    auto cfg = peer_configs_.find(n);
    if (cfg == peer_configs_.end()) {
      lg::warn("{}: gobgpd has no neighbor {} to end", why, n);
      continue;
    }
    if (auto st = client_->delete_peer(n); !st) {
      lg::warn("ending the session with {}: {}", n, st.error().what());
      continue;
    }
    lg::info("{}: session with {} ended", why, n);
    to_readd_[n] = cfg->second;
  }
  if (client_) readd(Clock::now());
}

// The peers ended on carrier loss, made anew (tried until gobgpd takes
// each: one left out would never take its injector back)
void FibAgentDaemon::readd(Clock::time_point now) {
  std::erase_if(to_readd_, [&](const auto& p) {
    auto st = client_->add_peer(p.second);
    if (!st) lg::warn("making the peer {} again: {}; trying again", p.first, st.error().what());
    return st.ok();
  });
  next_readd_ = now + std::chrono::milliseconds(200);
}

void FibAgentDaemon::save() {
  auto j = agent_.state();
  j["connected"] = follower_->connected();
  j["ready"] = follower_->connected();  // for the supervisor: the hosts' daemons start once gobgpd answers here
  auto back = follower_->settled(Clock::now());
  j["established"] = std::vector<std::string>(back.begin(), back.end());
  j["gobgpd_losses"] = follower_->losses();
  j["rib_events"] = follower_->events();
  state_file_.publish(j);
}

void FibAgentDaemon::on_stream() {
  bool closed = false;
  for (auto& e : coalesce_tables(watch_->take())) {
    switch (e.kind) {
      case GobgpWatch::Event::Kind::table:
        follower_->table(e.paths, e.snapshot, Clock::now());
        break;
      case GobgpWatch::Event::Kind::peer:
        follower_->peer(e.neighbor, e.state, Clock::now());
        break;
      case GobgpWatch::Event::Kind::closed:
        closed = true;
        break;
    }
  }
  if (!closed) return;
  loop_.unwatch(watch_->fd());
  watch_.reset();
  client_.reset();
  to_readd_.clear();  // a new gobgpd has every peer of its config file
  follower_->lost(Clock::now());
}

// gobgpd answers: originate the aggregates (again: a new gobgpd has none),
// then follow the RIB
void FibAgentDaemon::try_connect(Clock::time_point now) {
  next_try_ = now + std::chrono::milliseconds(200);
  auto c = GobgpClient::connect(-1, port_, std::chrono::milliseconds(1000));
  if (!c || !c.value().ping()) return;
  auto w = c.value().watch();
  if (!w) return;
  client_.emplace(std::move(c).value());
  watch_ = std::move(w).value();
  (void)loop_.watch(watch_->fd(), EPOLLIN, [this](uint32_t) { on_stream(); });
  to_originate_.assign(cfg_.originate.begin(), cfg_.originate.end());
  next_originate_ = now;
  // the peers' configurations, for remaking one whose port lost carrier
  if (auto p = client_->peer_configs()) peer_configs_ = std::move(p).value();
  follower_->connected(now);
}

// what gobgpd did not take yet: tried until it does, or the rack's
// aggregate never reaches the spines
void FibAgentDaemon::originate(Clock::time_point now) {
  std::erase_if(to_originate_, [&](const std::string& p) {
    auto st = client_->originate(p);
    if (!st) lg::warn("originating {} failed ({}); trying again", p, st.error().what());
    return st.ok();
  });
  next_originate_ = now + std::chrono::seconds(1);
}

// connect or originate if due, the follower's decisions, the state file;
// then sleep until the next of them is due
std::optional<FibAgentDaemon::Clock::time_point> FibAgentDaemon::turn() {
  auto now = Clock::now();
  if (!follower_->connected() && now >= next_try_) try_connect(now);
  if (client_ && !to_originate_.empty() && now >= next_originate_) originate(now);
  if (client_ && !to_readd_.empty() && now >= next_readd_) readd(now);
  auto wake = follower_->tick(Clock::now());
  agent_.tick(std::chrono::steady_clock::now());
  save();
  // the settle time of a session, read by the state file, ends within a second
  auto next = Clock::now() + std::chrono::seconds(1);
  if (wake) next = std::min(next, *wake);
  if (auto due = agent_.next_deadline()) next = std::min(next, *due);
  if (!follower_->connected()) next = std::min(next, next_try_);
  if (client_ && !to_originate_.empty()) next = std::min(next, next_originate_);
  if (client_ && !to_readd_.empty()) next = std::min(next, next_readd_);
  return next;
}

}  // namespace lanes::switches
