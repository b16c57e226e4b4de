#include "engine.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>

namespace lanes::traffic_engine {

using testbed::EventLoop;

std::atomic<bool> g_stop{false};
std::string g_congestion;
uint64_t g_window = 0;
bool g_mptcp = false;

int stream_protocol() { return g_mptcp ? IPPROTO_MPTCP : 0; }
extern "C" void on_term(int) { g_stop = true; }

bool wait_for_go(bool wait_go) {
  if (!wait_go) return true;
  sigset_t go;
  sigemptyset(&go);
  sigaddset(&go, SIGUSR1);
  sigaddset(&go, SIGTERM);
  ::sigprocmask(SIG_BLOCK, &go, nullptr);
  if (g_stop) return false;  // a SIGTERM before the mask was set
  int sig = 0;
  ::sigwait(&go, &sig);
  if (sig == SIGTERM) return false;
  sigdelset(&go, SIGUSR1);
  ::sigprocmask(SIG_UNBLOCK, &go, nullptr);
  return true;
}

bool make_addr(const std::string& a, int port, sockaddr_storage& ss, socklen_t& len) {
  std::memset(&ss, 0, sizeof ss);
  if (a.find(':') != std::string::npos) {
    auto* s6 = reinterpret_cast<sockaddr_in6*>(&ss);
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons(static_cast<uint16_t>(port));
    len = sizeof *s6;
    return inet_pton(AF_INET6, a.c_str(), &s6->sin6_addr) == 1;
  }
  auto* s4 = reinterpret_cast<sockaddr_in*>(&ss);
  s4->sin_family = AF_INET;
  s4->sin_port = htons(static_cast<uint16_t>(port));
  len = sizeof *s4;
  return inet_pton(AF_INET, a.c_str(), &s4->sin_addr) == 1;
}

bool tune_stream(int fd, std::string& why) {
  if (g_window) {
    int w = static_cast<int>(std::min<uint64_t>(g_window, INT32_MAX / 2));
    for (int opt : {SO_SNDBUF, SO_RCVBUF})
      if (::setsockopt(fd, SOL_SOCKET, opt, &w, sizeof w) != 0) {
        why = std::string("--window: ") + std::strerror(errno);
        return false;
      }
  }
  if (g_congestion.empty()) return true;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, g_congestion.data(), static_cast<socklen_t>(g_congestion.size())) ==
      0)
    return true;
  int err = errno;
  std::string have;
  std::ifstream f("/proc/sys/net/ipv4/tcp_available_congestion_control");
  std::getline(f, have);
  why = "TCP congestion control " + g_congestion + ": " + std::strerror(err) +
        (have.empty() ? std::string() : " (this kernel has: " + have + ")");
  return false;
}

int open_to(const sockaddr_storage& dst, socklen_t dlen, int type, const std::optional<std::string>& bind,
            std::string& why) {
  int fd = ::socket(dst.ss_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, type == SOCK_STREAM ? stream_protocol() : 0);
  if (fd < 0) {
    why = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  if (type == SOCK_STREAM && !tune_stream(fd, why)) {
    ::close(fd);
    return -1;
  }
  if (bind) {
    sockaddr_storage src{};
    socklen_t slen = 0;
    if (!make_addr(*bind, 0, src, slen) || ::bind(fd, reinterpret_cast<sockaddr*>(&src), slen) != 0) {
      why = "bind " + *bind + ": " + std::strerror(errno);
      ::close(fd);
      return -1;
    }
  }
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&dst), dlen) != 0 && errno != EINPROGRESS) {
    why = std::string("connect: ") + std::strerror(errno);
    ::close(fd);
    return -1;
  }
  return fd;
}

bool target_of(const std::string& to, int port, std::string_view mode, sockaddr_storage& dst, socklen_t& dlen) {
  if (to.empty()) {
    std::cerr << "lanes-traffic " << mode << ": --to ADDR is required\n";
    return false;
  }
  if (!make_addr(to, port, dst, dlen)) {
    std::cerr << "lanes-traffic " << mode << ": bad address " << to << "\n";
    return false;
  }
  return true;
}

int listen_tcp(int port) {
  int ls = ::socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, stream_protocol());
  if (ls < 0) {
    std::cerr << "lanes-traffic: a listener on port " << port << ": " << std::strerror(errno) << "\n";
    return -1;
  }
  int one = 1, zero = 0;
  ::setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  ::setsockopt(ls, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  // what it accepts inherits it: the answers a server sends
  if (std::string why; !tune_stream(ls, why)) {
    std::cerr << "lanes-traffic: " << why << "\n";
    ::close(ls);
    return -1;
  }
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(static_cast<uint16_t>(port));
  if (::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) || ::listen(ls, 4096)) {
    std::cerr << "lanes-traffic: port " << port << ": " << std::strerror(errno) << "\n";
    ::close(ls);
    return -1;
  }
  return ls;
}

bool stop_on_signals(EventLoop& loop, const char* mode) {
  if (!loop.ok() || !loop.stop_on_signals()) {
    std::cerr << "lanes-traffic " << mode << ": cannot set up its event loop: " << std::strerror(errno) << "\n";
    return false;
  }
  if (g_stop) loop.stop();
  return true;
}

}  // namespace lanes::traffic_engine
