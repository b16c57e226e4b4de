// lanes-traffic: the traffic engine's sender and receiver. Every TCP flow
// carries a header {magic, flow id, length} and then the seeded pattern of
// lanes::scenarios::Pattern, which the receiver verifies byte by byte.
// Every mode runs on lanes' one event loop (core EventLoop: epoll, timers,
// SIGTERM and SIGINT through a signalfd).
//
//   lanes-traffic recv --port P [--seed S] [--flows N]
//       accepts flows until N have finished (or SIGTERM); prints one JSON
//       object: per flow the bytes verified and whether it was complete.
//   lanes-traffic send --to ADDR --port P --flows F --bytes N [--seed S]
//                      [--bind ADDR[,ADDR...]] [--interval-ms 100] [--wait-go]
//       (--to A,B,...: flow i to the (i mod n)-th; --bind likewise: an
//       application that binds each flow to a NIC's address in turn)
//       sends F flows of N bytes each (or, with --total T, F flows that share
//       T bytes chunk by chunk); prints per flow bytes, seconds,
//       retransmits and errors, and the bytes per interval. --wait-go: as fetch.
//   lanes-traffic serve --port P [--seed S]
//       answers requests {magic, id, length} with LENGTH pattern bytes of
//       flow ID, on each connection until the client closes it (SIGTERM ends).
//   lanes-traffic fetch --to ADDR --port P --conns C --requests R --bytes N
//       opens C connections at the same moment; each sends R requests of N
//       bytes one after another and verifies every answer; prints connection
//       failures, request latency percentiles and the time until all are done,
//       and connection-setup times (connect() to established). With
//       --wait-go it starts only on SIGUSR1 (lanes' go for a burst).
//       --rate Q [--duration S] [--arrival poisson|constant]: open loop
//       instead — requests arrive at Q a second for S seconds, queue for
//       the next free connection, and each request's latency runs from its
//       arrival; prints when each was issued beside its latency.
//   lanes-traffic probe-recv --port P
//       counts sequence-numbered UDP probes per path until SIGTERM (and the
//       probes still in flight then: until 50 ms pass without one); prints
//       per path the probes received, lost and the longest gap between
//       arrivals.
//   lanes-traffic probe-send --to ADDR --port P --paths N --rate HZ
//                            [--bind A,B,...] [--seconds S]
//       sends probes on N paths (one socket and source port each, path i
//       bound to the i-th address of --bind, cyclically) until SIGTERM.
//   lanes-traffic collective ...: one rank of a ring collective (collective_rank.cpp)
//   lanes-traffic training ... / store ...: a training job's rank and its
//       checkpoints' storage server (training_rank.cpp)
//   lanes-traffic trace ...: a rank of a Chakra trace's replay (trace_rank.cpp)

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <iostream>
#include <algorithm>
#include <map>
#include <memory>
#include <span>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "lanes/testbed/event_loop.hpp"
#include "lanes/scenarios/arrivals.hpp"
#include "lanes/scenarios/pattern.hpp"
#include "lanes/scenarios/traffic_results.hpp"
#include "engine.hpp"

using lanes::scenarios::Pattern;
using lanes::scenarios::Verifier;
namespace traffic = lanes::scenarios::traffic;
using lanes::testbed::EventLoop;
using Clock = std::chrono::steady_clock;
using namespace lanes::traffic_engine;

namespace {

constexpr uint32_t kMagic = 0x4c4e5331;     // "LNS1": a flow
constexpr uint32_t kReqMagic = 0x4c4e5231;  // "LNR1": a request
constexpr uint64_t kUntilEof = ~uint64_t{0};
constexpr size_t kTurnBytes = 256 * 1024;  // what one flow writes before the others get a turn
constexpr size_t kSendBytes = 64 * 1024;   // the most one send() is given
constexpr uint32_t kProbeMagic = 0x4c4e5031;  // "LNP1": a probe
struct Header {
  uint32_t magic;
  uint32_t flow;
  uint64_t bytes;
};

int recv_main(const traffic::RecvArgs& a) {
  const uint64_t seed = a.seed;
  const int expect = a.flows;
  sockaddr_storage from{};
  socklen_t from_len = 0;
  if (a.from && (expect < 1 || !target_of(*a.from, a.port, a.kMode, from, from_len))) {
    if (expect < 1) std::cerr << "lanes-traffic recv: --from needs --flows N (the connections it opens)\n";
    return 2;
  }
  int ls = a.from ? -1 : listen_tcp(a.port);
  if (!a.from && ls < 0) return 1;
  EventLoop loop;
  if (!stop_on_signals(loop, "recv")) return 1;
  struct Conn {
    uint8_t hdr[sizeof(Header)];
    size_t hdr_got = 0;
    Header h{};
    std::optional<Verifier> v;
    Clock::time_point start;
  };
  std::map<int, Conn> conns;
  traffic::RecvResult result;
  int finished = 0;
  std::vector<uint8_t> buf(1 << 18);
  // one flow's bytes as they arrive; its end is recorded when the sender closes
  auto on_data = [&](int fd) {
    auto& c = conns[fd];
    bool closed = false;
    for (;;) {
      ssize_t r = ::read(fd, buf.data(), buf.size());
      if (r < 0 && errno == EAGAIN) break;
      if (r <= 0) {
        closed = true;
        break;
      }
      size_t off = 0;
      while (c.hdr_got < sizeof(Header) && off < static_cast<size_t>(r)) c.hdr[c.hdr_got++] = buf[off++];
      if (c.hdr_got == sizeof(Header) && !c.v) {
        std::memcpy(&c.h, c.hdr, sizeof(Header));
        if (c.h.magic != kMagic) {
          closed = true;
          break;
        }
        c.v.emplace(seed, c.h.flow);
      }
      if (c.v && off < static_cast<size_t>(r))
        c.v->feed(std::span<const uint8_t>(buf.data() + off, static_cast<size_t>(r) - off));
    }
    if (!closed) return;
    // a striped flow's length is not known up front (kUntilEof): it is
    // complete when its stream ended cleanly, and the runner checks its
    // length against what the sender reports
    bool ok = c.v && !c.v->first_bad() && (c.h.bytes == kUntilEof || c.v->verified() == c.h.bytes);
    traffic::RecvFlow f;
    f.flow = c.v ? c.h.flow : 0;
    f.expected = c.v ? c.h.bytes : 0;
    f.verified = c.v ? c.v->verified() : 0;
    f.complete = ok;
    f.seconds = std::chrono::duration<double>(Clock::now() - c.start).count();
    if (c.v && c.v->first_bad()) f.first_bad_offset = *c.v->first_bad();
    result.flows.push_back(f);
    loop.unwatch(fd);
    ::close(fd);  // the sender sees EOF: everything arrived
    conns.erase(fd);
    if (++finished == expect) loop.stop();
  };
  auto take = [&](int c) {
    conns[c].start = Clock::now();
    (void)loop.watch(c, EPOLLIN | EPOLLRDHUP, [&on_data, c](uint32_t) { on_data(c); });
  };
  if (a.from) {
    // it opens the flows: one that cannot connect ends as a flow that
    // verified nothing (on_data sees its error as the end)
    for (int i = 0; i < expect; ++i) {
      std::string why;
      int c = open_to(from, from_len, SOCK_STREAM, std::nullopt, why);
      if (c >= 0) {
        take(c);
        continue;
      }
      std::cerr << "lanes-traffic recv: flow " << i << " to " << *a.from << ": " << why << "\n";
      result.flows.push_back({});
      ++finished;
    }
  } else {
    (void)loop.watch(ls, EPOLLIN, [&](uint32_t) {
      for (;;) {
        int c = ::accept4(ls, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c < 0) break;
        take(c);
      }
    });
  }
  if (finished < expect || expect == 0) loop.run();
  bool all = true;
  for (const auto& f : result.flows) {
    result.verified_bytes += f.verified;
    all = all && f.complete;
  }
  result.all_complete = all && (expect == 0 || finished >= expect);
  std::cout << traffic::line_of(result) << "\n";
  return all ? 0 : 1;
}

// "a,b,c" as its items
std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t from = 0;
  while (from <= s.size()) {
    size_t comma = s.find(',', from);
    std::string item = s.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  return out;
}

// send: F flows to one receiver (or to each of a list in turn), each
// level-triggered on the one event loop
class Sender {
 public:
  explicit Sender(const traffic::SendArgs& a) : a_(a), budget_(a.total.value_or(0)) {}

  // 0 when every flow sent what it was to; 1 after any error; 2: bad input
  // (--to and --bind may be lists: flow i goes to the (i mod n)-th and from
  // the (i mod m)-th, as an application that binds its flows to NICs does)
  int run() {
    for (const auto& to : split_list(a_.to)) {
      dsts_.emplace_back();
      if (!target_of(to, a_.port, a_.kMode, dsts_.back().first, dsts_.back().second)) return 2;
    }
    if (dsts_.empty() && !a_.listen) {
      (void)target_of(a_.to, a_.port, a_.kMode, dst_, dlen_);  // says why
      return 2;
    }
    if (a_.listen && (!dsts_.empty() || a_.bind)) {
      std::cerr << "lanes-traffic send: --listen takes its flows from whoever connects: no --to or --bind\n";
      return 2;
    }
    if (a_.bind) binds_ = split_list(*a_.bind);
    if (a_.flows < 1 || a_.interval_ms < 1 || a_.chunk < 1) {
      std::cerr << "lanes-traffic send: --flows, --interval-ms and --chunk must be positive\n";
      return 2;
    }
    // listening before the go: the receivers connect while it waits
    if (a_.listen && (ls_ = listen_tcp(a_.port)) < 0) return 1;
    if (!wait_for_go(a_.wait_go)) return 1;
    if (!stop_on_signals(loop_, "send")) return 1;
    t0_ = Clock::now();
    if (a_.listen) {
      accept_all();
    } else {
      open_all();
      for (size_t i = 0; i < flows_.size(); ++i)
        if (!flows_[i].eof) watch_flow(i);
    }
    if (open_ > 0) loop_.run();
    auto result = collect();
    std::cout << traffic::line_of(result) << "\n";
    return result.connection_errors ? 1 : 0;
  }

 private:
  struct Flow {
    int fd = -1;
    uint32_t id = 0;
    std::unique_ptr<lanes::scenarios::Source> source;  // built when the flow first sends
    uint64_t sent = 0;  // pattern bytes sent
    uint64_t allowed = 0;  // bytes this flow may send (striped: grows chunk by chunk)
    int local_port = 0;
    size_t hdr_sent = 0;
    bool done = false, eof = false;
    std::string error;
    Clock::time_point start, end;
    std::vector<uint64_t> per_interval;
    uint32_t retransmits = 0;
    std::vector<traffic::Subflow> subflows;
  };

  // --total T: the flows share T bytes, taking --chunk bytes at a time as
  // they drain (a striped checkpoint: every flow stays busy until the end)
  bool striped() const { return a_.total.has_value(); }

  void open_all() {
    flows_.resize(static_cast<size_t>(a_.flows));
    open_ = a_.flows;
    for (size_t i = 0; i < flows_.size(); ++i) {
      Flow& f = flows_[i];
      f.id = static_cast<uint32_t>(i);
      f.allowed = striped() ? 0 : a_.bytes;
      const auto& [dst, dlen] = dsts_[i % dsts_.size()];
      std::optional<std::string> bind;
      if (!binds_.empty()) bind = binds_[i % binds_.size()];
      f.fd = open_to(dst, dlen, SOCK_STREAM, bind, f.error);
      if (f.fd < 0) {
        f.done = f.eof = true;
        --open_;
        continue;
      }
      f.start = Clock::now();
      sockaddr_storage local{};
      socklen_t llen = sizeof local;
      if (::getsockname(f.fd, reinterpret_cast<sockaddr*>(&local), &llen) == 0)
        f.local_port = ntohs(local.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&local)->sin6_port
                                                         : reinterpret_cast<sockaddr_in*>(&local)->sin_port);
    }
  }

  void watch_flow(size_t i) {
    (void)loop_.watch(flows_[i].fd, EPOLLOUT | EPOLLIN | EPOLLRDHUP, [this, i](uint32_t e) { on_flow(i, e); });
  }

  // --listen: flow i is the i-th connection accepted (those queued before
  // the go first); every flow starts as it arrives
  void accept_all() {
    flows_.resize(static_cast<size_t>(a_.flows));
    open_ = a_.flows;
    for (size_t i = 0; i < flows_.size(); ++i) {
      flows_[i].id = static_cast<uint32_t>(i);
      flows_[i].allowed = striped() ? 0 : a_.bytes;
    }
    (void)loop_.watch(ls_, EPOLLIN, [this](uint32_t) {
      while (accepted_ < flows_.size()) {
        int c = ::accept4(ls_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c < 0) {
          if (errno != EAGAIN && errno != EINTR) give_up(std::string("accept: ") + std::strerror(errno));
          return;
        }
        Flow& f = flows_[accepted_];
        f.fd = c;
        f.start = Clock::now();
        watch_flow(accepted_++);
      }
      stop_listening();
    });
    // the connections that have not come by --accept-timeout never will
    loop_.at(Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a_.accept_timeout)),
             [this] {
               if (accepted_ >= flows_.size()) return;
               char secs[32];
               std::snprintf(secs, sizeof secs, "%g", a_.accept_timeout);
               give_up(std::string("no connection came within ") + secs + " s");
             });
  }
  // No more flows are taken; the socket stays open until the end: an MPTCP
  // connection's further subflows join through it (closed at once, a
  // restore's subflows were refused and most flows ran on their first alone)
  void stop_listening() {
    if (listening_) loop_.unwatch(ls_);
    listening_ = false;
  }
  // --listen: the flows still without a connection failed, WHY
  void give_up(const std::string& why) {
    stop_listening();
    for (; accepted_ < flows_.size(); ++accepted_) {
      Flow& f = flows_[accepted_];
      f.error = why;
      f.done = f.eof = true;
      if (--open_ <= 0) loop_.stop();
    }
  }

  // a flow that ended is no longer watched (its socket stays open until the results)
  void ended(Flow& f) {
    f.eof = true;
    loop_.unwatch(f.fd);
    if (--open_ <= 0) loop_.stop();
  }
  // all its bytes are out: it waits for the receiver's close
  // --mptcp: the flow's subflows now, merged into those seen before (a
  // subflow that has gone stays in the list with what it carried; one made
  // again between the same addresses has other ports: another entry)
  static void note_subflows(Flow& f) {
    for (auto& now : mptcp_subflows(f.fd)) {
      auto it = std::find_if(f.subflows.begin(), f.subflows.end(), [&](const traffic::Subflow& s) {
        return s.local == now.local && s.remote == now.remote && s.local_port == now.local_port &&
               s.remote_port == now.remote_port;
      });
      if (it == f.subflows.end()) {
        f.subflows.push_back(now);
      } else {
        it->bytes_acked = std::max(it->bytes_acked, now.bytes_acked);
        it->retransmits = std::max(it->retransmits, now.retransmits);
      }
    }
  }
  void sent_all(Flow& f) {
    f.done = true;
    note_subflows(f);  // (before its end closes them)
    ::shutdown(f.fd, SHUT_WR);
    (void)loop_.rewatch(f.fd, EPOLLIN | EPOLLRDHUP);
  }

  // flow I ready for EVENTS: it sends while it may, and notices its receiver's close
  void on_flow(size_t i, uint32_t events) {
    Flow& f = flows_[i];
    if (f.eof) return;
    if (events & EPOLLERR) {
      int soerr = 0;
      socklen_t sl = sizeof soerr;
      ::getsockopt(f.fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
      f.error = std::strerror(soerr ? soerr : EIO);
      return ended(f);
    }
    if (!f.done && (events & EPOLLOUT)) send_turn(f);
    if (!f.eof && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP))) read_close(f);
  }

  // A quarter MiB per turn: at sub-millisecond round trips ACKs free the
  // socket's buffer as fast as one flow fills it, and a flow that wrote
  // until EAGAIN kept the others from their first bytes for up to 300 ms
  // (the flows are level-triggered: a writable one is back at the next turn).
  void send_turn(Flow& f) {
    size_t slot = static_cast<size_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0_).count() / a_.interval_ms);
    size_t this_turn = 0;
    while (!f.done && this_turn < kTurnBytes) {
      if (f.hdr_sent < sizeof(Header)) {
        Header h{kMagic, f.id, striped() ? kUntilEof : a_.bytes};
        ssize_t w = ::send(f.fd, reinterpret_cast<uint8_t*>(&h) + f.hdr_sent, sizeof h - f.hdr_sent, MSG_NOSIGNAL);
        if (w < 0) break;
        f.hdr_sent += static_cast<size_t>(w);
        continue;
      }
      if (f.sent == f.allowed && striped() && budget_ > 0) {
        uint64_t take = std::min(a_.chunk, budget_);
        budget_ -= take;
        f.allowed += take;
      }
      size_t len = static_cast<size_t>(std::min<uint64_t>(kSendBytes, f.allowed - f.sent));
      if (len == 0) return sent_all(f);  // nothing left for this flow
      if (!f.source) f.source = std::make_unique<lanes::scenarios::Source>(a_.seed, f.id);
      auto piece = f.source->at(f.sent, len);
      ssize_t w = ::send(f.fd, piece.data(), piece.size(), MSG_NOSIGNAL);
      if (w < 0) {
        if (errno != EAGAIN) {
          f.error = std::string("send: ") + std::strerror(errno);
          f.done = true;
          ended(f);
        }
        return;
      }
      f.sent += static_cast<uint64_t>(w);
      this_turn += static_cast<size_t>(w);
      if (f.per_interval.size() <= slot) {
        if (g_mptcp) note_subflows(f);  // once an interval: a subflow that goes before the end is kept
        f.per_interval.resize(slot + 1, 0);
      }
      f.per_interval[slot] += static_cast<uint64_t>(w);
      if (f.sent == f.allowed && (!striped() || budget_ == 0)) return sent_all(f);
    }
  }

  // the receiver closed (or the socket failed): the flow's end
  void read_close(Flow& f) {
    uint8_t b[256];
    ssize_t r = ::read(f.fd, b, sizeof b);
    if (r > 0 || (r < 0 && errno == EAGAIN)) return;
    if (r < 0) f.error = std::string("read: ") + std::strerror(errno);
    else if (!f.done) f.error = "the receiver closed early";
    tcp_info ti{};
    socklen_t tl = sizeof ti;
    if (::getsockopt(f.fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) == 0) f.retransmits = ti.tcpi_total_retrans;
    note_subflows(f);
    if (!f.subflows.empty()) {
      // an MPTCP socket's own TCP_INFO is its first subflow's
      f.retransmits = 0;
      for (const auto& s : f.subflows) f.retransmits += static_cast<uint32_t>(s.retransmits);
    }
    f.end = Clock::now();
    ended(f);
  }

  // what the flows did; closes their sockets
  traffic::SendResult collect() {
    double secs = std::chrono::duration<double>(Clock::now() - t0_).count();
    traffic::SendResult result;
    uint64_t total = 0;
    int errors = 0;
    size_t slots = 0;
    // what the flows ran (every one was opened the same way): the first open one's
    for (const auto& f : flows_) {
      char cc[16] = {};
      socklen_t cl = sizeof cc;
      if (f.fd < 0) continue;
      if (::getsockopt(f.fd, IPPROTO_TCP, TCP_CONGESTION, cc, &cl) == 0) result.congestion.assign(cc, strnlen(cc, cl));
      int buf = 0;
      socklen_t bl = sizeof buf;
      if (g_window && ::getsockopt(f.fd, SOL_SOCKET, SO_SNDBUF, &buf, &bl) == 0 && buf > 0)
        result.socket_buffer = static_cast<uint64_t>(buf);
      break;
    }
    for (auto& f : flows_) {
      total += f.sent;
      errors += !f.error.empty() || f.sent != f.allowed || !f.done;
      slots = std::max(slots, f.per_interval.size());
      result.flows.push_back({f.id, f.local_port, f.sent, f.retransmits, f.error,
                              std::chrono::duration<double>(f.end - f.start).count(), f.per_interval, f.subflows});
      if (f.fd >= 0) ::close(f.fd);
    }
    // steady rate: the interval sums after the first second, without the last interval
    std::vector<uint64_t> sums(slots, 0);
    for (const auto& f : flows_)
      for (size_t i = 0; i < f.per_interval.size(); ++i) sums[i] += f.per_interval[i];
    size_t skip = static_cast<size_t>(1000 / std::max(1, a_.interval_ms));
    double steady = 0;
    if (slots > skip + 1) {
      uint64_t b = 0;
      for (size_t i = skip; i + 1 < slots; ++i) b += sums[i];
      steady = static_cast<double>(b) * 8 / (static_cast<double>(slots - 1 - skip) * a_.interval_ms / 1000.0) / 1e9;
    }
    if (striped() && total != *a_.total) ++errors;  // stopped before the checkpoint was out
    result.bytes = total;
    result.steady_gbps = steady;
    result.interval_bytes = sums;
    result.seconds = secs;
    result.gbps = secs > 0 ? static_cast<double>(total) * 8 / secs / 1e9 : 0;
    result.connection_errors = errors;
    result.interval_ms = a_.interval_ms;
    result.to = a_.to;
    return result;
  }

  const traffic::SendArgs& a_;
  sockaddr_storage dst_{};
  std::vector<std::pair<sockaddr_storage, socklen_t>> dsts_;  // --to's addresses
  std::vector<std::string> binds_;  // --bind's
  socklen_t dlen_ = 0;
  uint64_t budget_;  // striped: the bytes no flow has taken yet
  EventLoop loop_;
  Clock::time_point t0_;
  std::vector<Flow> flows_;
  int open_ = 0;  // flows not yet ended
  int ls_ = -1;  // --listen's socket
  bool listening_ = true;  // --listen: still taking flows
  size_t accepted_ = 0;  // --listen: the flows that have their connection
};

int send_main(const traffic::SendArgs& a) { return Sender(a).run(); }

int serve_main(const traffic::ServeArgs& a) {
  const uint64_t seed = a.seed;
  int ls = listen_tcp(a.port);
  if (ls < 0) return 1;
  EventLoop loop;
  if (!stop_on_signals(loop, "serve")) return 1;
  struct Conn {
    uint8_t hdr[sizeof(Header)];
    size_t hdr_got = 0;
    Header h{};
    uint64_t sent = 0;
    bool sending = false;
  };
  std::map<int, Conn> conns;
  std::vector<uint8_t> chunk(1 << 16);
  uint64_t served = 0, requests = 0, accepted = 0;
  auto close_conn = [&](int fd) {
    loop.unwatch(fd);
    ::close(fd);
    conns.erase(fd);
  };
  // a connection ready (edge-triggered): it reads a request's header, then
  // sends the answer, as far as the socket takes
  auto on_conn = [&](int fd) {
    auto it = conns.find(fd);
    if (it == conns.end()) return;
    Conn& c = it->second;
    bool closed = false;
    for (bool progress = true; progress && !closed;) {
      progress = false;
      if (!c.sending) {
        ssize_t r = ::read(fd, c.hdr + c.hdr_got, sizeof(Header) - c.hdr_got);
        if (r == 0 || (r < 0 && errno != EAGAIN)) closed = true;
        if (r > 0) {
          c.hdr_got += static_cast<size_t>(r);
          progress = true;
          if (c.hdr_got == sizeof(Header)) {
            std::memcpy(&c.h, c.hdr, sizeof(Header));
            if (c.h.magic != kReqMagic) closed = true;
            c.sending = true;
            c.sent = 0;
            c.hdr_got = 0;
            ++requests;
          }
        }
      } else {
        Pattern p(seed, c.h.flow);
        size_t len = static_cast<size_t>(std::min<uint64_t>(chunk.size(), c.h.bytes - c.sent));
        if (len == 0) {
          c.sending = false;
          progress = true;
          continue;
        }
        p.fill(c.sent, std::span<uint8_t>(chunk.data(), len));
        ssize_t w = ::send(fd, chunk.data(), len, MSG_NOSIGNAL);
        if (w < 0 && errno != EAGAIN) closed = true;
        if (w > 0) {
          c.sent += static_cast<uint64_t>(w);
          served += static_cast<uint64_t>(w);
          progress = true;
        }
      }
    }
    if (closed) close_conn(fd);
  };
  (void)loop.watch(ls, EPOLLIN, [&](uint32_t) {
    for (;;) {
      int c = ::accept4(ls, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (c < 0) break;
      ++accepted;
      conns[c];
      (void)loop.watch(c, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, [&on_conn, c](uint32_t) { on_conn(c); });
    }
  });
  loop.run();  // until SIGTERM
  traffic::ServeResult result;
  result.connections = accepted;
  result.requests = requests;
  result.bytes = served;
  std::cout << traffic::line_of(result) << "\n";
  return 0;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// to 0.01 ms: the samples' JSON stays short
std::vector<double> rounded(const std::vector<double>& v) {
  std::vector<double> a;
  a.reserve(v.size());
  for (double x : v) a.push_back(std::round(x * 100) / 100);
  return a;
}

traffic::Percentiles percentiles(const std::vector<double>& v) {
  return {percentile(v, 0.50), percentile(v, 0.99), percentile(v, 1.0)};
}

// fetch: C connections, each sending requests one after another and
// verifying every answer; closed loop (R requests each) or open loop
// (--rate: requests arrive on their own clock and queue for a free
// connection; a request's latency runs from its arrival)
class Fetcher {
 public:
  explicit Fetcher(const traffic::FetchArgs& a) : a_(a), open_loop_(a.rate.has_value()) {}

  // 0 when every request was answered and verified; 1 otherwise; 2: bad input
  int run() {
    if (!target_of(a_.to, a_.port, a_.kMode, dst_, dlen_)) return 2;
    if (a_.arrival != "poisson" && a_.arrival != "constant") {
      std::cerr << "lanes-traffic fetch: --arrival " << a_.arrival << ": expected poisson or constant\n";
      return 2;
    }
    if (a_.conns < 1 || (open_loop_ ? *a_.rate <= 0 || a_.duration < 0 : a_.requests < 1)) {
      std::cerr << "lanes-traffic fetch: --conns, and --requests or --rate, must be positive (--duration at least 0)\n";
      return 2;
    }
    if (open_loop_)
      arrivals_ = lanes::scenarios::arrival_times(
          *a_.rate, a_.duration,
          a_.arrival == "constant" ? lanes::scenarios::Arrival::constant : lanes::scenarios::Arrival::poisson, a_.seed);
    if (!wait_for_go(a_.wait_go)) return 1;
    if (!stop_on_signals(loop_, "fetch")) return 1;
    t0_ = Clock::now();
    open_all();
    for (size_t i = 0; i < conns_.size(); ++i)
      if (!conns_[i].finished)
        (void)loop_.watch(conns_[i].fd, EPOLLOUT | EPOLLIN | EPOLLRDHUP, [this, i](uint32_t e) { on_conn(i, e); });
    if (open_loop_) {
      if (arrivals_.empty()) arrive();
      else loop_.at(at(arrivals_[0]), [this] { arrive(); });
    }
    // --timeout: what has not finished by then counts as failed
    loop_.at(at(a_.timeout), [this] { loop_.stop(); });
    if (open_ > 0) loop_.run();
    auto result = collect();
    std::cout << traffic::line_of(result) << "\n";
    return result.connection_errors || result.outstanding ? 1 : 0;
  }

 private:
  struct Conn {
    int fd = -1;
    int done_requests = 0;
    uint32_t id = 0;
    bool req_sent = false, connected = false, finished = false;
    std::string error;
    std::optional<Verifier> v;
    Clock::time_point req_start;  // closed loop: when sent; open loop: when the request arrived
  };

  // S seconds after the start
  Clock::time_point at(double s) const {
    return t0_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  }
  bool any_outstanding() const {
    return std::any_of(conns_.begin(), conns_.end(), [](const Conn& o) { return o.req_sent; });
  }

  // --bind A,B,...: connection i from the (i mod n)-th, as an application
  // that binds its connections to NICs does
  void open_all() {
    conns_.resize(static_cast<size_t>(a_.conns));
    std::vector<std::string> binds = a_.bind ? split_list(*a_.bind) : std::vector<std::string>{};
    for (size_t i = 0; i < conns_.size(); ++i) {
      Conn& c = conns_[i];
      std::optional<std::string> bind;
      if (!binds.empty()) bind = binds[i % binds.size()];
      c.fd = open_to(dst_, dlen_, SOCK_STREAM, bind, c.error);
      if (c.fd < 0) c.finished = true;
      else ++open_;
    }
  }

  void ended(Conn& c) {
    c.finished = true;
    loop_.unwatch(c.fd);
    if (--open_ == 0) loop_.stop();
  }
  void fail(Conn& c, const std::string& why) {
    c.error = why;
    ended(c);
  }

  // connection IDX ready for EVENTS: its request goes out once it is
  // connected, and its answer is verified as it arrives; then the next
  void on_conn(size_t idx, uint32_t events) {
    Conn& c = conns_[idx];
    if (c.finished) return;
    if (events & EPOLLERR) {
      int soerr = 0;
      socklen_t sl = sizeof soerr;
      ::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
      return fail(c, std::string(c.connected ? "" : "connect: ") + std::strerror(soerr ? soerr : EIO));
    }
    if (!c.req_sent && c.connected && (events & (EPOLLRDHUP | EPOLLHUP)))
      return fail(c, "the server closed the connection");  // an idle one, between requests
    if (!c.req_sent && (events & EPOLLOUT) && !send_request(c, idx)) return;
    if (c.req_sent && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP))) read_answer(c);
  }

  // C's next request, once it is connected (open loop: the oldest queued);
  // false when it sent none
  bool send_request(Conn& c, size_t idx) {
    if (!c.connected)  // SYN to established: the handshake, with any SYN the network lost
      connect_ms_.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0_).count());
    c.connected = true;
    if (open_loop_ && queued_.empty()) {  // idle until a request arrives
      (void)loop_.rewatch(c.fd, EPOLLIN | EPOLLRDHUP);
      return false;
    }
    c.id = open_loop_ ? next_id_++
                      : static_cast<uint32_t>(idx * static_cast<size_t>(a_.requests) +
                                              static_cast<size_t>(c.done_requests));
    Header h{kReqMagic, c.id, a_.bytes};
    ssize_t w = ::send(c.fd, &h, sizeof h, MSG_NOSIGNAL);  // 16 bytes into an empty buffer
    if (w != static_cast<ssize_t>(sizeof h)) {
      fail(c, std::string("send: ") + std::strerror(errno));
      return false;
    }
    c.req_sent = true;
    c.req_start = Clock::now();
    if (open_loop_) {
      c.req_start = queued_.front();
      queued_.pop_front();
    }
    c.v.emplace(a_.seed, c.id);
    (void)loop_.rewatch(c.fd, EPOLLIN | EPOLLRDHUP);
    return true;
  }

  // the answer's bytes as they arrive, each verified; a whole one is a request done
  void read_answer(Conn& c) {
    for (;;) {
      uint64_t want = a_.bytes - c.v->verified();
      ssize_t r = ::read(c.fd, buf_.data(), static_cast<size_t>(std::min<uint64_t>(buf_.size(), want)));
      if (r < 0 && errno == EAGAIN) return;
      if (r <= 0)
        return fail(c, r == 0 ? "the server closed the connection" : std::string("read: ") + std::strerror(errno));
      if (!c.v->feed(std::span<const uint8_t>(buf_.data(), static_cast<size_t>(r)))) {
        all_ok_ = false;
        return fail(c, "wrong byte at offset " + std::to_string(*c.v->first_bad()));
      }
      if (c.v->verified() == a_.bytes) return answered(c);
    }
  }

  void answered(Conn& c) {
    verified_ += a_.bytes;
    latencies_ms_.push_back(std::chrono::duration<double, std::milli>(Clock::now() - c.req_start).count());
    issue_s_.push_back(std::chrono::duration<double>(c.req_start - t0_).count());
    ++c.done_requests;
    c.req_sent = false;
    if (open_loop_) {
      // the next queued request, or idle; all issued and answered: done
      if (arrived_ == arrivals_.size() && queued_.empty() && !any_outstanding())
        loop_.stop();
      else
        (void)loop_.rewatch(c.fd, queued_.empty() ? EPOLLIN | EPOLLRDHUP : EPOLLOUT | EPOLLIN | EPOLLRDHUP);
    } else if (c.done_requests == a_.requests) {
      ended(c);
      ::close(c.fd);
      c.fd = -1;
    } else {
      (void)loop_.rewatch(c.fd, EPOLLOUT | EPOLLIN | EPOLLRDHUP);
    }
  }

  // open loop: each arrival queues a request and wakes an idle connection
  void arrive() {
    auto now = Clock::now();
    while (arrived_ < arrivals_.size() && at(arrivals_[arrived_]) <= now) queued_.push_back(at(arrivals_[arrived_++]));
    // as many idle connections woken as requests wait (each takes one), in
    // turn from the one after the last woken: a scan from the first would
    // give the first idle connection nearly every request of a light load,
    // and with it one NIC's path
    size_t wake = queued_.size(), n = conns_.size();
    for (size_t k = 0; k < n && wake > 0; ++k) {
      size_t i = (next_wake_ + k) % n;
      auto& c = conns_[i];
      if (c.connected && !c.req_sent && !c.finished) {
        (void)loop_.rewatch(c.fd, EPOLLOUT | EPOLLIN | EPOLLRDHUP);
        --wake;
        next_wake_ = (i + 1) % n;
      }
    }
    if (arrived_ < arrivals_.size())
      loop_.at(at(arrivals_[arrived_]), [this] { arrive(); });
    else if (queued_.empty() && !any_outstanding())
      loop_.stop();
  }

  // what the connections did; closes their sockets
  traffic::FetchResult collect() {
    traffic::FetchResult result;
    result.seconds = std::chrono::duration<double>(Clock::now() - t0_).count();
    int failures = 0, connect_failures = 0, done = 0;
    for (auto& c : conns_) {
      if (open_loop_ ? c.error.empty() : c.done_requests == a_.requests) {
        ++done;
      } else {
        ++failures;
        if (!c.connected) ++connect_failures;
        if (result.errors.size() < 10) result.errors.push_back(c.error.empty() ? std::string("timed out") : c.error);
      }
      if (c.fd >= 0) ::close(c.fd);
    }
    result.connections = a_.conns;
    result.completed = done;
    result.connection_errors = failures;
    result.connect_failures = connect_failures;
    result.requests = latencies_ms_.size();
    result.verified_bytes = verified_;
    result.all_verified = all_ok_ && failures == 0;
    result.latency_ms = percentiles(latencies_ms_);
    result.connect_ms = percentiles(connect_ms_);
    result.latency_samples_ms = rounded(latencies_ms_);
    result.connect_samples_ms = rounded(connect_ms_);
    if (open_loop_) {
      result.issued = arrivals_.size();
      result.outstanding = arrivals_.size() - latencies_ms_.size();
      result.issue_s = rounded(issue_s_);
      if (result.outstanding && result.errors.size() < 10)
        result.errors.push_back(std::to_string(result.outstanding) + " requests still unanswered at the timeout");
    }
    return result;
  }

  const traffic::FetchArgs& a_;
  const bool open_loop_;
  sockaddr_storage dst_{};
  socklen_t dlen_ = 0;
  std::vector<double> arrivals_;  // open loop: when each request arrives, seconds after the start
  EventLoop loop_;
  Clock::time_point t0_;
  std::vector<Conn> conns_;
  int open_ = 0;  // connections not yet ended
  std::vector<double> latencies_ms_, connect_ms_, issue_s_;
  std::deque<Clock::time_point> queued_;  // open loop: arrived, waiting for a connection
  size_t next_wake_ = 0;                  // open loop: where the next scan for an idle connection starts
  size_t arrived_ = 0;
  uint32_t next_id_ = 0;
  std::vector<uint8_t> buf_ = std::vector<uint8_t>(1 << 16);
  uint64_t verified_ = 0;
  bool all_ok_ = true;
};

int fetch_main(const traffic::FetchArgs& a) { return Fetcher(a).run(); }

struct Probe {
  uint32_t magic;
  uint32_t path;
  uint64_t seq;
};

int probe_recv_main(const traffic::ProbeRecvArgs& args) {
  const int port = args.port;
  int fd = ::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int zero = 0;
  ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  int rcvbuf = 4 << 20;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(static_cast<uint16_t>(port));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a)) {
    std::cerr << "lanes-traffic probe-recv: port " << port << ": " << std::strerror(errno) << "\n";
    return 1;
  }
  EventLoop loop;
  if (!stop_on_signals(loop, "probe-recv")) return 1;
  struct Path {
    uint64_t received = 0, max_seq = 0;
    Clock::time_point first, last;
    double longest_gap_ms = 0;
    double gap_at_s = 0;
  };
  std::map<uint32_t, Path> paths;
  auto t0 = Clock::now();
  auto count = [&](const Probe& p) {
    auto now = Clock::now();
    Path& x = paths[p.path];
    if (x.received == 0) {
      x.first = now;
    } else {
      double gap = std::chrono::duration<double, std::milli>(now - x.last).count();
      if (gap > x.longest_gap_ms) {
        x.longest_gap_ms = gap;
        x.gap_at_s = std::chrono::duration<double>(x.last - t0).count();
      }
    }
    x.last = now;
    ++x.received;
    x.max_seq = std::max(x.max_seq, p.seq);
  };
  // one probe from the socket (FLAGS: MSG_DONTWAIT while the loop runs); false: none came
  auto receive = [&](int flags) {
    Probe p{};
    ssize_t r = ::recv(fd, &p, sizeof p, flags);
    if (r < 0) return false;
    if (r == static_cast<ssize_t>(sizeof p) && p.magic == kProbeMagic) count(p);
    return true;
  };
  (void)loop.watch(fd, EPOLLIN, [&](uint32_t) {
    while (receive(MSG_DONTWAIT)) {
    }
  });
  loop.run();  // until SIGTERM
  // then the probes still in flight (the sender has stopped): until none
  // arrived for 50 ms, for at most a second
  timeval quiet{0, 50000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &quiet, sizeof quiet);
  for (auto until = Clock::now() + std::chrono::seconds(1); Clock::now() < until && receive(0);) {
  }
  traffic::ProbeRecvResult result;
  for (const auto& [id, x] : paths) {
    uint64_t sent = x.max_seq + 1;
    result.paths.push_back({id, x.received, sent > x.received ? sent - x.received : 0, x.longest_gap_ms, x.gap_at_s});
  }
  std::cout << traffic::line_of(result) << "\n";
  return 0;
}

int probe_send_main(const traffic::ProbeSendArgs& a) {
  sockaddr_storage dst{};
  socklen_t dlen = 0;
  if (!target_of(a.to, a.port, a.kMode, dst, dlen)) return 2;
  const int npaths = a.paths;
  const double rate = a.rate, seconds = a.seconds;
  const auto& binds = a.bind;
  if (npaths < 1 || rate <= 0) {
    std::cerr << "lanes-traffic probe-send: --paths and --rate must be positive\n";
    return 2;
  }
  std::vector<int> fds;
  for (int i = 0; i < npaths; ++i) {
    std::string why;
    std::optional<std::string> bind;
    if (!binds.empty()) bind = binds[static_cast<size_t>(i) % binds.size()];
    int fd = open_to(dst, dlen, SOCK_DGRAM, bind, why);
    if (fd < 0) {
      std::cerr << "lanes-traffic probe-send: " << why << "\n";
      return 1;
    }
    fds.push_back(fd);
  }
  EventLoop loop;
  if (!stop_on_signals(loop, "probe-send")) return 1;
  auto period = std::chrono::nanoseconds(static_cast<int64_t>(1e9 / rate));
  auto t0 = Clock::now();
  uint64_t seq = 0, send_errors = 0;
  // probe SEQ on every path at t0 + SEQ periods (late ticks catch up: the rate holds)
  std::function<void()> tick = [&] {
    if (seconds > 0 && std::chrono::duration<double>(Clock::now() - t0).count() >= seconds) return loop.stop();
    for (int i = 0; i < npaths; ++i) {
      Probe p{kProbeMagic, static_cast<uint32_t>(i), seq};
      if (::send(fds[static_cast<size_t>(i)], &p, sizeof p, 0) < 0) ++send_errors;
    }
    ++seq;
    loop.at(t0 + period * static_cast<int64_t>(seq), tick);
  };
  loop.at(t0, tick);
  loop.run();  // until SIGTERM or --seconds
  for (int fd : fds) ::close(fd);
  traffic::ProbeSendResult result;
  result.to = a.to;
  result.paths = npaths;
  result.sent_per_path = seq;
  result.send_errors = send_errors;
  std::cout << traffic::line_of(result) << "\n";
  return 0;
}

// MODE_MAIN with the flags WORDS read as its mode's (2 and why when they are not)
template <class A> int run_mode(std::span<const std::string> words, int (*mode_main)(const A&)) {
  std::string error;
  auto a = traffic::parse<A>(words, error);
  if (!a) {
    std::cerr << "lanes-traffic " << A::kMode << ": " << error << "\n";
    return 2;
  }
  g_congestion = a->congestion;
  g_window = a->window.value_or(0);
  g_mptcp = a->mptcp;
  return mode_main(*a);
}

}  // namespace

int main(int argc, char** argv) {
  struct sigaction sa {};
  sa.sa_handler = on_term;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  std::string mode = argc > 1 ? argv[1] : "";
  const std::vector<std::string> words(argv + std::min(argc, 2), argv + argc);
  if (mode == "recv") return run_mode(words, recv_main);
  if (mode == "send") return run_mode(words, send_main);
  if (mode == "serve") return run_mode(words, serve_main);
  if (mode == "fetch") return run_mode(words, fetch_main);
  if (mode == "probe-recv") return run_mode(words, probe_recv_main);
  if (mode == "probe-send") return run_mode(words, probe_send_main);
  if (mode == "collective") return run_mode(words, collective_main);
  if (mode == "training") return run_mode(words, training_main);
  if (mode == "store") return run_mode(words, store_main);
  if (mode == "trace") return run_mode(words, trace_main);
  std::cerr << "usage: lanes-traffic recv --port P [--seed S] [--flows N] [--from ADDR]\n"
               "       lanes-traffic send --to ADDR[,ADDR...] --port P --flows F --bytes N [--seed S] [--bind ADDR[,ADDR...]] [--wait-go] "
               "[--interval-ms MS]\n"
               "       lanes-traffic send --listen --port P --flows F --bytes N [--accept-timeout S] ... (recv --from ADDR "
               "opens the flows)\n"
               "       lanes-traffic serve --port P [--seed S]\n"
               "       lanes-traffic fetch --to ADDR --port P --conns C --requests R --bytes N [--seed S] "
               "[--bind ADDR[,ADDR...]] [--timeout SECONDS] [--wait-go]\n"
               "       lanes-traffic fetch --to ADDR --port P --conns C --rate Q --bytes N [--duration S] "
               "[--arrival poisson|constant] [--seed S] [--timeout SECONDS]\n"
               "       lanes-traffic probe-recv --port P\n"
               "       lanes-traffic probe-send --to ADDR --port P --paths N --rate HZ [--bind A,B,...] "
               "[--seconds S]\n"
               "       lanes-traffic collective --op allreduce|reducescatter|allgather --rank R --ranks N --to NEXT "
               "--port P --bytes S [--channels C] [--iterations I] [--warmup W] [--piece B] [--seed S] "
               "[--timeout SECONDS] [--wait-go]\n"
               "       lanes-traffic training --rank R --ranks N --to NEXT --port P --gradient BYTES --steps S "
               "--compute-ms MS [--checkpoint-every K --checkpoint BYTES --store ADDR --store-port Q] [--channels C] "
               "[--incarnation I] [--resume] [--seed S] [--timeout SECONDS] [--wait-go]\n"
               "       lanes-traffic store --port P --ranks N [--seed S]\n"
               "       lanes-traffic trace --trace FILE --rank R --ranks N --to NEXT --port P [--channels C] "
               "[--iterations I] [--scale X] [--seed S] [--timeout SECONDS] [--wait-go] [--peers A0,A1,... "
               "--mesh-port M] (every rank's address and the port of its direct connections: all-to-all, gather, "
               "scatter, sends)\n"
               "every mode: [--congestion NAME] sets the TCP congestion control of its TCP sockets;\n"
               "            [--mptcp] makes them MPTCP sockets (the namespace's endpoints make the subflows);\n"
               "            [--window BYTES] sets their send and receive buffers (the kernel keeps twice it): a flow's "
               "window\n";
  return mode == "--help" || mode == "-h" ? 0 : 2;
}
