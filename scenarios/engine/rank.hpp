#pragma once
// One rank of a ring collective over TCP (collective.cpp's mode, and each
// step of a training job's, training.cpp): C channels (connections) to the
// next rank and C from the previous one, the buffer moved piece by piece,
// each piece forwarded as soon as it arrived and was reduced.
//
// A channel takes the next piece that is ready whenever its socket has room
// below TCP_NOTSENT_LOWAT, so a channel on a faster path carries more: the
// pieces go at the rate each path drains, as the sum of the paths allows.

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "engine.hpp"
#include "lanes/scenarios/collective.hpp"
#include "lanes/scenarios/pattern.hpp"
#include "lanes/scenarios/traffic_results.hpp"

namespace lanes::traffic_engine {

namespace coll = lanes::scenarios::collective;
namespace traffic = lanes::scenarios::traffic;
using testbed::EventLoop;

constexpr uint32_t kHelloMagic = 0x4c4e4331;  // "LNC1": a channel's first bytes
constexpr uint32_t kPieceMagic = 0x4c4e4332;  // "LNC2": a piece

struct Hello {
  uint32_t magic, rank, channel, ranks;
};
struct PieceHeader {
  uint32_t magic, iteration, step, length;
  uint64_t offset;  // in the buffer
};

inline double mono_s() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// One collective of a rank's sequence: OP of BYTES (a broadcast from ROOT).
struct CollectiveSpec {
  coll::Op op = coll::Op::allreduce;
  uint64_t bytes = 0;
  int root = 0;
};

class Rank {
 public:
  // ITERATIONS times the same collective (collective and training modes):
  // the buffer is prepared once, the last output verified
  Rank(coll::Op op, int rank, int ranks, int channels, const coll::Layout& l, uint64_t seed, int iterations)
      : rank_(rank), ranks_(ranks), channels_(channels), lowat_(coll::notsent_lowat(l.piece)), seed_(seed),
        total_iterations_(iterations) {
    plans_.push_back(make_plan({op, l.bytes, 0}, l));
    res_.op = coll::op_name(op);
    res_.bytes = l.bytes;
    res_.expected_bytes = plans_[0].send_bytes * static_cast<uint64_t>(iterations);
    init_result();
  }
  // a sequence of collectives, one after the other on the same channels
  // (the trace mode): each prepares its input as it begins and has its
  // output verified as it ends (checked_bytes and first_bad_offset sum and
  // keep the first); bytes are rounded to the ring's layout (at least 8
  // a rank), pieces of PIECE bytes
  Rank(const std::vector<CollectiveSpec>& seq, int rank, int ranks, int channels, uint64_t piece, uint64_t seed)
      : rank_(rank), ranks_(ranks), channels_(channels), lowat_(coll::notsent_lowat(piece)), seed_(seed),
        total_iterations_(static_cast<int>(seq.size())), verify_each_(true) {
    for (const auto& c : seq) {
      int n = coll::chunks(c.op, ranks);
      uint64_t unit = 8 * static_cast<uint64_t>(n);
      plans_.push_back(make_plan(c, coll::layout(std::max(unit, (c.bytes + unit - 1) / unit * unit), n, piece)));
      res_.expected_bytes += plans_.back().send_bytes;
      res_.bytes = std::max(res_.bytes, plans_.back().l.bytes);
    }
    res_.op = "sequence";
    init_result();
  }

  // the input, and for all-gather the rank's chunk already in its output
  // (a broadcast's root: its input is what it sends, from its output)
  void prepare() {
    if (plans_.empty()) return;
    const Plan& p = plans_.front();
    uint64_t words = 0;
    for (const auto& q : plans_) words = std::max(words, q.l.bytes / 8);
    out_.assign(words, 0);
    if (p.op != coll::Op::allgather && p.op != coll::Op::broadcast) in_.resize(words);
    fill_input(p);
  }

  bool run(const sockaddr_storage& next, socklen_t nlen, int listener, double timeout_s) {
    if (!stop_on_signals(loop_, "collective")) return false;
    send_.resize(static_cast<size_t>(channels_));
    for (int c = 0; c < channels_; ++c) {
      Send& s = send_[static_cast<size_t>(c)];
      std::string why;
      s.fd = open_to(next, nlen, SOCK_STREAM, std::nullopt, why);
      if (s.fd < 0) return fail("channel " + std::to_string(c) + ": " + why);
      int low = lowat_, one = 1;
      ::setsockopt(s.fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &low, sizeof low);
      ::setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      s.hello = {kHelloMagic, static_cast<uint32_t>(rank_), static_cast<uint32_t>(c), static_cast<uint32_t>(ranks_)};
      size_t i = static_cast<size_t>(c);
      (void)loop_.watch(s.fd, EPOLLOUT | EPOLLRDHUP, [this, i](uint32_t e) { on_send(i, e); });
    }
    (void)loop_.watch(listener, EPOLLIN, [this, listener](uint32_t) { on_accept(listener); });
    loop_.at(EventLoop::Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)),
             [this, timeout_s] { fail("not done after " + std::to_string(static_cast<int>(timeout_s)) + " s"); });
    loop_.run();
    if (!failed_ && !done_) fail("stopped before the end");
    for (auto& s : send_) {
      tcp_info ti{};
      socklen_t tl = sizeof ti;
      if (s.fd >= 0 && ::getsockopt(s.fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) == 0) res_.retransmits += ti.tcpi_total_retrans;
      res_.channel_bytes.push_back(s.payload);
    }
    return !failed_;
  }

  // every word of the output the collective fills, against what it must be
  // (the sequence's: each was as it ended)
  void verify() {
    if (failed_ || !done_) return;
    if (!verify_each_) check_output(plans_.front());
    res_.verified = res_.first_bad_offset < 0 && res_.sent_bytes == res_.expected_bytes &&
                    res_.received_bytes == expected_received_;
  }

  traffic::CollectiveResult& result() { return res_; }

  // A training job's step around each collective: BEFORE_STEP(I) returns how
  // long to wait before collective I begins (the step's compute; pieces of
  // it that arrive meanwhile wait), AFTER_STEP(I) runs once collective I ended,
  // and may block (a checkpoint: the ring waits with it).
  std::function<double(int)> before_step;
  std::function<void(int)> after_step;
  // The trace mode: collective I begins only once MAY_BEGIN(I) says so;
  // until then it waits for release(), which the caller calls from a
  // callback of the rank's loop. The loop keeps running after the last
  // collective while KEEP_RUNNING says so (stop() ends it).
  std::function<bool(int)> may_begin;
  std::function<bool()> keep_running;
  // once the channels are up both ways, before the first collective may begin
  std::function<void()> on_ready;
  // ends the run as failed (a replay's own error), WHY its reason
  void abort(const std::string& why) { fail(why); }
  void release() {
    if (!holding_ || !waiting_release_) return;
    if (may_begin && !may_begin(iteration_)) return;
    waiting_release_ = false;
    holding_ = false;
    begin_iteration();
    pump();
  }
  void stop() { loop_.stop(); }
  EventLoop& loop() { return loop_; }
  bool done() const { return done_; }
  bool failed() const { return failed_; }
  // when each collective began (its inputs ready and released), on the monotonic clock
  const std::vector<double>& begin_s() const { return begin_s_; }

 private:
  struct Send {
    int fd = -1;
    bool connected = false;
    Hello hello{};
    size_t hello_sent = 0;
    bool busy = false;  // a piece is going out
    PieceHeader h{};
    const uint8_t* body = nullptr;
    size_t done = 0;  // of header and body
    uint64_t payload = 0;
    uint32_t watched = EPOLLOUT | EPOLLRDHUP;  // what the loop watches it for
  };
  struct Recv {
    int fd = -1;
    bool hello_ok = false;
    Hello hello{};
    size_t hello_got = 0;
    PieceHeader h{};
    size_t hdr_got = 0;
    size_t step = 0;  // the piece's step in this rank's schedule
    bool paused = false;  // a piece of the next collective: it waits for this one's end
    bool closed = false;  // the previous rank ended it
    uint8_t* body = nullptr;  // where the piece's bytes go (null: no piece begun)
    size_t body_got = 0;
    std::vector<uint64_t> scratch;  // a reduced piece, before it is added
  };

  bool fail(const std::string& why) {
    if (!failed_) res_.errors.push_back(why);
    failed_ = true;
    ++res_.connection_errors;
    loop_.stop();
    return false;
  }

  void on_accept(int listener) {
    for (;;) {
      int fd = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;
      if (recv_.size() >= static_cast<size_t>(channels_)) {  // not one of the ring's: turned away
        ::close(fd);
        continue;
      }
      recv_.emplace_back();
      recv_.back().fd = fd;
      size_t i = recv_.size() - 1;
      (void)loop_.watch(fd, EPOLLIN | EPOLLRDHUP, [this, i](uint32_t) { on_recv(i); });
    }
  }

  void maybe_ready() {
    if (ready_) return;
    for (const auto& s : send_)
      if (!s.connected || s.hello_sent < sizeof(Hello)) return;
    if (recv_.size() < static_cast<size_t>(channels_)) return;
    for (const auto& r : recv_)
      if (!r.hello_ok) return;
    ready_ = true;
    res_.ready_s = mono_s();
    if (on_ready) on_ready();
    if (failed_ || done_) return;
    if (total_iterations_ == 0) {  // nothing to move: the channels were the work
      finish();
      return;
    }
    if (start_iteration()) pump();
  }

  // collective iteration_ begins, after BEFORE_STEP's pause if it asks one.
  // true: it began now (the caller pumps its first pieces)
  bool start_iteration() {
    if (may_begin && !may_begin(iteration_)) {
      holding_ = waiting_release_ = true;
      return false;
    }
    double pause = before_step ? before_step(iteration_) : 0;
    if (pause <= 0) {
      begin_iteration();
      return true;
    }
    holding_ = true;
    loop_.at(EventLoop::Clock::now() + std::chrono::microseconds(static_cast<int64_t>(pause * 1e6)), [this] {
      holding_ = false;
      begin_iteration();
      pump();
    });
    return false;
  }

  void begin_iteration() {
    const Plan& p = cur();
    if (verify_each_ && iteration_ > 0) fill_input(p);
    begin_s_.push_back(mono_s());
    size_t m = p.steps.size(), ppc = p.l.pieces_per_chunk;
    applied_.assign(m * ppc, false);
    received_ = sent_ = 0;
    if (m > 0 && p.steps[0].send)
      for (uint64_t j = 0; j < ppc; ++j) ready_pieces_.push_back({0, j});
    for (size_t i = 0; i < recv_.size(); ++i)
      if (recv_[i].paused) {
        recv_[i].paused = false;
        if (!begin_piece(recv_[i])) return;
        (void)loop_.rewatch(recv_[i].fd, EPOLLIN | EPOLLRDHUP);
      }
  }

  bool last_iteration() const { return iteration_ == total_iterations_ - 1; }
  // everything of the last collective arrived: the previous rank may close
  // (a ring without collectives, the trace mode's: nothing to receive, whenever the previous rank ends)
  bool received_all() const {
    return done_ || total_iterations_ == 0 || (last_iteration() && received_ == cur().recv_pieces);
  }
  bool sent_all() const {
    if (done_ || total_iterations_ == 0) return true;
    if (!last_iteration() || sent_ < cur().send_pieces) return false;
    for (const auto& s : send_)
      if (s.busy) return false;
    return true;
  }

  // a collective that has sent and received everything ends; the next begins
  // (the caller pumps its first pieces)
  void maybe_end_iteration() {
    if (holding_ || done_ || failed_) return;
    const Plan& p = cur();
    if (received_ < p.recv_pieces || sent_ < p.send_pieces) return;
    for (const auto& s : send_)
      if (s.busy) return;
    res_.iteration_end_s.push_back(mono_s());
    if (verify_each_) check_output(p);
    if (after_step) after_step(iteration_);
    if (++iteration_ < total_iterations_) {
      start_iteration();  // the caller pumps
      return;
    }
    finish();
  }

  void finish() {
    done_ = true;
    for (auto& s : send_) ::shutdown(s.fd, SHUT_WR);
    if (!keep_running || !keep_running()) loop_.stop();
  }

  // hands ready pieces to the channels with room, each in turn from the one
  // after the last served (a scan from channel 0 would give the first
  // channels every piece whenever pieces are scarce), and writes what their
  // sockets take
  void pump() {
    size_t c = send_.size();
    for (size_t n = 0; n < c && !failed_; ++n) {
      size_t i = (next_channel_ + n) % c;
      Send& s = send_[i];
      if (!s.connected || s.hello_sent < sizeof(Hello)) continue;
      uint64_t taken = pieces_taken_;
      if (!write_some(s)) return;
      if (pieces_taken_ != taken) next_channel_ = (i + 1) % c;
      watch_send(s);
    }
  }

  // writable matters to a channel with a piece going out, or one that waits
  // for room while pieces wait for it (never to an idle one: it would wake
  // the loop for nothing)
  // (an epoll_ctl only when that changes: pump() asks for every channel on every piece)
  void watch_send(Send& s) {
    uint32_t want = s.busy || !ready_pieces_.empty() ? EPOLLOUT | EPOLLRDHUP : EPOLLRDHUP;
    if (want == s.watched) return;
    s.watched = want;
    (void)loop_.rewatch(s.fd, want);
  }

  // the socket has less than the low-water mark unsent: a piece may join it
  // (sendmsg takes far more, up to the whole send buffer, which would put
  // pieces on a channel long before it can send them)
  bool room(const Send& s) const {
    int unsent = 0;
    return ::ioctl(s.fd, SIOCOUTQNSD, &unsent) != 0 || unsent < lowat_;
  }

  // false: the channel failed
  bool write_some(Send& s) {
    for (;;) {
      if (!s.busy) {
        if (ready_pieces_.empty() || !room(s)) return true;
        auto [k, j] = ready_pieces_.front();
        ready_pieces_.pop_front();
        const Plan& p = cur();
        const coll::RingStep& st = p.steps[k];
        uint64_t off = static_cast<uint64_t>(st.send_chunk) * p.l.chunk + j * p.l.piece;
        // the step as the next rank counts it: its M-th receiving step takes this one's M-th sending step
        s.h = {kPieceMagic, static_cast<uint32_t>(iteration_), static_cast<uint32_t>(p.send_ordinal[k]),
               static_cast<uint32_t>(p.l.piece_bytes(j)), off};
        // the first reduce-scatter step sends the input; every later step what arrived
        const uint64_t* src = k == 0 && st.reduce ? in_.data() : out_.data();
        s.body = reinterpret_cast<const uint8_t*>(src) + off;
        s.done = 0;
        s.busy = true;
        ++pieces_taken_;
      }
      size_t total = sizeof(PieceHeader) + s.h.length;
      iovec iov[2];
      int n = 0;
      if (s.done < sizeof(PieceHeader))
        iov[n++] = {reinterpret_cast<uint8_t*>(&s.h) + s.done, sizeof(PieceHeader) - s.done};
      size_t body_done = s.done > sizeof(PieceHeader) ? s.done - sizeof(PieceHeader) : 0;
      iov[n++] = {const_cast<uint8_t*>(s.body) + body_done, s.h.length - body_done};
      msghdr mh{};
      mh.msg_iov = iov;
      mh.msg_iovlen = static_cast<size_t>(n);
      ssize_t w = ::sendmsg(s.fd, &mh, MSG_NOSIGNAL);
      if (w < 0) {
        if (errno == EAGAIN) return true;
        return fail(std::string("send: ") + std::strerror(errno));
      }
      size_t before = s.done;
      s.done += static_cast<size_t>(w);
      size_t payload = s.done > sizeof(PieceHeader) ? s.done - std::max(before, sizeof(PieceHeader)) : 0;
      s.payload += payload;
      res_.sent_bytes += payload;
      if (s.done < total) return true;  // the socket is full
      s.busy = false;
      ++sent_;
      maybe_end_iteration();
      if (failed_ || done_) return !failed_;
    }
  }

  void on_send(size_t i, uint32_t events) {
    Send& s = send_[i];
    if (events & (EPOLLERR | EPOLLHUP | EPOLLRDHUP)) {
      int soerr = 0;
      socklen_t sl = sizeof soerr;
      ::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
      if (!soerr && sent_all()) {  // the next rank has everything and ended
        loop_.unwatch(s.fd);
        return;
      }
      fail("channel " + std::to_string(i) + " to the next rank: " +
           (soerr ? std::strerror(soerr) : "closed by the next rank"));
      return;
    }
    s.connected = true;
    if (s.hello_sent < sizeof(Hello)) {
      ssize_t w = ::send(s.fd, reinterpret_cast<uint8_t*>(&s.hello) + s.hello_sent, sizeof(Hello) - s.hello_sent,
                         MSG_NOSIGNAL);
      if (w < 0 && errno != EAGAIN) {
        fail("channel " + std::to_string(i) + ": send: " + std::strerror(errno));
        return;
      }
      if (w > 0) s.hello_sent += static_cast<size_t>(w);
      if (s.hello_sent < sizeof(Hello)) return;
      watch_send(s);
      maybe_ready();
      return;
    }
    if (!ready_) return;
    if (!write_some(s)) return;
    if (!done_) {
      pump();  // the piece it finished may have ended a collective
      watch_send(s);
    }
  }

  // the piece R's header announces: checked against the schedule, and where its bytes go
  bool begin_piece(Recv& r) {
    const PieceHeader& h = r.h;
    if (h.magic != kPieceMagic) return fail("a channel from the previous rank sent a malformed piece");
    if (static_cast<int>(h.iteration) > iteration_ || holding_ || done_) {  // the previous rank is a collective ahead
      r.paused = true;
      (void)loop_.rewatch(r.fd, 0);
      return true;
    }
    const Plan& p = cur();
    const coll::Layout& l = p.l;
    if (static_cast<int>(h.iteration) < iteration_ || h.step >= p.recv_steps.size())
      return fail("a piece out of the schedule (collective " + std::to_string(h.iteration) + ", step " +
                  std::to_string(h.step) + ")");
    size_t k = p.recv_steps[h.step];
    r.step = k;
    uint64_t base = static_cast<uint64_t>(p.steps[k].recv_chunk) * l.chunk;
    uint64_t j = h.offset >= base ? (h.offset - base) / l.piece : l.pieces_per_chunk;
    if (h.offset < base || j >= l.pieces_per_chunk || h.offset != base + j * l.piece ||
        h.length != l.piece_bytes(j) || applied_[k * l.pieces_per_chunk + j])
      return fail("a piece that is not the schedule's next (step " + std::to_string(k) + ", offset " +
                  std::to_string(h.offset) + ", " + std::to_string(h.length) + " bytes)");
    if (p.steps[k].reduce) {
      r.scratch.resize(l.piece / 8);
      r.body = reinterpret_cast<uint8_t*>(r.scratch.data());
    } else {
      r.body = reinterpret_cast<uint8_t*>(out_.data()) + h.offset;
    }
    r.body_got = 0;
    return true;
  }

  void piece_arrived(Recv& r) {
    const PieceHeader& h = r.h;
    const Plan& p = cur();
    size_t k = r.step;
    uint64_t j = (h.offset - static_cast<uint64_t>(p.steps[k].recv_chunk) * p.l.chunk) / p.l.piece;
    if (p.steps[k].reduce) {  // this rank's part added to what came
      uint64_t w0 = h.offset / 8, words = h.length / 8;
      for (uint64_t i = 0; i < words; ++i) out_[w0 + i] = in_[w0 + i] + r.scratch[i];
    }
    applied_[k * p.l.pieces_per_chunk + j] = true;
    res_.received_bytes += h.length;
    ++received_;
    r.body = nullptr;
    r.hdr_got = 0;
    if (k + 1 < p.steps.size() && p.steps[k + 1].send) ready_pieces_.push_back({k + 1, j});
  }

  void on_recv(size_t i) {
    Recv& r = recv_[i];
    for (int round = 0; round < 64 && !failed_ && !done_ && !r.paused; ++round) {
      uint8_t* dst;
      size_t want;
      if (!r.hello_ok) {
        dst = reinterpret_cast<uint8_t*>(&r.hello) + r.hello_got;
        want = sizeof(Hello) - r.hello_got;
      } else if (!r.body) {
        dst = reinterpret_cast<uint8_t*>(&r.h) + r.hdr_got;
        want = sizeof(PieceHeader) - r.hdr_got;
      } else {
        dst = r.body + r.body_got;
        want = r.h.length - r.body_got;
      }
      ssize_t n = ::read(r.fd, dst, want);
      if (n < 0 && errno == EAGAIN) break;
      // a channel the previous rank closed between pieces: the rest comes on
      // the others (it ends each as it has nothing more for it)
      if (n == 0 && r.hello_ok && !r.body && r.hdr_got == 0) {
        loop_.unwatch(r.fd);
        r.closed = true;
        for (const auto& o : recv_)
          if (!o.closed) return;
        if (!received_all()) fail("the previous rank closed its channels before the end");
        return;
      }
      if (n <= 0) {
        fail(n == 0 ? "the previous rank closed a channel before the end" : std::string("read: ") + std::strerror(errno));
        return;
      }
      size_t got = static_cast<size_t>(n);
      if (!r.hello_ok) {
        r.hello_got += got;
        if (r.hello_got < sizeof(Hello)) continue;
        int left = (rank_ + ranks_ - 1) % ranks_;
        if (r.hello.magic != kHelloMagic || static_cast<int>(r.hello.rank) != left ||
            static_cast<int>(r.hello.ranks) != ranks_) {
          fail("a connection that is not a channel of rank " + std::to_string(left));
          return;
        }
        r.hello_ok = true;
        maybe_ready();
      } else if (!r.body) {
        r.hdr_got += got;
        if (r.hdr_got < sizeof(PieceHeader)) continue;
        if (!ready_) {  // pieces before this rank's own channels are up: they wait, as a future collective's do
          r.paused = true;
          (void)loop_.rewatch(r.fd, 0);
          return;
        }
        if (!begin_piece(r)) return;
      } else {
        r.body_got += got;
        if (r.body_got < r.h.length) continue;
        piece_arrived(r);
        maybe_end_iteration();
        if (!done_) pump();
      }
    }
  }

  // one collective as this rank runs it
  struct Plan {
    coll::Op op;
    int root = 0;
    coll::Layout l;
    std::vector<coll::RingStep> steps;
    std::vector<size_t> send_ordinal;  // step → its place among the sending steps
    std::vector<size_t> recv_steps;    // the receiving steps, in order
    uint64_t send_pieces = 0, recv_pieces = 0, send_bytes = 0, recv_bytes = 0;
  };

  Plan make_plan(const CollectiveSpec& c, const coll::Layout& l) {
    Plan p{c.op, c.root, l, coll::ring_schedule(c.op, ranks_, rank_, c.root), {}, {}};
    size_t sends = 0;
    for (size_t k = 0; k < p.steps.size(); ++k) {
      p.send_ordinal.push_back(sends);
      if (p.steps[k].send) ++sends;
      if (p.steps[k].recv) p.recv_steps.push_back(k);
    }
    p.send_pieces = sends * l.pieces_per_chunk;
    p.recv_pieces = p.recv_steps.size() * l.pieces_per_chunk;
    p.send_bytes = sends * l.chunk;
    p.recv_bytes = p.recv_steps.size() * l.chunk;
    return p;
  }

  void init_result() {
    res_.rank = rank_;
    res_.ranks = ranks_;
    res_.channels = channels_;
    uint64_t per = 0;
    for (const auto& p : plans_) per += p.recv_bytes;
    // the same collective again and again, or the sequence once
    expected_received_ = verify_each_ ? per : per * static_cast<uint64_t>(total_iterations_);
  }

  const Plan& cur() const { return plans_[verify_each_ ? static_cast<size_t>(iteration_) : 0]; }

  // each collective of a sequence has data of its own: an output left by
  // the one before never passes for it
  uint64_t data_seed() const {
    return verify_each_ ? lanes::scenarios::splitmix64(seed_ + static_cast<uint64_t>(iteration_)) : seed_;
  }

  void fill_input(const Plan& p) {
    auto [a, b] = coll::input_words(p.op, rank_, p.l, p.root);
    uint64_t seed = data_seed();
    if (p.op == coll::Op::allgather || p.op == coll::Op::broadcast) {
      for (uint64_t i = a; i < b; ++i) out_[i] = coll::input_word(seed, rank_, i);
    } else {
      if (in_.size() < p.l.bytes / 8) in_.resize(p.l.bytes / 8);
      for (uint64_t i = a; i < b; ++i) in_[i] = coll::input_word(seed, rank_, i);
    }
  }

  void check_output(const Plan& p) {
    auto [a, b] = coll::output_words(p.op, rank_, p.l, p.root);
    coll::Expected want(p.op, data_seed(), ranks_, p.l.chunk / 8, p.root);
    for (uint64_t i = a; i < b; ++i)
      if (out_[i] != want(i)) {
        if (res_.first_bad_offset < 0) res_.first_bad_offset = static_cast<int64_t>(i * 8);
        break;
      }
    res_.checked_bytes += (b - a) * 8;
  }

  int rank_, ranks_, channels_;
  int lowat_;
  uint64_t seed_;
  int total_iterations_;
  bool verify_each_ = false;
  std::vector<Plan> plans_;
  uint64_t expected_received_ = 0;
  std::vector<double> begin_s_;
  std::vector<uint64_t> in_, out_;
  EventLoop loop_;
  std::vector<Send> send_;
  std::vector<Recv> recv_;
  std::deque<std::pair<size_t, uint64_t>> ready_pieces_;  // (step, piece)
  std::vector<bool> applied_;
  uint64_t received_ = 0, sent_ = 0;
  int iteration_ = 0;
  size_t next_channel_ = 0;
  uint64_t pieces_taken_ = 0;
  bool ready_ = false, done_ = false, failed_ = false;
  bool holding_ = false;  // BEFORE_STEP's pause: the next collective has not begun
  bool waiting_release_ = false;  // MAY_BEGIN said not yet
  traffic::CollectiveResult res_;
};


}  // namespace lanes::traffic_engine
