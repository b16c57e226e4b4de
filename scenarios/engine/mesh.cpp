#include "mesh.hpp"

#include <linux/sockios.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "engine.hpp"
#include "lanes/scenarios/collective.hpp"

namespace lanes::traffic_engine {

namespace coll = lanes::scenarios::collective;
using testbed::EventLoop;

Mesh::Mesh(EventLoop& loop, int rank, int ranks, int per_peer, uint64_t piece, uint64_t seed)
    : loop_(loop),
      rank_(rank),
      ranks_(ranks),
      per_peer_(std::max(1, per_peer)),
      piece_(std::max<uint64_t>(8, piece / 8 * 8)),
      seed_(seed),
      // a connection takes a piece once less than 16 KiB is unsent: the
      // pieces of a block go to all the peer's connections, not the first
      lowat_(coll::notsent_lowat(16 * 1024)),
      queue_(static_cast<size_t>(ranks)) {}

Mesh::~Mesh() {
  for (auto& o : outs_)
    if (o.fd >= 0) ::close(o.fd);
  for (auto& in : ins_)
    if (in.fd >= 0) ::close(in.fd);
}

bool Mesh::start(const std::vector<Addr>& peers, int listener) {
  listener_ = listener;
  for (int p = 0; p < ranks_; ++p) {
    if (p == rank_) continue;
    for (int c = 0; c < per_peer_; ++c) {
      std::string why;
      const Addr& a = peers.at(static_cast<size_t>(p));
      int fd = open_to(a.ss, a.len, SOCK_STREAM, std::nullopt, why);
      if (fd < 0) {
        fail("connection to rank " + std::to_string(p) + ": " + why);
        return false;
      }
      int low = lowat_, one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &low, sizeof low);
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      Out o;
      o.fd = fd;
      o.peer = p;
      o.hello = {kHelloMagic, static_cast<uint32_t>(rank_), static_cast<uint32_t>(c), static_cast<uint32_t>(ranks_)};
      o.watched = EPOLLOUT | EPOLLRDHUP;
      outs_.push_back(std::move(o));
    }
  }
  for (size_t i = 0; i < outs_.size(); ++i)
    (void)loop_.watch(outs_[i].fd, outs_[i].watched, [this, i](uint32_t e) { on_out(i, e); });
  (void)loop_.watch(listener, EPOLLIN, [this, listener](uint32_t) { on_accept(listener); });
  return true;
}

void Mesh::fail(const std::string& why) {
  if (failed_) return;
  failed_ = true;
  errors_.push_back(why);
  if (on_fail) on_fail(why);
}

void Mesh::on_accept(int listener) {
  size_t want = static_cast<size_t>(per_peer_) * static_cast<size_t>(ranks_ - 1);
  for (;;) {
    int fd = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    if (ins_.size() >= want) {  // not one of the job's: turned away
      ::close(fd);
      continue;
    }
    In in;
    in.fd = fd;
    ins_.push_back(std::move(in));
    size_t i = ins_.size() - 1;
    (void)loop_.watch(fd, EPOLLIN | EPOLLRDHUP, [this, i](uint32_t) { on_in(i); });
  }
}

void Mesh::maybe_ready() {
  if (ready_) return;
  for (const auto& o : outs_)
    if (!o.connected || o.hello_sent < sizeof(Hello)) return;
  if (ins_.size() < static_cast<size_t>(per_peer_) * static_cast<size_t>(ranks_ - 1)) return;
  for (const auto& in : ins_)
    if (!in.hello_ok) return;
  ready_ = true;
  if (listener_ >= 0) loop_.unwatch(listener_);
  if (on_ready) on_ready();
}

void Mesh::send(int peer, uint64_t key, uint64_t bytes, std::function<void()> done) {
  size_t m = messages_.size();
  // pieces small enough that every connection to the peer takes one (a
  // block of an all-to-all is often a piece or less), not below 16 KiB
  uint64_t piece = std::min(std::max<uint64_t>((bytes / static_cast<uint64_t>(per_peer_) + 7) / 8 * 8, 16 * 1024), piece_);
  size_t pieces = bytes == 0 ? 0 : (bytes + piece - 1) / piece;
  messages_.push_back({peer, pieces, std::move(done)});
  for (uint64_t off = 0; off < bytes; off += piece)
    queue_[static_cast<size_t>(peer)].push_back({m, key, off, static_cast<uint32_t>(std::min(piece, bytes - off))});
  if (pieces == 0) {
    loop_.at(EventLoop::Clock::now(), [this, m] {
      if (messages_[m].done) messages_[m].done();
    });
    return;
  }
  pump(peer);
}

void Mesh::expect(int peer, uint64_t key, uint64_t bytes, std::function<void()> done) {
  Expected& e = expected_[{peer, key}];
  if (e.asked) {
    fail("message " + std::to_string(key) + " from rank " + std::to_string(peer) + " expected twice");
    return;
  }
  e.asked = true;
  e.bytes = bytes;
  e.done = std::move(done);
  expected_bytes_ += bytes;
  if (e.got < e.bytes && peer_gone(peer)) {
    fail("rank " + std::to_string(peer) + " closed its connections without message " + std::to_string(key));
    return;
  }
  if (e.got > e.bytes) {
    fail("rank " + std::to_string(peer) + " sent " + std::to_string(e.got) + " bytes of message " + std::to_string(key) +
         ", " + std::to_string(bytes) + " expected");
    return;
  }
  if (e.got == e.bytes) fire(e);
}

void Mesh::fire(Expected& e) {
  if (e.fired) return;
  e.fired = true;
  auto done = e.done;
  loop_.at(EventLoop::Clock::now(), [done] {
    if (done) done();
  });
}

void Mesh::finish() {
  finished_ = true;
  for (auto& o : outs_) ::shutdown(o.fd, SHUT_WR);
}

bool Mesh::peer_gone(int peer) const {
  int open = 0, closed = 0;
  for (const auto& in : ins_)
    if (in.peer == peer) (in.closed ? closed : open)++;
  return closed > 0 && open == 0;
}

bool Mesh::verified() const {
  if (failed_ || !ready_ || first_bad_offset_ >= 0) return false;
  for (const auto& [k, e] : expected_)
    if (!e.asked || e.got != e.bytes) return false;
  for (const auto& m : messages_)
    if (m.pieces_left > 0) return false;
  return true;
}

std::vector<uint64_t> Mesh::connection_bytes() const {
  std::vector<uint64_t> v;
  for (const auto& o : outs_) v.push_back(o.payload);
  return v;
}

uint64_t Mesh::retransmits() const {
  uint64_t n = 0;
  for (const auto& o : outs_) {
    tcp_info ti{};
    socklen_t tl = sizeof ti;
    if (o.fd >= 0 && ::getsockopt(o.fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) == 0) n += ti.tcpi_total_retrans;
  }
  return n;
}

bool Mesh::room(const Out& o) const {
  int unsent = 0;
  return ::ioctl(o.fd, SIOCOUTQNSD, &unsent) != 0 || unsent < lowat_;
}

void Mesh::watch_out(Out& o) {
  uint32_t want = EPOLLRDHUP;
  if (!o.connected || o.hello_sent < sizeof(Hello) || o.busy || !queue_[static_cast<size_t>(o.peer)].empty())
    want |= EPOLLOUT;
  if (want == o.watched) return;
  o.watched = want;
  (void)loop_.rewatch(o.fd, want);
}

// the peer's connections with room each take pieces, in turn
void Mesh::pump(int peer) {
  for (auto& o : outs_) {
    if (failed_) return;
    if (o.peer != peer || !o.connected || o.hello_sent < sizeof(Hello)) continue;
    if (!write_some(o)) return;
    watch_out(o);
  }
}

bool Mesh::write_some(Out& o) {
  auto& q = queue_[static_cast<size_t>(o.peer)];
  for (;;) {
    if (!o.busy) {
      if (q.empty() || !room(o)) return true;
      Piece pc = q.front();
      q.pop_front();
      o.h = {kPieceMagic, pc.length, pc.key, pc.offset};
      o.message = pc.message;
      size_t words = pc.length / 8;
      o.body.resize(words);
      uint64_t w0 = pc.offset / 8;
      for (size_t i = 0; i < words; ++i) o.body[i] = coll::block_word(seed_, pc.key, rank_, o.peer, w0 + i);
      o.done = 0;
      o.busy = true;
    }
    size_t total = sizeof(Header) + o.h.length;
    iovec iov[2];
    int n = 0;
    if (o.done < sizeof(Header)) iov[n++] = {reinterpret_cast<uint8_t*>(&o.h) + o.done, sizeof(Header) - o.done};
    size_t body_done = o.done > sizeof(Header) ? o.done - sizeof(Header) : 0;
    iov[n++] = {reinterpret_cast<uint8_t*>(o.body.data()) + body_done, o.h.length - body_done};
    msghdr mh{};
    mh.msg_iov = iov;
    mh.msg_iovlen = static_cast<size_t>(n);
    ssize_t w = ::sendmsg(o.fd, &mh, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EAGAIN) return true;
      fail("to rank " + std::to_string(o.peer) + ": send: " + std::strerror(errno));
      return false;
    }
    size_t before = o.done;
    o.done += static_cast<size_t>(w);
    size_t payload = o.done > sizeof(Header) ? o.done - std::max(before, sizeof(Header)) : 0;
    o.payload += payload;
    sent_bytes_ += payload;
    if (o.done < total) return true;
    o.busy = false;
    Message& m = messages_[o.message];
    if (--m.pieces_left == 0 && m.done) {
      auto done = m.done;
      loop_.at(EventLoop::Clock::now(), [done] { done(); });
    }
  }
}

void Mesh::on_out(size_t i, uint32_t events) {
  Out& o = outs_[i];
  if (events & (EPOLLERR | EPOLLHUP | EPOLLRDHUP)) {
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    ::getsockopt(o.fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
    if (!soerr && !o.busy && queue_[static_cast<size_t>(o.peer)].empty() && o.connected) {
      loop_.unwatch(o.fd);  // the peer has all it expected and ended
      return;
    }
    fail("connection to rank " + std::to_string(o.peer) + ": " + (soerr ? std::strerror(soerr) : "closed by the peer"));
    return;
  }
  o.connected = true;
  if (o.hello_sent < sizeof(Hello)) {
    ssize_t w =
        ::send(o.fd, reinterpret_cast<uint8_t*>(&o.hello) + o.hello_sent, sizeof(Hello) - o.hello_sent, MSG_NOSIGNAL);
    if (w < 0 && errno != EAGAIN) {
      fail("to rank " + std::to_string(o.peer) + ": send: " + std::strerror(errno));
      return;
    }
    if (w > 0) o.hello_sent += static_cast<size_t>(w);
    if (o.hello_sent < sizeof(Hello)) return;
    watch_out(o);
    maybe_ready();
    if (failed_) return;
  }
  if (!write_some(o)) return;
  watch_out(o);
}

void Mesh::piece_arrived(In& in) {
  const Header& h = in.h;
  uint64_t w0 = h.offset / 8, words = h.length / 8;
  for (uint64_t i = 0; i < words; ++i)
    if (in.body[i] != coll::block_word(seed_, h.key, in.peer, rank_, w0 + i)) {
      if (first_bad_offset_ < 0) first_bad_offset_ = static_cast<int64_t>((w0 + i) * 8);
      fail("a wrong word from rank " + std::to_string(in.peer) + " in message " + std::to_string(h.key) + " at offset " +
           std::to_string((w0 + i) * 8));
      return;
    }
  checked_bytes_ += h.length;
  received_bytes_ += h.length;
  Expected& e = expected_[{in.peer, h.key}];
  e.got += h.length;
  if (e.asked && e.got > e.bytes) {
    fail("rank " + std::to_string(in.peer) + " sent more of message " + std::to_string(h.key) + " than the " +
         std::to_string(e.bytes) + " bytes expected");
    return;
  }
  if (e.asked && e.got == e.bytes) fire(e);
}

void Mesh::on_in(size_t i) {
  In& in = ins_[i];
  for (int round = 0; round < 64 && !failed_; ++round) {
    uint8_t* dst;
    size_t want;
    if (!in.hello_ok) {
      dst = reinterpret_cast<uint8_t*>(&in.hello) + in.hello_got;
      want = sizeof(Hello) - in.hello_got;
    } else if (!in.in_body) {
      dst = reinterpret_cast<uint8_t*>(&in.h) + in.hdr_got;
      want = sizeof(Header) - in.hdr_got;
    } else {
      dst = reinterpret_cast<uint8_t*>(in.body.data()) + in.body_got;
      want = in.h.length - in.body_got;
    }
    ssize_t n = ::read(in.fd, dst, want);
    if (n < 0 && errno == EAGAIN) return;
    if (n == 0 && in.hello_ok && !in.in_body && in.hdr_got == 0) {  // the peer sent all it had
      loop_.unwatch(in.fd);
      in.closed = true;
      // all its connections closed: what is still expected of it never comes
      if (peer_gone(in.peer))
        for (const auto& [k, e] : expected_)
          if (k.first == in.peer && e.asked && e.got < e.bytes) {
            fail("rank " + std::to_string(in.peer) + " closed its connections with message " +
                 std::to_string(k.second) + " incomplete (" + std::to_string(e.got) + " of " + std::to_string(e.bytes) +
                 " bytes)");
            return;
          }
      return;
    }
    if (n <= 0) {
      fail(n == 0 ? "a connection from rank " + std::to_string(in.peer) + " closed inside a piece"
                  : std::string("read: ") + std::strerror(errno));
      return;
    }
    size_t got = static_cast<size_t>(n);
    if (!in.hello_ok) {
      in.hello_got += got;
      if (in.hello_got < sizeof(Hello)) continue;
      int from = static_cast<int>(in.hello.rank);
      if (in.hello.magic != kHelloMagic || static_cast<int>(in.hello.ranks) != ranks_ || from < 0 || from >= ranks_ ||
          from == rank_) {
        fail("a connection that is not one of the job's ranks'");
        return;
      }
      in.peer = from;
      in.hello_ok = true;
      maybe_ready();
    } else if (!in.in_body) {
      in.hdr_got += got;
      if (in.hdr_got < sizeof(Header)) continue;
      if (in.h.magic != kPieceMagic || in.h.length == 0 || in.h.length % 8 != 0 || in.h.length > piece_ ||
          in.h.offset % 8 != 0) {
        fail("a malformed piece from rank " + std::to_string(in.peer));
        return;
      }
      in.body.resize(in.h.length / 8);
      in.body_got = 0;
      in.in_body = true;
    } else {
      in.body_got += got;
      if (in.body_got < in.h.length) continue;
      in.in_body = false;
      in.hdr_got = 0;
      piece_arrived(in);
    }
  }
}

}  // namespace lanes::traffic_engine
