// lanes-traffic: the traffic engine's sender and receiver. Every TCP flow
// carries a header {magic, flow id, length} and then the seeded pattern of
// lanes::scenarios::Pattern, which the receiver verifies byte by byte.
//
//   lanes-traffic recv --port P [--seed S] [--flows N]
//       accepts flows until N have finished (or SIGTERM); prints one JSON
//       object: per flow the bytes verified and whether it was complete.
//   lanes-traffic send --to ADDR --port P --flows F --bytes N [--seed S]
//                      [--bind ADDR] [--interval-ms 100]
//       sends F flows of N bytes each; prints per flow bytes, seconds,
//       retransmits and errors, and the bytes per interval.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "lanes/scenarios/pattern.hpp"

using lanes::scenarios::Pattern;
using lanes::scenarios::Verifier;
using Clock = std::chrono::steady_clock;

namespace {

constexpr uint32_t kMagic = 0x4c4e5331;  // "LNS1"
std::atomic<bool> g_stop{false};
extern "C" void on_term(int) { g_stop = true; }

struct Header {
  uint32_t magic;
  uint32_t flow;
  uint64_t bytes;
};

std::optional<std::string> arg(int argc, char** argv, const std::string& name) {
  for (int i = 2; i + 1 < argc; ++i)
    if (argv[i] == name) return std::string(argv[i + 1]);
  return std::nullopt;
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

int recv_main(int argc, char** argv) {
  int port = std::stoi(arg(argc, argv, "--port").value_or("5301"));
  uint64_t seed = std::stoull(arg(argc, argv, "--seed").value_or("1"));
  int expect = std::stoi(arg(argc, argv, "--flows").value_or("0"));
  int ls = ::socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1, zero = 0;
  ::setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  ::setsockopt(ls, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(static_cast<uint16_t>(port));
  if (::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) || ::listen(ls, 1024)) {
    std::cerr << "lanes-traffic recv: port " << port << ": " << std::strerror(errno) << "\n";
    return 1;
  }
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = ls;
  ::epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
  struct Conn {
    uint8_t hdr[sizeof(Header)];
    size_t hdr_got = 0;
    Header h{};
    std::optional<Verifier> v;
    Clock::time_point start;
  };
  std::map<int, Conn> conns;
  nlohmann::json flows = nlohmann::json::array();
  int finished = 0;
  std::vector<uint8_t> buf(1 << 18);
  while (!g_stop && (expect == 0 || finished < expect)) {
    epoll_event evs[64];
    int n = ::epoll_wait(ep, evs, 64, 200);
    for (int i = 0; i < n; ++i) {
      int fd = evs[i].data.fd;
      if (fd == ls) {
        for (;;) {
          int c = ::accept4(ls, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (c < 0) break;
          epoll_event e{};
          e.events = EPOLLIN | EPOLLRDHUP;
          e.data.fd = c;
          ::epoll_ctl(ep, EPOLL_CTL_ADD, c, &e);
          conns[c].start = Clock::now();
        }
        continue;
      }
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
      if (closed) {
        bool ok = c.v && !c.v->first_bad() && c.v->verified() == c.h.bytes;
        nlohmann::json f = {{"flow", c.v ? c.h.flow : 0}, {"expected", c.v ? c.h.bytes : 0},
                            {"verified", c.v ? c.v->verified() : 0}, {"complete", ok},
                            {"seconds", std::chrono::duration<double>(Clock::now() - c.start).count()}};
        if (c.v && c.v->first_bad()) f["first_bad_offset"] = *c.v->first_bad();
        flows.push_back(f);
        ::close(fd);  // the sender sees EOF: everything arrived
        conns.erase(fd);
        ++finished;
      }
    }
  }
  uint64_t verified = 0;
  bool all = true;
  for (const auto& f : flows) {
    verified += f["verified"].get<uint64_t>();
    all = all && f["complete"].get<bool>();
  }
  std::cout << nlohmann::json{{"role", "recv"}, {"flows", flows}, {"verified_bytes", verified},
                              {"all_complete", all && (expect == 0 || finished >= expect)}}
                   .dump()
            << "\n";
  return all ? 0 : 1;
}

int send_main(int argc, char** argv) {
  auto to = arg(argc, argv, "--to");
  if (!to) {
    std::cerr << "lanes-traffic send: --to ADDR is required\n";
    return 2;
  }
  int port = std::stoi(arg(argc, argv, "--port").value_or("5301"));
  int nflows = std::stoi(arg(argc, argv, "--flows").value_or("1"));
  uint64_t bytes = std::stoull(arg(argc, argv, "--bytes").value_or("10000000"));
  uint64_t seed = std::stoull(arg(argc, argv, "--seed").value_or("1"));
  int interval_ms = std::stoi(arg(argc, argv, "--interval-ms").value_or("100"));
  auto bind_to = arg(argc, argv, "--bind");
  sockaddr_storage dst{};
  socklen_t dlen = 0;
  if (!make_addr(*to, port, dst, dlen)) {
    std::cerr << "lanes-traffic send: bad address " << *to << "\n";
    return 2;
  }
  struct Flow {
    int fd = -1;
    uint32_t id = 0;
    Pattern pattern{0, 0};
    uint64_t sent = 0;  // pattern bytes sent
    size_t hdr_sent = 0;
    bool done = false, eof = false;
    std::string error;
    Clock::time_point start, end;
    std::vector<uint64_t> per_interval;
    uint32_t retransmits = 0;
  };
  std::vector<Flow> flows(static_cast<size_t>(nflows));
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  auto t0 = Clock::now();
  for (int i = 0; i < nflows; ++i) {
    Flow& f = flows[static_cast<size_t>(i)];
    f.id = static_cast<uint32_t>(i);
    f.pattern = Pattern(seed, f.id);
    f.fd = ::socket(dst.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (bind_to) {
      sockaddr_storage src{};
      socklen_t slen = 0;
      make_addr(*bind_to, 0, src, slen);
      ::bind(f.fd, reinterpret_cast<sockaddr*>(&src), slen);
    }
    if (::connect(f.fd, reinterpret_cast<sockaddr*>(&dst), dlen) != 0 && errno != EINPROGRESS) {
      f.error = std::string("connect: ") + std::strerror(errno);
      f.done = f.eof = true;
      continue;
    }
    f.start = Clock::now();
    epoll_event e{};
    e.events = EPOLLOUT | EPOLLIN | EPOLLRDHUP;
    e.data.u32 = static_cast<uint32_t>(i);
    ::epoll_ctl(ep, EPOLL_CTL_ADD, f.fd, &e);
  }
  std::vector<uint8_t> chunk(1 << 16);
  int open_flows = nflows;
  for (auto& f : flows)
    if (f.eof) --open_flows;
  while (open_flows > 0 && !g_stop) {
    epoll_event evs[64];
    int n = ::epoll_wait(ep, evs, 64, 200);
    auto now = Clock::now();
    size_t slot = static_cast<size_t>(std::chrono::duration_cast<std::chrono::milliseconds>(now - t0).count() / interval_ms);
    for (int i = 0; i < n; ++i) {
      Flow& f = flows[evs[i].data.u32];
      if (f.eof) continue;
      if (evs[i].events & EPOLLERR) {
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        ::getsockopt(f.fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
        f.error = std::strerror(soerr ? soerr : EIO);
        f.eof = true;
        --open_flows;
        continue;
      }
      if (!f.done && (evs[i].events & EPOLLOUT)) {
        while (!f.done) {
          if (f.hdr_sent < sizeof(Header)) {
            Header h{kMagic, f.id, bytes};
            ssize_t w = ::send(f.fd, reinterpret_cast<uint8_t*>(&h) + f.hdr_sent, sizeof h - f.hdr_sent, MSG_NOSIGNAL);
            if (w < 0) break;
            f.hdr_sent += static_cast<size_t>(w);
            continue;
          }
          size_t len = static_cast<size_t>(std::min<uint64_t>(chunk.size(), bytes - f.sent));
          f.pattern.fill(f.sent, std::span<uint8_t>(chunk.data(), len));
          ssize_t w = ::send(f.fd, chunk.data(), len, MSG_NOSIGNAL);
          if (w < 0) {
            if (errno != EAGAIN) {
              f.error = std::string("send: ") + std::strerror(errno);
              f.done = f.eof = true;
              --open_flows;
            }
            break;
          }
          f.sent += static_cast<uint64_t>(w);
          if (f.per_interval.size() <= slot) f.per_interval.resize(slot + 1, 0);
          f.per_interval[slot] += static_cast<uint64_t>(w);
          if (f.sent == bytes) {
            f.done = true;
            ::shutdown(f.fd, SHUT_WR);
            epoll_event e{};
            e.events = EPOLLIN | EPOLLRDHUP;
            e.data.u32 = evs[i].data.u32;
            ::epoll_ctl(ep, EPOLL_CTL_MOD, f.fd, &e);
          }
        }
      }
      if (evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP)) {
        uint8_t b[256];
        ssize_t r = ::read(f.fd, b, sizeof b);
        if (r == 0 || (r < 0 && errno != EAGAIN)) {
          if (r < 0) f.error = std::string("read: ") + std::strerror(errno);
          else if (!f.done) f.error = "the receiver closed early";
          tcp_info ti{};
          socklen_t tl = sizeof ti;
          if (::getsockopt(f.fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) == 0) f.retransmits = ti.tcpi_total_retrans;
          f.end = Clock::now();
          f.eof = true;
          --open_flows;
        }
      }
    }
  }
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  nlohmann::json out = nlohmann::json::array();
  uint64_t total = 0;
  int errors = 0;
  size_t slots = 0;
  for (auto& f : flows) {
    total += f.sent;
    errors += !f.error.empty() || f.sent != bytes;
    slots = std::max(slots, f.per_interval.size());
    out.push_back({{"flow", f.id}, {"bytes", f.sent}, {"retransmits", f.retransmits}, {"error", f.error},
                   {"seconds", std::chrono::duration<double>(f.end - f.start).count()},
                   {"per_interval", f.per_interval}});
    if (f.fd >= 0) ::close(f.fd);
  }
  // steady rate: the interval sums after the first second, without the last interval
  std::vector<uint64_t> sums(slots, 0);
  for (const auto& f : flows)
    for (size_t i = 0; i < f.per_interval.size(); ++i) sums[i] += f.per_interval[i];
  size_t skip = static_cast<size_t>(1000 / std::max(1, interval_ms));
  double steady = 0;
  if (slots > skip + 1) {
    uint64_t b = 0;
    for (size_t i = skip; i + 1 < slots; ++i) b += sums[i];
    steady = static_cast<double>(b) * 8 / (static_cast<double>(slots - 1 - skip) * interval_ms / 1000.0) / 1e9;
  }
  std::cout << nlohmann::json{{"role", "send"},       {"flows", out},        {"bytes", total},
                              {"steady_gbps", steady}, {"interval_bytes", sums},
                              {"seconds", secs},      {"gbps", secs > 0 ? total * 8 / secs / 1e9 : 0},
                              {"connection_errors", errors}, {"interval_ms", interval_ms}}
                   .dump()
            << "\n";
  return errors ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  struct sigaction sa {};
  sa.sa_handler = on_term;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "recv") return recv_main(argc, argv);
  if (mode == "send") return send_main(argc, argv);
  std::cerr << "usage: lanes-traffic recv --port P [--seed S] [--flows N]\n"
               "       lanes-traffic send --to ADDR --port P --flows F --bytes N [--seed S] [--bind ADDR] "
               "[--interval-ms MS]\n";
  return mode == "--help" || mode == "-h" ? 0 : 2;
}
