// lanes' delay line (issue 34), measured: on a veth pair between two
// namespaces of its own, for each delay (100 µs, 1 ms, 10 ms, 50 ms),
// without and with a jitter of a tenth of it, and each line rate (10 Mbit/s,
// 100 Mbit/s, 1 Gbit/s and none: the most the machine carries), a bulk TCP
// flow through the delayed side (paced at 80% of the line, so the line's
// own queue adds nothing; unpaced without a line) while 1 000 UDP probes a second, stamped
// with the clock and stamped again by the kernel as they arrive, measure the one-way delay. Printed per row: the
// probes' delay against the configured one (p50, p99 and max error; with
// jitter the spread), probes lost, the flow's rate, and the delay line's
// CPU-seconds per Gbit; then one TCP flow over 10 ms each way at 1 Gbit/s
// against its bandwidth-delay product. A row without the delay line gives
// the veth's own latency, which every row's error includes.
//
// usage: lanes_bench_delay [SECONDS_PER_ROW]   (root; default 2)

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "lanes/testbed/delay_line.hpp"
#include "lanes/testbed/event_loop.hpp"
#include "lanes/testbed/netlink.hpp"
#include "lanes/testbed/netns.hpp"

using namespace lanes::testbed;

namespace {

int64_t mono_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

int sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()); }

struct Pair {
  std::string a = "lbd-" + std::to_string(::getpid()) + "-a", b = "lbd-" + std::to_string(::getpid()) + "-b";
  bool ok = true;
  Pair() {
    for (const auto& c : {"ip netns add " + a, "ip netns add " + b,
                          "ip -n " + a + " link add da type veth peer name db netns " + b,
                          "ip -n " + a + " addr add 198.18.204.0/31 dev da", "ip -n " + b + " addr add 198.18.204.1/31 dev db",
                          "ip netns exec " + a + " sysctl -qw net.ipv6.conf.all.disable_ipv6=1",
                          "ip netns exec " + b + " sysctl -qw net.ipv6.conf.all.disable_ipv6=1",
                          "ip -n " + a + " neigh add 198.18.204.1 lladdr 02:00:00:00:04:02 dev da nud permanent",
                          "ip -n " + b + " neigh add 198.18.204.0 lladdr 02:00:00:00:04:01 dev db nud permanent",
                          "ip -n " + a + " link set da address 02:00:00:00:04:01",
                          "ip -n " + b + " link set db address 02:00:00:00:04:02", "ip -n " + a + " link set da up",
                          "ip -n " + b + " link set db up", "ip -n " + a + " link set lo up", "ip -n " + b + " link set lo up"})
      if (sh(c) != 0) {
        std::fprintf(stderr, "lanes_bench_delay: failed: %s\n", c.c_str());
        ok = false;
        return;
      }
  }
  ~Pair() {
    sh("ip netns del " + a);
    sh("ip netns del " + b);
  }
  int fd(const std::string& ns) const { return ::open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC); }
};

// a socket made inside namespace NS
int socket_in(const Pair& p, const std::string& ns, int type) {
  int nsfd = p.fd(ns), out = -1;
  (void)run_in_netns(
      nsfd,
      [&]() -> Status {
        out = ::socket(AF_INET, type | SOCK_CLOEXEC, 0);
        return {};
      },
      "a socket");
  ::close(nsfd);
  return out;
}

sockaddr_in addr(const char* ip, uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  ::inet_pton(AF_INET, ip, &sa.sin_addr);
  return sa;
}

double pct(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

struct Row {
  double p50 = 0, p99 = 0, max = 0;  // the probes' one-way delay, µs
  uint64_t sent = 0, got = 0;
  double gbps = 0;       // the bulk flow's
  double cpu_s = 0;      // the delay line's thread
};

// SECONDS of a bulk TCP flow a→b and probes a→b at 1 kHz; the delay line (if IMP) on da
Row measure(const Pair& p, const Impairment* imp, uint64_t rate_bps, double seconds) {
  Row row;
  if (rate_bps) {
    int nsfd = p.fd(p.a);
    (void)run_in_netns(
        nsfd,
        [&]() -> Status {
          auto nl = Netlink::open_here(p.a);
          if (!nl) return nl.error();
          auto idx = nl.value().ifindex("da");
          if (!idx) return idx.error();
          return nl.value().set_tbf(idx.value(), rate_bps, "da");
        },
        "a TBF");
    ::close(nsfd);
  }
  EventLoop loop;
  DelayLine line(1);
  int stop = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  std::thread th;
  std::atomic<clockid_t> cpu_clock{0};
  std::atomic<bool> has_clock{false};
  if (imp) {
    int nsfd = p.fd(p.a);
    auto st = line.add(nsfd, "a:da", "da", *imp);
    ::close(nsfd);
    if (!st) {
      std::fprintf(stderr, "lanes_bench_delay: %s\n", st.error().what());
      std::exit(1);
    }
    (void)line.attach(loop);
    (void)loop.watch(stop, EPOLLIN, [&](uint32_t) { loop.stop(); });
    th = std::thread([&] {
      clockid_t c;
      pthread_getcpuclockid(pthread_self(), &c);
      cpu_clock = c;
      has_clock = true;
      loop.run();
    });
    while (!has_clock) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  auto cpu_now = [&] {
    timespec ts{};
    if (!has_clock || ::clock_gettime(cpu_clock.load(), &ts)) return 0.0;
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
  };
  // the bulk flow: b listens, a sends for SECONDS
  int ls = socket_in(p, p.b, SOCK_STREAM);
  int one = 1;
  ::setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  auto la = addr("198.18.204.1", 5001);
  ::bind(ls, reinterpret_cast<sockaddr*>(&la), sizeof la);
  ::listen(ls, 4);
  std::atomic<uint64_t> received{0};
  std::atomic<bool> done{false};
  std::thread rx([&] {
    int c = ::accept(ls, nullptr, nullptr);
    std::vector<char> buf(1 << 20);
    for (ssize_t n; (n = ::read(c, buf.data(), buf.size())) > 0;) received += static_cast<uint64_t>(n);
    ::close(c);
  });
  int tx = socket_in(p, p.a, SOCK_STREAM);
  if (rate_bps) {  // paced below the line, so the TBF's queue (the line's own delay) stays empty
    uint64_t pace = rate_bps / 8 * 8 / 10;
    ::setsockopt(tx, SOL_SOCKET, SO_MAX_PACING_RATE, &pace, sizeof pace);
  }
  ::connect(tx, reinterpret_cast<sockaddr*>(&la), sizeof la);
  std::thread bulk([&] {
    std::vector<char> buf(1 << 20, 'x');
    while (!done) {
      if (::send(tx, buf.data(), buf.size(), MSG_NOSIGNAL) < 0) break;
    }
    ::shutdown(tx, SHUT_WR);
  });
  // probes
  int ptx = socket_in(p, p.a, SOCK_DGRAM), prx = socket_in(p, p.b, SOCK_DGRAM);
  auto pa = addr("198.18.204.1", 9);
  ::bind(prx, reinterpret_cast<sockaddr*>(&pa), sizeof pa);
  std::vector<double> d;
  ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  int64_t start = mono_ns(), next = start, end = start + static_cast<int64_t>(seconds * 1e9);
  double cpu0 = cpu_now();
  uint64_t rx0 = received;
  // each probe's arrival as the kernel stamped it (SO_TIMESTAMPNS: the
  // real-time clock, as the sender's stamp), not when this loop got to it
  int on = 1;
  ::setsockopt(prx, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on);
  auto take = [&] {
    for (;;) {
      int64_t sent_ns = 0, at = -1;
      if (recv_stamped(prx, &sent_ns, sizeof sent_ns, MSG_DONTWAIT, at) != sizeof sent_ns) break;
      if (at < 0) continue;
      d.push_back(static_cast<double>(at - sent_ns) / 1e3);
      ++row.got;
    }
  };
  auto real_ns = [] {
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
  };
  while (mono_ns() < end) {
    int64_t now = real_ns();
    (void)::sendto(ptx, &now, sizeof now, 0, reinterpret_cast<sockaddr*>(&pa), sizeof pa);
    ++row.sent;
    take();
    next += 1'000'000;
    timespec at{static_cast<time_t>(next / 1'000'000'000), static_cast<long>(next % 1'000'000'000)};
    ::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, nullptr);
  }
  double secs = static_cast<double>(mono_ns() - start) / 1e9;
  row.gbps = static_cast<double>(received - rx0) * 8 / secs / 1e9;
  row.cpu_s = cpu_now() - cpu0;
  done = true;
  for (pollfd pf{prx, POLLIN, 0}; ::poll(&pf, 1, 200) > 0; pf.revents = 0) take();
  bulk.join();
  rx.join();
  for (int fd : {ls, tx, ptx, prx}) ::close(fd);
  if (th.joinable()) {
    uint64_t v = 1;
    (void)::write(stop, &v, sizeof v);
    th.join();
  }
  ::close(stop);
  row.p50 = pct(d, 0.5);
  row.p99 = pct(d, 0.99);
  row.max = d.empty() ? 0 : *std::max_element(d.begin(), d.end());
  sh("ip -n " + p.a + " qdisc del dev da root");
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = argc > 1 ? std::atof(argv[1]) : 2.0;
  if (::geteuid() != 0) {
    std::fprintf(stderr, "lanes_bench_delay: needs root (namespaces, BPF)\n");
    return 1;
  }
  Pair p;
  if (!p.ok) return 1;
  const uint64_t rates[] = {10'000'000, 100'000'000, 1'000'000'000, 0};
  auto rate_name = [](uint64_t r) {
    return r == 0 ? std::string("none") : r >= 1'000'000'000 ? std::to_string(r / 1'000'000'000) + " Gbit/s"
                                                             : std::to_string(r / 1'000'000) + " Mbit/s";
  };
  std::printf("%-10s %-8s %-11s | %9s %9s %9s | %7s | %8s | %9s\n", "delay", "jitter", "line", "p50 err", "p99 err",
              "max err", "lost", "Gbit/s", "CPU-s/Gbit");
  for (uint64_t r : {uint64_t{0}, uint64_t{1'000'000'000}}) {
    Row base = measure(p, nullptr, r, seconds);
    std::printf("%-10s %-8s %-11s | %7.0f us %7.0f us %7.0f us | %7lu | %8.3f | %9s   (the veth alone: its own latency)\n",
                "none", "-", rate_name(r).c_str(), base.p50, base.p99, base.max,
                static_cast<unsigned long>(base.sent - base.got), base.gbps, "-");
  }
  for (uint32_t delay : {100u, 1000u, 10000u, 50000u})
    for (uint32_t jitter : {0u, delay / 10})
      for (uint64_t r : rates) {
        Impairment imp;
        imp.delay_us = delay;
        imp.jitter_us = jitter;
        Row row = measure(p, &imp, r, seconds);
        double gbit = row.gbps * seconds;
        std::printf("%7.1f ms %5.1f ms %-11s | %7.0f us %7.0f us %7.0f us | %7lu | %8.3f | %9.3f%s\n", delay / 1000.0,
                    jitter / 1000.0, rate_name(r).c_str(), row.p50 - delay, row.p99 - delay, row.max - delay,
                    static_cast<unsigned long>(row.sent - row.got), row.gbps, gbit > 0 ? row.cpu_s / gbit : 0.0,
                    jitter ? "   (with jitter: errors against the mean; the spread is the jitter's)" : "");
        std::fflush(stdout);
      }
  // one TCP flow over 10 ms each way (the delay line on both ends) at 1 Gbit/s
  std::printf("\none TCP flow, 10 ms each way, 1 Gbit/s line: see the 10 ms rows above (delay on the data's way "
              "only); the bandwidth-delay product at 1 Gbit/s and 20 ms RTT is 2.5 MB\n");
  return 0;
}
