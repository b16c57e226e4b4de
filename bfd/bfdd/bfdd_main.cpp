// lanes-bfdd: keeps one single-hop BFD session (RFC 5880/5881) per
// configured link of a rack switch (in its namespace) or of a rack's job
// hosts (one daemon for all of them, each host's sockets made in the
// host's namespace). Each node's clients hear which of its paths are
// usable on its verdict socket; its state file shows its sessions. A link
// that loses carrier starts its session afresh. On SIGTERM every session
// says AdminDown, so the peers keep the paths in use. Started and
// supervised by lanes.
//
// usage: lanes-bfdd --config FILE --state FILE [--log-level L]

#include <fcntl.h>
#include <sys/epoll.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <map>
#include <memory>

#include "lanes/bfd/bfdd.hpp"
#include "lanes/bfd/notify.hpp"
#include "lanes/testbed/daemon_main.hpp"
#include "lanes/testbed/event_loop.hpp"
#include "lanes/testbed/log.hpp"
#include "lanes/testbed/netlink.hpp"
#include "lanes/testbed/netns.hpp"

using namespace lanes::testbed;
using namespace lanes::bfd;
namespace lg = lanes::log;

namespace {

// One node's sessions and what it tells.
struct BfdNode {
  BfddConfig cfg;
  std::vector<std::unique_ptr<LinkSession>> links;
  Notifier notifier;
  LinkMonitor monitor;
  std::unique_ptr<StateFile> state_file;
  Verdicts told;
  std::map<std::string, bool> carrier;  // per link: has it now
  EventLoop::Clock::time_point next_status{};

  Verdicts verdicts() const {
    Verdicts v;
    for (const auto& l : links) v[l->config().ifname] = l->usable();
    return v;
  }
  nlohmann::json status() const {
    nlohmann::json s = nlohmann::json::array();
    for (const auto& l : links) s.push_back(l->status());
    return {{"ready", true}, {"node", cfg.node}, {"clients", notifier.clients()}, {"sessions", s}};
  }
  // a state change is logged, and reaches the clients if a verdict changed
  void changed(const LinkSession& l) {
    const auto& s = l.session();
    lg::info("{}: BFD {} ({} to {}): {}{}", cfg.node, l.config().ifname, l.config().local, l.config().remote,
             to_string(s.state()), s.diag() == Diag::none ? "" : fmt::format(", diag {}", to_string(s.diag())));
    next_status = {};
    Verdicts v = verdicts();
    if (v == told) return;
    for (const auto& [ifname, usable] : v)
      if (told[ifname] != usable) lg::info("{}: {} {}", cfg.node, ifname, usable ? "usable again" : "out of use: its path failed");
    told = v;
    notifier.publish(v);
  }
  // a link's session starts afresh when it loses carrier (once per loss:
  // the monitor reports every change of the link, and a read afresh after
  // an overrun repeats the state)
  void link_events() {
    auto events = monitor.read_events();
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
  }
};

// NODE's sessions, verdict socket and link monitor, the sockets made in its
// namespace
Result<std::unique_ptr<BfdNode>> open_node(BfddConfig cfg, const std::string& daemon_state) {
  auto n = std::make_unique<BfdNode>();
  n->cfg = std::move(cfg);
  const auto& c = n->cfg;
  Fd ns;
  if (c.netns.empty()) {
    ns = Fd(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
    if (!ns) return errno_error(c.node + ": its namespace");
  } else {
    auto o = Netns::open(c.netns);
    if (!o) return o.error();
    ns = Fd(::dup(o.value().fd()));
    if (!ns) return errno_error(c.node + ": its namespace");
  }
  auto now = EventLoop::Clock::now();
  auto open_links = [&]() -> Status {
    for (const auto& lc : c.links) {
      auto l = LinkSession::open(lc, now);
      if (!l) return os_error(l.error().code().value(), c.node + ": " + message_of(l.error()));
      n->links.push_back(std::move(l).value());
    }
    return {};
  };
  if (auto st = c.netns.empty() ? open_links() : run_in_netns(ns.get(), open_links, c.node); !st) return st.error();
  auto notifier = Notifier::open(c.socket);
  if (!notifier) return os_error(notifier.error().code().value(), c.node + ": " + message_of(notifier.error()));
  n->notifier = std::move(notifier).value();
  auto mon = LinkMonitor::open_in(ns.get(), c.node);
  if (!mon) return mon.error();
  n->monitor = std::move(mon).value();
  n->state_file = std::make_unique<StateFile>(c.state.empty() ? daemon_state : c.state);
  n->told = n->verdicts();
  for (const auto& l : n->links) n->carrier[l->config().ifname] = true;
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  DaemonStart ds;
  if (auto rc = daemon_start(argc, argv, "lanes-bfdd",
                             "Runs beside a rack switch or a rack's hosts: one BFD session per link, each node's "
                             "verdicts on its socket.",
                             ds))
    return *rc;
  BfddPlan plan;
  try {
    plan = BfddPlan::from_json(ds.config);
  } catch (const std::exception& e) {
    lg::error("{}: {}", ds.config_path, e.what());
    return 2;
  }
  EventLoop loop;
  if (auto st = loop.stop_on_signals(); !st) {
    lg::error("{}", st.error().what());
    return 1;
  }
  // the peers' steady packets taken in the kernel (rx_filter.hpp); without
  // BPF here, every packet is read from the sockets
  // (LANES_BFD_RX_FILTER=0 in lanes' environment turns it off, to measure
  // what it saves)
  std::unique_ptr<RxFilter> filter;
  const char* want = std::getenv("LANES_BFD_RX_FILTER");
  if (want && std::string_view(want) == "0")
    lg::info("the BFD receive filter is off (LANES_BFD_RX_FILTER=0)");
  else if (auto f = RxFilter::load(); f)
    filter = std::move(f).value();
  else
    lg::warn("the BFD receive filter is not loaded ({}): every packet is read from the sockets",
             f.error().code().message());
  std::vector<std::unique_ptr<BfdNode>> nodes;
  // every session of every node: (node, link)
  std::vector<std::pair<BfdNode*, LinkSession*>> all;
  for (auto& c : plan.nodes) {
    auto n = open_node(std::move(c), ds.state_path);
    if (!n) {
      lg::error("{}", message_of(n.error()));
      return 1;
    }
    nodes.push_back(std::move(n).value());
    BfdNode* node = nodes.back().get();
    for (auto& l : node->links) {
      all.emplace_back(node, l.get());
      if (filter)
        if (auto st = l->use_filter(*filter); !st)
          lg::warn("{}: {}: its packets are read from its socket", node->cfg.node, message_of(st.error()));
    }
    (void)loop.watch(node->notifier.fd(), EPOLLIN, [node](uint32_t) {
      node->notifier.accept(node->told);
      node->next_status = {};
    });
    (void)loop.watch(node->monitor.fd(), EPOLLIN, [node](uint32_t) { node->link_events(); });
  }
  // a daemon of several nodes says so in its own file (the one it is
  // ready by); a daemon of one node, in that node's
  bool own_file = nodes.size() > 1 || !nodes.front()->cfg.state.empty();
  if (own_file) {
    std::vector<std::string> names;
    for (const auto& n : nodes) names.push_back(n->cfg.node);
    StateFile(ds.state_path).publish({{"ready", true}, {"nodes", names}, {"sessions", all.size()}});
  }
  lg::info("bfdd ready: {} nodes, {} sessions{}", nodes.size(), all.size(),
           filter ? ", the peers' steady packets taken by its receive filter" : "");
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
  for (size_t i = 0; i < all.size(); ++i) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = i;
    if (!pending || ::epoll_ctl(pending.get(), EPOLL_CTL_ADD, all[i].second->fd(), &ev) != 0) {
      lg::error("{}: watching the BFD sockets: {}", all[i].first->cfg.node, std::strerror(errno));
      return 1;
    }
  }
  std::vector<epoll_event> ready(std::max<size_t>(all.size(), 1));
  loop.run([&] {
    auto t = EventLoop::Clock::now();
    int n = ::epoll_wait(pending.get(), ready.data(), static_cast<int>(ready.size()), 0);
    for (int i = 0; i < n; ++i) {
      auto& [node, l] = all[ready[static_cast<size_t>(i)].data.u64];
      if (l->readable(t)) node->changed(*l);
    }
    for (auto& [node, l] : all)
      if (l->absorbed(t)) node->changed(*l);
    for (auto& [node, l] : all)
      if (l->tick(t, true)) node->changed(*l);
    // the counters change with every packet: the state file at most every
    // 5 s, and at once after a state change (a file written each second by
    // each of a fleet's daemons was a fifth of a host daemon's CPU)
    auto next = t + std::chrono::seconds(5);
    for (auto& node : nodes) {
      if (t >= node->next_status) {
        node->state_file->publish(node->status());
        node->next_status = t + std::chrono::seconds(5);
      }
      next = std::min(next, node->next_status);
    }
    for (const auto& [node, l] : all) {
      next = std::min(next, l->next_deadline());
      // a session on its way up is read four times an interval: its
      // handshake waits for the peer's packets
      if (l->session().state() != State::up) next = std::min(next, t + l->session().tx_interval() / 4);
    }
    return std::optional(next);
  });
  auto t = EventLoop::Clock::now();
  for (auto& [node, l] : all) l->admin_down(t);
  lg::info("bfdd stopping: its {} sessions said AdminDown", all.size());
  return 0;
}
