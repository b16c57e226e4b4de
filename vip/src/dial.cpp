#include "lanes/vip/dial.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <utility>

namespace lanes::vip {
namespace {

// An IPv4 or IPv6 socket address of ADDR:PORT; false if ADDR is neither.
bool sockaddr_of(const std::string& addr, uint16_t port, sockaddr_storage& ss, socklen_t& len) {
  std::memset(&ss, 0, sizeof ss);
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  if (inet_pton(AF_INET, addr.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    len = sizeof *v4;
    return true;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET6, addr.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    len = sizeof *v6;
    return true;
  }
  return false;
}

}  // namespace

Dial::~Dial() {
  if (fd_ >= 0) ::close(fd_);
}

Dial::Dial(Dial&& o) noexcept { *this = std::move(o); }

Dial& Dial::operator=(Dial&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    state_ = o.state_;
    error_ = std::move(o.error_);
    remote_ = std::move(o.remote_);
    timeout_ = o.timeout_;
    deadline_ = o.deadline_;
  }
  return *this;
}

void Dial::fail(std::string why) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  state_ = State::failed;
  error_ = std::move(why);
}

Dial Dial::start(const std::string& local, const std::string& remote, uint16_t port,
                 std::chrono::milliseconds timeout, Clock::time_point now) {
  Dial d;
  d.remote_ = fmt::format("{}:{}", remote.find(':') == std::string::npos ? remote : "[" + remote + "]", port);
  d.timeout_ = timeout;
  d.deadline_ = now + timeout;
  sockaddr_storage la{}, ra{};
  socklen_t ll = 0, rl = 0;
  if (!sockaddr_of(remote, port, ra, rl)) {
    d.fail("connect to " + remote + ": not an IP address");
    return d;
  }
  if (!local.empty() && (!sockaddr_of(local, 0, la, ll) || la.ss_family != ra.ss_family)) {
    d.fail("bind to " + local + ": not an address of " + remote + "'s family");
    return d;
  }
  d.fd_ = ::socket(ra.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (d.fd_ < 0) {
    d.fail(std::string("socket: ") + std::strerror(errno));
    return d;
  }
  int one = 1;
  ::setsockopt(d.fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (!local.empty() && ::bind(d.fd_, reinterpret_cast<sockaddr*>(&la), ll) != 0) {
    d.fail(fmt::format("bind to {}: {}", local, std::strerror(errno)));
    return d;
  }
  d.state_ = State::pending;
  if (::connect(d.fd_, reinterpret_cast<sockaddr*>(&ra), rl) == 0)
    d.state_ = State::connected;
  else if (errno != EINPROGRESS)
    d.fail(fmt::format("connect to {}: {}", d.remote_, std::strerror(errno)));
  return d;
}

Dial::State Dial::poll(Clock::time_point now) {
  if (state_ != State::pending) return state_;
  pollfd p{fd_, POLLOUT, 0};
  if (::poll(&p, 1, 0) > 0) {
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &soerr, &sl);
    if (soerr) {
      fail(fmt::format("connect to {}: {}", remote_, std::strerror(soerr)));
    } else {
      state_ = State::connected;
    }
    return state_;
  }
  if (now >= deadline_)
    fail(fmt::format("connect to {} timed out after {:.1f} s", remote_, timeout_.count() / 1000.0));
  return state_;
}

int Dial::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

std::chrono::milliseconds DialBackoff::next() {
  auto base = cur_;
  cur_ = std::min(cur_ * 2, max_);
  std::uniform_real_distribution<double> spread(0.0, jitter_);
  return std::chrono::milliseconds(static_cast<int64_t>(static_cast<double>(base.count()) * (1.0 + spread(rng_))));
}

}  // namespace lanes::vip
