// Link impairments (issue 16): a veth pair between two namespaces of the
// test's own. Lanes' own BPF program: UDP datagrams counted on the far side
// against what was sent and against the program's counters. netem: a delay
// inside the link's TBF where the kernel has netem, its refusal where not.
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/pkt_sched.h>
#include <net/if.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>
#include <thread>

#include "lanes/testbed/features.hpp"
#include "lanes/testbed/impair.hpp"
#include "lanes/testbed/netlink.hpp"
#include "lanes/testbed/netns.hpp"
#include "lanes/testbed/topology_loader.hpp"
#include "root_support.hpp"

using namespace lanes::testbed;
using lanes::test::run_command;

namespace {

// two namespaces joined by va (198.18.202.0) and vb (198.18.202.1)
struct VethPair : lanes::test::NsPair {
  VethPair() : NsPair("limp", 202, "va", "vb") {}
};
using lanes::test::udp_socket_in;

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

// IMP attached to va from inside namespace NS
DeviceImpairment impair_va(const std::string& ns, const Impairment& imp) {
  int nsfd = VethPair::fd(ns);
  std::optional<DeviceImpairment> out;
  auto st = run_in_netns(
      nsfd,
      [&]() -> Status {
        auto d = DeviceImpairment::attach(static_cast<int>(::if_nametoindex("va")), "va", imp);
        if (!d) return d.error();
        out.emplace(std::move(d.value()));
        return {};
      },
      "impairing va");
  ::close(nsfd);
  REQUIRE(st.ok());
  return std::move(*out);
}

}  // namespace

TEST_CASE("impairment: 1% loss configured loses 1.0% of 10^5 datagrams and the program counts each one", "[root]") {
  lanes::test::require_root();
  VethPair p;
  int rx = udp_socket_in(p.b, "198.18.202.1", 9), tx = udp_socket_in(p.a, "198.18.202.0", 5000);
  for (uint32_t ppm : {1000u, 10000u, 100000u}) {  // 0.1%, 1%, 10%
    auto imp = impair_va(p.a, {ppm, 0});
    Count c = send_and_count(tx, rx, 100000, &imp);
    auto st = imp.stats();
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
  auto imp = impair_va(p.a, {0, 10000});
  Count c = send_and_count(tx, rx, 100000, &imp);
  auto st = imp.stats();
  REQUIRE(st.ok());
  double dup = 100.0 * static_cast<double>(c.received - c.sent) / static_cast<double>(c.sent);
  INFO(c.sent << " sent, " << c.received << " received (" << dup << "% copies), the program copied "
              << st.value().duplicated);
  CHECK(c.received >= c.sent);
  CHECK(st.value().duplicated == c.received - c.sent);
  CHECK(std::abs(dup - 1.0) <= 0.2);
  // cleared (twice: the second finds nothing, and that is no error)
  int nsfd = VethPair::fd(p.a);
  auto clear = [] { return DeviceImpairment::clear(static_cast<int>(::if_nametoindex("va")), "va"); };
  REQUIRE(run_in_netns(nsfd, clear, "clearing").ok());
  REQUIRE(run_in_netns(nsfd, clear, "clearing").ok());
  ::close(nsfd);
  Count after = send_and_count(tx, rx, 10000, nullptr);
  CHECK(after.received == after.sent);
  CHECK(run_command("ip -n " + p.a + " -j filter show dev va egress").out.find("lanes_impair") == std::string::npos);
  ::close(rx);
  ::close(tx);
}

namespace {

// a counter of namespace NS's /proc/net/snmp: ROW ("Ip") and FIELD ("InHdrErrors")
uint64_t snmp(const std::string& ns, const std::string& row, const std::string& field) {
  std::istringstream in(run_command("ip netns exec " + ns + " cat /proc/net/snmp").out);
  std::string names, values;
  while (std::getline(in, names) && std::getline(in, values)) {
    if (names.rfind(row + ":", 0) != 0) continue;
    std::istringstream n(names), v(values);
    std::string a, b;
    while (n >> a && v >> b)
      if (a == field) return std::stoull(b);
  }
  return 0;
}

}  // namespace

TEST_CASE("impairment: 1% corrupted of 10^5 datagrams are dropped by the receiver's IPv4 header checksum", "[root]") {
  lanes::test::require_root();
  VethPair p;
  int rx = udp_socket_in(p.b, "198.18.202.1", 9), tx = udp_socket_in(p.a, "198.18.202.0", 5000);
  Impairment corrupt;
  corrupt.corrupt_ppm = 10000;
  auto imp = impair_va(p.a, corrupt);
  uint64_t hdr0 = snmp(p.b, "Ip", "InHdrErrors");
  Count c = send(tx, rx, 100000);
  auto st = imp.stats();
  REQUIRE(st.ok());
  receive_until(rx, c, c.sent - st.value().corrupted);
  uint64_t hdr = snmp(p.b, "Ip", "InHdrErrors") - hdr0;
  double pct = 100.0 * static_cast<double>(st.value().corrupted) / static_cast<double>(c.sent);
  INFO(c.sent << " sent, " << c.received << " received, the program corrupted " << st.value().corrupted << " ("
              << pct << "%), the receiver counted " << hdr << " header errors");
  CHECK(c.sent == 100000);
  CHECK(st.value().lost == 0);
  CHECK(c.received == c.sent - st.value().corrupted);  // every corrupted one dropped, nothing else
  CHECK(hdr == st.value().corrupted);                  // by the receiver's IP header check
  CHECK(std::abs(pct - 1.0) <= 0.2);
  ::close(rx);
  ::close(tx);
}

namespace {

// the average round trip of five pings from namespace A to vb, in ms (-1: none came back)
double ping_ms(const std::string& a) {
  auto r = run_command("ip netns exec " + a + " ping -n -q -c 5 -i 0.2 -W 2 198.18.202.1");
  auto at = r.out.find(" = ");
  if (r.status != 0 || at == std::string::npos) return -1;
  return std::stod(r.out.substr(r.out.find('/', at) + 1));
}

// va's qdiscs, through lanes' own netlink
std::vector<QdiscInfo> qdiscs_of_va(Netlink& nl) {
  std::vector<QdiscInfo> out;
  auto qs = nl.qdiscs();
  REQUIRE(qs.ok());
  int idx = static_cast<int>(::if_nametoindex("va"));
  for (const auto& q : qs.value())
    if (q.index == idx) out.push_back(q);
  return out;
}

// va shaped at 100 Mbit/s and delayed 5 ms by netem, from inside namespace NS: what set_netem said
Status shape_and_delay(const std::string& ns) {
  int nsfd = VethPair::fd(ns);
  Status said;
  auto st = run_in_netns(
      nsfd,
      [&]() -> Status {
        auto nl = Netlink::open_here(ns);
        if (!nl) return nl.error();
        int idx = static_cast<int>(::if_nametoindex("va"));
        if (auto t = nl.value().set_tbf(idx, 100'000'000, "va"); !t) return t;
        Impairment imp;
        imp.delay_us = 5000;
        said = set_netem(nl.value(), idx, "va", imp);
        return {};
      },
      "delaying va");
  ::close(nsfd);
  REQUIRE(st.ok());
  return said;
}

}  // namespace

TEST_CASE("netem: a 5 ms delay inside a 100 Mbit/s TBF holds both and clearing gives the TBF its queue back", "[root][serial]") {
  lanes::test::require_root();
  if (!probe_kernel_features().netem) {
    lanes::test::not_run("this kernel has no netem (CONFIG_NET_SCH_NETEM); the refusal test runs instead");
  }
  VethPair p;
  REQUIRE(shape_and_delay(p.a).ok());
  double rtt = ping_ms(p.a);
  INFO("round trip with 5 ms delay on va: " << rtt << " ms");
  CHECK(rtt >= 5.0);
  CHECK(rtt < 15.0);
  // the line rate still holds: 2000 datagrams of 1400 B (2.8 MB) need 0.22 s at 100 Mbit/s
  int rx = udp_socket_in(p.b, "198.18.202.1", 9), tx = udp_socket_in(p.a, "198.18.202.0", 5000);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(9);
  ::inet_pton(AF_INET, "198.18.202.1", &to.sin_addr);
  std::vector<char> buf(1400);
  auto t0 = std::chrono::steady_clock::now();
  Count c;
  for (int i = 0; i < 2000; ++i)
    if (::sendto(tx, buf.data(), buf.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to) > 0) ++c.sent;
  receive_until(rx, c, c.sent);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(c.sent << " sent, " << c.received << " received in " << took << " s");
  CHECK(c.received > 0);
  CHECK(took >= 0.2);
  ::close(rx);
  ::close(tx);
  int nsfd = VethPair::fd(p.a);
  REQUIRE(run_in_netns(
              nsfd,
              [&]() -> Status {
                auto nl = Netlink::open_here(p.a);
                if (!nl) return nl.error();
                auto before = qdiscs_of_va(nl.value());
                bool tbf = false, netem = false;
                for (const auto& q : before) {
                  tbf = tbf || (q.kind == "tbf" && q.parent == TC_H_ROOT && q.rate_bps == 100'000'000);
                  netem = netem || (q.kind == "netem" && q.parent == TC_H_MAKE(0x10000u, 1u));
                }
                CHECK(tbf);
                CHECK(netem);
                return clear_netem(nl.value(), static_cast<int>(::if_nametoindex("va")), "va");
              },
              "clearing va")
              .ok());
  ::close(nsfd);
  double after = ping_ms(p.a);
  INFO("round trip cleared: " << after << " ms");
  CHECK(after >= 0);
  CHECK(after < 2.0);
}

TEST_CASE("netem: on a kernel without it a delay is refused by name and nothing changes", "[root]") {
  lanes::test::require_root();
  if (probe_kernel_features().netem) {
    lanes::test::not_run("this kernel has netem (the delay test runs instead)");
  }
  VethPair p;
  auto said = shape_and_delay(p.a);
  REQUIRE_FALSE(said.ok());
  std::string why = said.error().what();
  std::vector<QdiscInfo> after;
  int nsfd = VethPair::fd(p.a);
  REQUIRE(run_in_netns(
              nsfd,
              [&]() -> Status {
                auto nl = Netlink::open_here(p.a);
                if (!nl) return nl.error();
                after = qdiscs_of_va(nl.value());
                return {};
              },
              "reading va's qdiscs")
              .ok());
  ::close(nsfd);
  INFO(why);
  CHECK(why.find("setting netem (delay 5ms) on va: needs the netem qdisc, which this kernel lacks") !=
        std::string::npos);
  // the TBF alone (its own queue is not listed), nothing else
  REQUIRE(after.size() == 1);
  CHECK(after[0].kind == "tbf");
  // and a topology that asks for a delay is refused before anything is built, at its line (where
  // lanes' delay line cannot serve it either)
  auto t = load_topology_text(R"(<topology name="x">
  <spine name="s"/>
  <rack name="r">
    <host name="h" nics="2">
      <nic index="1" delay="2ms" jitter="1ms"/>
      <job/>
    </host>
  </rack>
</topology>)",
                              "far.xml");
  auto st = check_kernel_for(t);
  if (probe_kernel_features().bpf) {
    CHECK(st.ok());  // lanes' own delay line serves it (root_delay_line.cpp)
  } else {
    REQUIRE_FALSE(st.ok());
    CHECK(std::string(st.error().what()).rfind("far.xml:5: delay, jitter: this kernel has no netem", 0) == 0);
  }
  // a topology that asks for netem by name is refused here, whatever lanes could do instead
  auto netem_only = load_topology_text(R"(<topology name="x" impair-engine="netem">
  <spine name="s"/>
  <rack name="r">
    <host name="h" nics="2">
      <nic index="1" delay="2ms"/>
      <job/>
    </host>
  </rack>
</topology>)",
                                       "netem.xml");
  CHECK(netem_only.impair_engine == ImpairEngine::netem);
  st = check_kernel_for(netem_only);
  REQUIRE_FALSE(st.ok());
  CHECK(std::string(st.error().what())
            .rfind("netem.xml:5: delay: impair-engine=\"netem\": this kernel has no netem (CONFIG_NET_SCH_NETEM)", 0) == 0);
  CHECK(delay_engine_problem(netem_only) == "impair-engine=\"netem\": this kernel has no netem (CONFIG_NET_SCH_NETEM)");
}
