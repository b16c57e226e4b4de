// Link impairments through lanes' own BPF program (issue 16): a veth pair
// between two namespaces of the test's own, UDP datagrams counted on the
// far side against what was sent and against the program's counters.
#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "lanes/core/impair.hpp"
#include "lanes/core/netns.hpp"
#include "root_support.hpp"

using namespace lanes::testbed;
using lanes::test::run_command;

namespace {

// two namespaces joined by va (198.18.202.0) and vb (198.18.202.1), removed however the test ends
struct VethPair {
  std::string a = "limp-" + std::to_string(::getpid()) + "-a", b = "limp-" + std::to_string(::getpid()) + "-b";
  VethPair() {
    for (const auto& c : {"ip netns add " + a, "ip netns add " + b,
                          "ip -n " + a + " link add va type veth peer name vb netns " + b,
                          "ip -n " + a + " addr add 198.18.202.0/31 dev va", "ip -n " + b + " addr add 198.18.202.1/31 dev vb",
                          // nothing on the link but the test's datagrams: no IPv6 (its
                          // multicast listener reports), no ARP (permanent neighbours)
                          "ip netns exec " + a + " sysctl -qw net.ipv6.conf.all.disable_ipv6=1",
                          "ip netns exec " + b + " sysctl -qw net.ipv6.conf.all.disable_ipv6=1",
                          "ip -n " + a + " neigh add 198.18.202.1 lladdr 02:00:00:00:02:02 dev va nud permanent",
                          "ip -n " + b + " link set vb address 02:00:00:00:02:02",
                          "ip -n " + a + " link set va up", "ip -n " + b + " link set vb up"})
      if (run_command(c).status != 0) throw std::runtime_error("failed: " + c);
  }
  ~VethPair() {
    (void)run_command("ip netns del " + a);
    (void)run_command("ip netns del " + b);
  }
  static int fd(const std::string& ns) { return ::open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC); }
};

// a UDP socket made inside namespace NS (it stays there), bound to ADDR:PORT
int udp_socket_in(const std::string& ns, const char* addr, uint16_t port) {
  int nsfd = VethPair::fd(ns);
  int out = -1;
  auto st = run_in_netns(
      nsfd,
      [&]() -> Status {
        out = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        int big = 64 << 20;
        ::setsockopt(out, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_port = htons(port);
        ::inet_pton(AF_INET, addr, &sa.sin_addr);
        if (::bind(out, reinterpret_cast<sockaddr*>(&sa), sizeof sa)) return errno_error("bind");
        return {};
      },
      "a UDP socket");
  ::close(nsfd);
  REQUIRE(st.ok());
  return out;
}

struct Count {
  uint64_t sent = 0, received = 0;
};

// counts what has arrived on RX
void drain(int rx, Count& c) {
  char buf[64];
  while (::recv(rx, buf, sizeof buf, MSG_DONTWAIT) > 0) ++c.received;
}

// ... until C holds WANT, or nothing came for 2 s
void receive_until(int rx, Count& c, uint64_t want) {
  drain(rx, c);
  for (pollfd p{rx, POLLIN, 0}; c.received < want && ::poll(&p, 1, 2000) > 0; p.revents = 0) drain(rx, c);
}

// N datagrams from va to vb, in bursts the receiver's buffer takes whole
Count send(int tx, int rx, uint64_t n) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(9);
  ::inet_pton(AF_INET, "198.18.202.1", &to.sin_addr);
  Count c;
  char buf[64] = {};
  for (uint64_t i = 0; i < n; ++i) {
    std::memcpy(buf, &i, sizeof i);
    if (::sendto(tx, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&to), sizeof to) == sizeof buf) ++c.sent;
    if (i % 2000 == 1999) drain(rx, c);
  }
  return c;
}

// after SEND: what the program let through (its counters) must all arrive
Count send_and_count(int tx, int rx, uint64_t n, const DeviceImpairment* imp) {
  Count c = send(tx, rx, n);
  uint64_t want = c.sent;
  if (imp) {
    auto st = imp->stats();
    REQUIRE(st.ok());
    want = c.sent - st.value().lost + st.value().duplicated;
  }
  receive_until(rx, c, want);
  return c;
}

}  // namespace

TEST_CASE("impairment: 1% loss configured loses 1.0% of 10^5 datagrams and the program counts each one", "[root]") {
  lanes::test::require_root();
  VethPair p;
  int rx = udp_socket_in(p.b, "198.18.202.1", 9), tx = udp_socket_in(p.a, "198.18.202.0", 5000);
  for (uint32_t ppm : {1000u, 10000u, 100000u}) {  // 0.1%, 1%, 10%
    int nsfd = VethPair::fd(p.a);
    std::optional<DeviceImpairment> imp;
    REQUIRE(run_in_netns(
                nsfd,
                [&]() -> Status {
                  auto d = DeviceImpairment::attach(static_cast<int>(::if_nametoindex("va")), "va", {ppm, 0});
                  if (!d) return d.error();
                  imp.emplace(std::move(d.value()));
                  return {};
                },
                "impairing va")
                .ok());
    ::close(nsfd);
    Count c = send_and_count(tx, rx, 100000, &*imp);
    auto st = imp->stats();
    REQUIRE(st.ok());
    double lost = 100.0 * static_cast<double>(c.sent - c.received) / static_cast<double>(c.sent);
    INFO("configured " << ppm / 1e4 << "%: " << c.sent << " sent, " << c.received << " received, lost " << lost
                       << "%, the program counted " << st.value().packets << " and lost " << st.value().lost);
    CHECK(c.sent == 100000);
    CHECK(st.value().packets == c.sent);
    CHECK(st.value().lost == c.sent - c.received);  // nothing else lost any
    double want = ppm / 1e4;
    // 1% ± 0.2 as the issue asks; binomial spread (4.5 sigma) elsewhere
    double tol = ppm == 10000 ? 0.2 : 4.5 * 100 * std::sqrt(want / 100 * (1 - want / 100) / 1e5);
    CHECK(std::abs(lost - want) <= tol);
  }
  ::close(rx);
  ::close(tx);
}

TEST_CASE("impairment: duplication sends 1% twice, and a cleared device loses and copies nothing", "[root]") {
  lanes::test::require_root();
  VethPair p;
  int rx = udp_socket_in(p.b, "198.18.202.1", 9), tx = udp_socket_in(p.a, "198.18.202.0", 5000);
  int nsfd = VethPair::fd(p.a);
  int idx = 0;
  std::optional<DeviceImpairment> imp;
  REQUIRE(run_in_netns(
              nsfd,
              [&]() -> Status {
                idx = static_cast<int>(::if_nametoindex("va"));
                auto d = DeviceImpairment::attach(idx, "va", {0, 10000});
                if (!d) return d.error();
                imp.emplace(std::move(d.value()));
                return {};
              },
              "impairing va")
              .ok());
  Count c = send_and_count(tx, rx, 100000, &*imp);
  auto st = imp->stats();
  REQUIRE(st.ok());
  double dup = 100.0 * static_cast<double>(c.received - c.sent) / static_cast<double>(c.sent);
  INFO(c.sent << " sent, " << c.received << " received (" << dup << "% copies), the program copied "
              << st.value().duplicated);
  CHECK(c.received >= c.sent);
  CHECK(st.value().duplicated == c.received - c.sent);
  CHECK(std::abs(dup - 1.0) <= 0.2);
  // cleared (twice: the second finds nothing, and that is no error)
  REQUIRE(run_in_netns(nsfd, [&]() -> Status { return DeviceImpairment::clear(idx, "va"); }, "clearing").ok());
  REQUIRE(run_in_netns(nsfd, [&]() -> Status { return DeviceImpairment::clear(idx, "va"); }, "clearing").ok());
  ::close(nsfd);
  Count after = send_and_count(tx, rx, 10000, nullptr);
  CHECK(after.received == after.sent);
  CHECK(run_command("ip -n " + p.a + " -j filter show dev va egress").out.find("lanes_impair") == std::string::npos);
  ::close(rx);
  ::close(tx);
}
