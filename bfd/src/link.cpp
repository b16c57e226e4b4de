#include "lanes/bfd/link.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <functional>

namespace lanes::bfd {

using testbed::errno_error;
using testbed::Fd;
using testbed::os_error;
using testbed::Result;

namespace {

constexpr uint16_t kFirstSourcePort = 49152;  // RFC 5881 §4: 49152-65535
constexpr int kCs6 = 0xc0;                    // DSCP CS6, network control

struct SockAddr {
  sockaddr_storage ss{};
  socklen_t len = 0;
  int family() const { return ss.ss_family; }
};

// A and B name the same host (the ports aside).
bool same_host(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET)
    return reinterpret_cast<const sockaddr_in&>(a).sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in&>(b).sin_addr.s_addr;
  return std::memcmp(&reinterpret_cast<const sockaddr_in6&>(a).sin6_addr,
                     &reinterpret_cast<const sockaddr_in6&>(b).sin6_addr, sizeof(in6_addr)) == 0;
}

std::optional<SockAddr> sockaddr_of(const std::string& addr, uint16_t port) {
  SockAddr a;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&a.ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.ss);
  if (::inet_pton(AF_INET, addr.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    a.len = sizeof(sockaddr_in);
    return a;
  }
  if (::inet_pton(AF_INET6, addr.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    a.len = sizeof(sockaddr_in6);
    return a;
  }
  return std::nullopt;
}

void set_port(SockAddr& a, uint16_t port) {
  if (a.family() == AF_INET)
    reinterpret_cast<sockaddr_in&>(a.ss).sin_port = htons(port);
  else
    reinterpret_cast<sockaddr_in6&>(a.ss).sin6_port = htons(port);
}

// A UDP socket on IFNAME at LOCAL: non-blocking, TTL 255 out, the TTL of
// what comes in reported, and bound even while the address is not yet
// usable (IPv6 duplicate address detection).
Result<Fd> udp_socket(const LinkConfig& cfg, const SockAddr& local, const std::string& what) {
  bool v6 = local.family() == AF_INET6;
  Fd fd(::socket(local.family(), SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return errno_error(what);
  int one = 1, ttl = kTtl, tos = kCs6;
  auto opt = [&](int level, int name, const void* v, socklen_t n) { return ::setsockopt(fd.get(), level, name, v, n) == 0; };
  bool ok = opt(SOL_SOCKET, SO_BINDTODEVICE, cfg.ifname.c_str(), static_cast<socklen_t>(cfg.ifname.size())) &&
            (v6 ? opt(IPPROTO_IPV6, IPV6_UNICAST_HOPS, &ttl, sizeof ttl) &&
                      opt(IPPROTO_IPV6, IPV6_RECVHOPLIMIT, &one, sizeof one) &&
                      opt(IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof tos) &&
                      opt(IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) &&
                      opt(IPPROTO_IPV6, IPV6_FREEBIND, &one, sizeof one)
                : opt(IPPROTO_IP, IP_TTL, &ttl, sizeof ttl) && opt(IPPROTO_IP, IP_RECVTTL, &one, sizeof one) &&
                      opt(IPPROTO_IP, IP_TOS, &tos, sizeof tos) && opt(IPPROTO_IP, IP_FREEBIND, &one, sizeof one)) &&
            opt(SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);  // when each packet arrived
  if (!ok) return errno_error(what + ": socket options");
  return fd;
}

}  // namespace

uint64_t LinkSession::seed() const { return std::hash<std::string>{}(cfg_.ifname + cfg_.local) ^ cfg_.session.local_disc; }

Result<std::unique_ptr<LinkSession>> LinkSession::open(LinkConfig cfg, Clock::time_point now) {
  const std::string what = "BFD on " + cfg.ifname + " (" + cfg.local + " to " + cfg.remote + ")";
  auto local = sockaddr_of(cfg.local, kControlPort);
  auto remote = sockaddr_of(cfg.remote, kControlPort);
  if (!local || !remote) return os_error(EINVAL, what + ": not an address");
  if (local->family() != remote->family()) return os_error(EINVAL, what + ": the two addresses differ in family");
  std::unique_ptr<LinkSession> l(new LinkSession(std::move(cfg), now));
  auto rx = udp_socket(l->cfg_, *local, what);
  if (!rx) return rx.error();
  if (::bind(rx.value().get(), reinterpret_cast<const sockaddr*>(&local->ss), local->len) != 0)
    return errno_error(what + ": binding port 3784");
  auto tx = udp_socket(l->cfg_, *local, what);
  if (!tx) return tx.error();
  // a source port of its own per session (§4), the first free one from a
  // place the discriminator picks
  bool bound = false;
  for (uint32_t i = 0; i < 16384 && !bound; ++i) {
    set_port(*local, static_cast<uint16_t>(kFirstSourcePort + (l->cfg_.session.local_disc + i) % 16384));
    bound = ::bind(tx.value().get(), reinterpret_cast<const sockaddr*>(&local->ss), local->len) == 0;
    if (!bound && errno != EADDRINUSE) return errno_error(what + ": binding a source port");
  }
  if (!bound) return os_error(EADDRINUSE, what + ": no source port free in 49152-65535");
  if (::connect(tx.value().get(), reinterpret_cast<const sockaddr*>(&remote->ss), remote->len) != 0)
    return errno_error(what + ": connecting to the peer's port 3784");
  l->rx_ = std::move(rx).value();
  l->tx_ = std::move(tx).value();
  l->remote_ = remote->ss;
  return l;
}

void LinkSession::send(const Control& c) {
  auto wire = encode(c);
  // a link without carrier refuses; the session's timers carry on
  if (::send(tx_.get(), wire.data(), wire.size(), MSG_DONTWAIT) == static_cast<ssize_t>(wire.size()))
    ++sent_;
  else
    ++send_errors_;
}

bool LinkSession::readable(Clock::time_point now) {
  auto before = session_.state();
  // the kernel stamps packets with the real-time clock: the session's
  // clock is the monotonic one, so a stamp becomes NOW less its age
  timespec real{};
  ::clock_gettime(CLOCK_REALTIME, &real);
  auto real_now = std::chrono::seconds(real.tv_sec) + std::chrono::nanoseconds(real.tv_nsec);
  auto take = [&](const uint8_t* buf, size_t n, msghdr& m, const sockaddr_storage& from) {
    int ttl = -1;
    Clock::time_point arrived = now;
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
      if ((c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TTL) ||
          (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_HOPLIMIT))
        std::memcpy(&ttl, CMSG_DATA(c), sizeof ttl);
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
        timespec ts{};
        std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
        auto age = real_now - (std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
        if (age > Clock::duration::zero()) arrived = now - std::chrono::duration_cast<Clock::duration>(age);
      }
    }
    // RFC 5881 §5: without authentication, only TTL 255 proves the packet
    // was not forwarded
    if (ttl != kTtl) {
      ++dropped_ttl_;
      return;
    }
    if (!same_host(remote_, from)) {
      ++dropped_source_;
      return;
    }
    std::string why;
    auto c = decode(std::span<const uint8_t>(buf, n), &why);
    if (!c) {
      ++dropped_invalid_;
      last_invalid_ = why;
      return;
    }
    // §6.8.6: a Your Discriminator that is not ours selects no session
    if (c->your_disc != 0 && c->your_disc != cfg_.session.local_disc) {
      ++dropped_disc_;
      return;
    }
    ++received_;
    session_.received(*c, arrived);
    follow(std::span<const uint8_t>(buf, n), *c);
  };
  // what waits, a few datagrams a call: a call that returns fewer than it
  // could take has read everything (no call just to hear EAGAIN)
  constexpr unsigned kBatch = 4;
  struct Slot {
    uint8_t buf[128];
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int)) * 2 + CMSG_SPACE(sizeof(timespec))];
    sockaddr_storage from;
    iovec iov;
  };
  Slot slots[kBatch];
  mmsghdr mm[kBatch];
  for (;;) {
    for (unsigned i = 0; i < kBatch; ++i) {
      slots[i].iov = {slots[i].buf, sizeof slots[i].buf};
      mm[i] = {};
      mm[i].msg_hdr.msg_name = &slots[i].from;
      mm[i].msg_hdr.msg_namelen = sizeof slots[i].from;
      mm[i].msg_hdr.msg_iov = &slots[i].iov;
      mm[i].msg_hdr.msg_iovlen = 1;
      mm[i].msg_hdr.msg_control = slots[i].ctl;
      mm[i].msg_hdr.msg_controllen = sizeof slots[i].ctl;
    }
    int n = ::recvmmsg(rx_.get(), mm, kBatch, MSG_DONTWAIT, nullptr);
    if (n <= 0) break;  // EAGAIN: all read (errors on a UDP socket carry nothing to act on)
    for (int i = 0; i < n; ++i) take(slots[i].buf, mm[i].msg_len, mm[i].msg_hdr, slots[i].from);
    if (static_cast<unsigned>(n) < kBatch) break;
  }
  // a Final or a changed state goes out at once
  bool changed = session_.state() != before;
  if (tick(now)) changed = true;
  return changed;
}

bool LinkSession::tick(Clock::time_point now, bool coalesce) {
  auto before = session_.state();
  while (auto c = session_.tick(now, coalesce)) send(*c);
  if (session_.state() != State::up && slot_) slot_->clear();
  return session_.state() != before;
}

void LinkSession::reset(Clock::time_point now) {
  ++resets_;
  session_ = Session(cfg_.session, now, seed() + resets_);
  if (slot_) slot_->clear();
}

testbed::Status LinkSession::use_filter(RxFilter& filter) {
  auto i = filter.attach(rx_.get());
  if (!i) return i.error();
  slot_.emplace(filter, i.value());
  return {};
}

void LinkSession::follow(std::span<const uint8_t> packet, const Control& c) {
  if (!slot_) return;
  // only what the peer sends again and again: Up, no Poll or Final, no
  // authentication, and only once this side is Up too
  bool steady = session_.state() == State::up && c.state == State::up && !c.poll && !c.final && !c.auth &&
                packet.size() == kControlLength;
  if (!steady) {
    slot_->clear();
    expected_.reset();
    return;
  }
  if (slot_->expecting() && expected_ == c) return;
  std::span<const uint8_t> peer;
  if (remote_.ss_family == AF_INET)
    peer = {reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in&>(remote_).sin_addr), 4};
  else
    peer = {reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in6&>(remote_).sin6_addr), 16};
  slot_->expect(packet, peer);
  expected_ = c;
}

bool LinkSession::absorbed(Clock::time_point now) {
  if (!slot_ || !expected_) return false;
  auto t = slot_->taken();
  if (!t) return false;
  auto before = session_.state();
  received_ += t->count;
  absorbed_ += t->count;
  session_.received(*expected_, std::min(t->last, now));
  if (session_.state() != State::up) {
    slot_->clear();
    expected_.reset();
  }
  return session_.state() != before;
}

void LinkSession::admin_down(Clock::time_point now) {
  session_.admin_down(now);
  (void)tick(now);
}

nlohmann::json LinkSession::status() const {
  const auto& s = session_;
  return {{"ifname", cfg_.ifname},
          {"local", cfg_.local},
          {"remote", cfg_.remote},
          {"state", to_string(s.state())},
          {"diag", to_string(s.diag())},
          {"usable", usable()},
          {"local_disc", cfg_.session.local_disc},
          {"remote_disc", s.remote_disc()},
          {"tx_interval_ms", static_cast<double>(s.tx_interval().count()) / 1000.0},
          {"detection_ms", static_cast<double>(s.detection_time().count()) / 1000.0},
          {"transitions", s.transitions()},
          {"received", received_},
          {"absorbed", absorbed_},
          {"sent", sent_},
          {"send_errors", send_errors_},
          {"resets", resets_},
          {"dropped", {{"ttl", dropped_ttl_},
                       {"source", dropped_source_},
                       {"invalid", dropped_invalid_},
                       {"discriminator", dropped_disc_}}},
          {"last_invalid", last_invalid_}};
}

}  // namespace lanes::bfd
