#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>

#include "lanes/vip/dial.hpp"
#include "lanes/vip/session.hpp"
#include "support.hpp"

namespace {
// A BGP message: the marker, the length, TYPE and BODY (RFC 4271 §4.1).
std::vector<uint8_t> message(uint8_t type, std::vector<uint8_t> body) {
  std::vector<uint8_t> m(16, 0xff);
  m.push_back(static_cast<uint8_t>((19 + body.size()) >> 8));
  m.push_back(static_cast<uint8_t>(19 + body.size()));
  m.push_back(type);
  m.insert(m.end(), body.begin(), body.end());
  return m;
}
}  // namespace

using namespace lanes::vip;
using namespace std::chrono_literals;

namespace {

SessionConfig cfg(bool add_path = false) {
  SessionConfig c;
  c.local_as = 4200000001u;
  c.peer_as = 65101;
  inet_pton(AF_INET, "198.19.1.0", &c.bgp_id);
  c.hold_time = 9;
  c.add_path_send = add_path;
  return c;
}

std::vector<uint8_t> peer_open(uint32_t asn = 65101, uint16_t hold = 90, bool add_path_rx = false, bool ipv6 = true,
                               bool four_octet = true) {
  Open o;
  o.asn = asn;
  o.hold_time = hold;
  inet_pton(AF_INET, "198.18.0.1", &o.bgp_id);
  o.mp_ipv6 = ipv6;
  o.four_octet = four_octet;
  if (add_path_rx) o.add_path = {{Afi::ipv4, 1}, {Afi::ipv6, 1}};
  return encode(o);
}

bool has(const std::vector<Action>& a, Action::Kind k) {
  for (const auto& x : a)
    if (x.kind == k) return true;
  return false;
}

// The NOTIFICATION in the actions, decoded.
Notification notification_of(const std::vector<Action>& a) {
  for (const auto& x : a)
    if (x.kind == Action::Kind::send) {
      auto d = decode(x.bytes, {});
      if (auto* m = std::get_if<Message>(&d))
        if (auto* n = std::get_if<Notification>(m)) return *n;
    }
  FAIL("no NOTIFICATION sent");
  return {};
}

Session established(bool add_path = false, bool peer_rx = false, bool ipv6 = true, bool four_octet = true,
                    uint32_t local_as = 4200000001u) {
  auto c = cfg(add_path);
  c.local_as = local_as;
  Session s(c);
  auto t = Clock::now();
  s.connected(t);
  s.received(peer_open(65101, 90, peer_rx, ipv6, four_octet), t);
  auto a = s.received(encode_keepalive(), t);
  REQUIRE(has(a, Action::Kind::up));
  REQUIRE(s.state() == State::established);
  return s;
}

}  // namespace

TEST_CASE("session goes OPEN then KEEPALIVE then Established with the smaller hold time", "[unit]") {
  Session s(cfg());
  auto t = Clock::now();
  auto a = s.connected(t);
  REQUIRE(a.size() == 1);
  auto sent = decode(a[0].bytes, {});
  auto& open = std::get<Open>(std::get<Message>(sent));
  CHECK(open.asn == 4200000001u);
  CHECK(open.hold_time == 9);
  CHECK(s.state() == State::open_sent);
  a = s.received(peer_open(), t);
  CHECK(s.state() == State::open_confirm);
  CHECK(s.hold_time() == 9);
  REQUIRE(a.size() == 1);
  CHECK(std::holds_alternative<Keepalive>(std::get<Message>(decode(a[0].bytes, {}))));
  a = s.received(encode_keepalive(), t);
  CHECK(has(a, Action::Kind::up));
  CHECK(s.state() == State::established);
}

TEST_CASE("session sends keepalives every third of the hold time and expires the hold timer", "[unit]") {
  auto s = established();
  auto t = Clock::now();
  auto a = s.tick(t + 3100ms);
  REQUIRE(a.size() == 1);
  CHECK(std::holds_alternative<Keepalive>(std::get<Message>(decode(a[0].bytes, {}))));
  a = s.tick(t + 9500ms);
  CHECK(notification_of(a).code == err::kHoldTimer);
  CHECK(has(a, Action::Kind::close));
  CHECK(has(a, Action::Kind::down));
  CHECK(s.state() == State::idle);
}

TEST_CASE("session answers a wrong peer AS and unexpected messages and garbage with NOTIFICATIONs", "[unit]") {
  auto t = Clock::now();
  {
    Session s(cfg());
    s.connected(t);
    auto a = s.received(peer_open(65999), t);
    auto n = notification_of(a);
    CHECK(n.code == err::kOpen);
    CHECK(n.subcode == err::kBadPeerAs);
    CHECK(s.state() == State::idle);
  }
  {
    Session s(cfg());
    s.connected(t);
    auto a = s.received(encode_keepalive(), t);  // KEEPALIVE before OPEN
    CHECK(notification_of(a).code == err::kFsm);
  }
  {
    auto s = established();
    std::vector<uint8_t> junk(19, 0);
    auto a = s.received(junk, t);  // marker not all ones
    auto n = notification_of(a);
    CHECK(n.code == err::kHeader);
    CHECK(n.subcode == err::kConnNotSynced);
    CHECK(has(a, Action::Kind::down));
  }
  {
    auto s = established();
    auto a = s.received(peer_open(), t);  // OPEN in Established
    CHECK(notification_of(a).code == err::kFsm);
  }
}

TEST_CASE("session closes on a peer NOTIFICATION without answering", "[unit]") {
  auto s = established();
  auto a = s.received(encode(Notification{6, 4, {}}), Clock::now());
  for (const auto& x : a) CHECK(x.kind != Action::Kind::send);
  CHECK(has(a, Action::Kind::down));
  CHECK(s.last_error().find("cease (6/4)") != std::string::npos);
}

TEST_CASE("session stays up on an RFC 7606 treat-as-withdraw UPDATE", "[unit]") {
  auto s = established();
  // UPDATE with ORIGIN 7
  std::vector<uint8_t> body = {0, 0, 0, 0x14, 0x40, 1, 1, 7, 0x40, 2, 6, 2, 1, 0, 0, 0, 0xfe,
                               0x40, 3, 4, 198, 19, 1, 2, 32, 198, 19, 0, 1};
  std::vector<uint8_t> m(16, 0xff);
  m.push_back(0);
  m.push_back(static_cast<uint8_t>(19 + body.size()));
  m.push_back(2);
  m.insert(m.end(), body.begin(), body.end());
  auto a = s.received(m, Clock::now());
  CHECK(a.empty());
  CHECK(s.state() == State::established);
  CHECK(s.last_error().find("treat-as-withdraw") != std::string::npos);
}

TEST_CASE("session frames byte-by-byte delivery correctly", "[unit]") {
  Session s(cfg());
  auto t = Clock::now();
  s.connected(t);
  auto open = peer_open();
  auto ka = encode_keepalive();
  open.insert(open.end(), ka.begin(), ka.end());
  bool up = false;
  for (uint8_t b : open) up |= has(s.received(std::span<const uint8_t>(&b, 1), t), Action::Kind::up);
  CHECK(up);
  CHECK(s.state() == State::established);
}

TEST_CASE("session sends ADD-PATH path ids only when the peer receives them", "[unit]") {
  auto with = established(true, true);
  CHECK(with.codec().add_path_tx_v4);
  CHECK(with.codec().add_path_tx_v6);
  Update u;
  u.as_path = {4200000001u};
  u.next_hop = std::array<uint8_t, 4>{198, 19, 1, 2};
  u.nlri = {*Prefix::parse("198.19.0.1/32", 3)};
  auto a = with.send(u);
  REQUIRE(a.size() == 1);
  CodecContext rx;
  rx.add_path_rx_v4 = true;
  auto d = std::get<Update>(std::get<Message>(decode(a[0].bytes, rx)));
  CHECK(d.nlri[0].path_id == 3);
  // nothing is sent before Established
  Session idle(cfg());
  CHECK(idle.send(u).empty());
}

namespace {

// A network namespace of this process's own, with loopback up, for the
// scope: its sysctls are the kernel's defaults, whatever the machine's
// were set to; back to the namespace before at the end. Root only (the
// sockets made inside stay in it).
struct OwnLoopback {
  int back = -1;
  bool entered = false;
  OwnLoopback() {
    if (::geteuid() != 0) return;
    back = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (back < 0 || ::unshare(CLONE_NEWNET) != 0) return;
    entered = true;
    int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
    if (s >= 0 && ::ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
      ifr.ifr_flags |= IFF_UP;
      (void)::ioctl(s, SIOCSIFFLAGS, &ifr);
    }
    if (s >= 0) ::close(s);
  }
  ~OwnLoopback() {
    if (entered) (void)::setns(back, CLONE_NEWNET);
    if (back >= 0) ::close(back);
  }
};

}  // namespace

TEST_CASE("a connect to a peer that never answers gives up at its deadline, and retries spread out", "[unit]") {
  using namespace std::chrono_literals;
  // the peer that never answers is a full accept queue, which drops SYNs
  // unless net.ipv4.tcp_abort_on_overflow is 1 (then it resets them): as
  // root in a namespace of the test's own, where it is the default 0
  OwnLoopback own;
  if (!own.entered) {
    std::ifstream f("/proc/sys/net/ipv4/tcp_abort_on_overflow");
    int abort_on_overflow = 0;
    f >> abort_on_overflow;
    if (abort_on_overflow != 0)
      lanes::test::not_run("net.ipv4.tcp_abort_on_overflow is 1 here: a full accept queue resets a connect instead "
                           "of leaving it unanswered (as root the test makes a namespace of its own)");
  }
  // a listener whose accept queue is full drops every further SYN: to the
  // dialer it is a peer that never answers (the kernel alone would retry
  // for about two minutes)
  int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(l >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(l, 0) == 0);
  socklen_t al = sizeof a;
  REQUIRE(::getsockname(l, reinterpret_cast<sockaddr*>(&a), &al) == 0);
  uint16_t port = ntohs(a.sin_port);
  std::vector<lanes::vip::Dial> fill;
  // fill the queue: these complete (queue of backlog + 1) and are never accepted
  for (int i = 0; i < 4; ++i) fill.push_back(lanes::vip::Dial::start("127.0.0.1", "127.0.0.1", port, 10s, lanes::vip::Clock::now()));
  auto t0 = lanes::vip::Clock::now();
  auto d = lanes::vip::Dial::start("127.0.0.1", "127.0.0.1", port, 300ms, t0);
  REQUIRE(d.state() == lanes::vip::Dial::State::pending);
  // before its deadline the attempt is still pending, whatever the clock says now
  CHECK(d.poll(t0 + 100ms) == lanes::vip::Dial::State::pending);
  CHECK(d.fd() >= 0);
  // at its deadline it fails with a reason, and its socket is closed
  CHECK(d.poll(t0 + 300ms) == lanes::vip::Dial::State::failed);
  CHECK(d.error().find("timed out after 0.3 s") != std::string::npos);
  CHECK(d.fd() == -1);
  ::close(l);

  // a refused connect fails at once with the kernel's reason
  auto r = lanes::vip::Dial::start("127.0.0.1", "127.0.0.1", port, 1s, lanes::vip::Clock::now());
  bool failed = lanes::test::eventually([&] { return r.poll(lanes::vip::Clock::now()) == lanes::vip::Dial::State::failed; }, 2s);
  CHECK(failed);
  CHECK(r.error().find("refused") != std::string::npos);
  CHECK(lanes::vip::Dial::start("127.0.0.1", "not-an-address", 179, 1s, lanes::vip::Clock::now()).state() ==
        lanes::vip::Dial::State::failed);

  // backoff: 100 ms doubling to 1 s, each up to 25% longer, never in step for two seeds
  lanes::vip::DialBackoff b1(100ms, 1000ms, 0.25, 1), b2(100ms, 1000ms, 0.25, 2);
  std::vector<int64_t> w1, w2;
  for (int i = 0; i < 6; ++i) w1.push_back(b1.next().count()), w2.push_back(b2.next().count());
  const int64_t base[] = {100, 200, 400, 800, 1000, 1000};
  for (int i = 0; i < 6; ++i) {
    CHECK(w1[i] >= base[i]);
    CHECK(w1[i] <= base[i] * 5 / 4);
  }
  CHECK(w1 != w2);
  b1.reset();
  CHECK(b1.next().count() <= 125);
}

TEST_CASE("add-path mode refuses a peer that does not receive path ids, naming the capability", "[unit]") {
  Session s(cfg(true));
  auto t = Clock::now();
  s.connected(t);
  auto a = s.received(peer_open(65101, 90, false), t);
  // NOTIFICATION 2/7 (Unsupported Capability) carrying ADD-PATH send for
  // IPv4 and IPv6 unicast (RFC 5492, RFC 7911)
  REQUIRE_FALSE(a.empty());
  CHECK(a[0].kind == Action::Kind::send);
  CHECK(a[0].bytes == message(3, {2, 7, 69, 8, 0, 1, 1, 2, 0, 2, 1, 2}));
  CHECK(has(a, Action::Kind::close));
  CHECK(s.state() == State::idle);
  CHECK(s.last_error().find("per-nic") != std::string::npos);
  // a peer without IPv6: only IPv4's is asked for
  Session v4(cfg(true));
  v4.connected(t);
  a = v4.received(peer_open(65101, 90, false, false), t);
  CHECK(a[0].bytes == message(3, {2, 7, 69, 4, 0, 1, 1, 2}));
}

TEST_CASE("IPv6 routes are not sent to a peer that did not negotiate IPv6 unicast", "[unit]") {
  auto s = established(false, false, /*ipv6=*/false);
  CHECK(s.ipv4());
  CHECK_FALSE(s.ipv6());
  Update v6;
  v6.as_path = {4200000001u};
  v6.mp_reach = {*Prefix::parse("2001:2:0:1::1/128")};
  CHECK(s.send(v6).empty());
  CHECK(s.updates_sent() == 0);
  Update both = v6;
  both.nlri = {*Prefix::parse("198.19.0.1/32")};
  both.next_hop = std::array<uint8_t, 4>{198, 19, 1, 2};
  auto a = s.send(both);
  REQUIRE(a.size() == 1);
  auto sent = std::get<Update>(std::get<Message>(decode(a[0].bytes, {})));
  CHECK(sent.nlri.size() == 1);
  CHECK(sent.mp_reach.empty());
  // End-of-RIB for IPv4 only
  CHECK(s.end_of_rib(Afi::ipv6).empty());
  a = s.end_of_rib(Afi::ipv4);
  REQUIRE(a.size() == 1);
  CHECK(a[0].bytes == message(2, {0, 0, 0, 0}));
}

TEST_CASE("ROUTE-REFRESH of a negotiated family asks for everything again, of another it is ignored", "[unit]") {
  auto s = established();
  auto a = s.received(message(5, {0, 1, 0, 1}), Clock::now());  // IPv4 unicast
  REQUIRE(a.size() == 1);
  CHECK(a[0].kind == Action::Kind::refresh);
  CHECK(a[0].afi == Afi::ipv4);
  a = s.received(message(5, {0, 2, 0, 1}), Clock::now());
  REQUIRE(a.size() == 1);
  CHECK(a[0].afi == Afi::ipv6);
  CHECK(s.received(message(5, {0, 1, 0, 128}), Clock::now()).empty());  // a SAFI the session does not carry
  auto v4 = established(false, false, /*ipv6=*/false);
  CHECK(v4.received(message(5, {0, 2, 0, 1}), Clock::now()).empty());
  CHECK(v4.state() == State::established);
}

TEST_CASE("to a peer without 4-octet AS support, AS_PATH carries AS_TRANS and AS4_PATH the real path", "[unit]") {
  Update u;
  u.as_path = {4200000001u};
  u.next_hop = std::array<uint8_t, 4>{198, 19, 1, 2};
  u.nlri = {*Prefix::parse("198.19.0.1/32")};
  auto old_peer = established(false, false, true, /*four_octet=*/false);
  CHECK_FALSE(old_peer.codec().four_octet_as);
  auto a = old_peer.send(u);
  REQUIRE(a.size() == 1);
  // ORIGIN IGP; AS_PATH AS_SEQUENCE [23456] in 2 octets; NEXT_HOP;
  // AS4_PATH (optional transitive, 17) AS_SEQUENCE [4200000001]; the NLRI
  CHECK(a[0].bytes == message(2, {0, 0, 0, 27,                                      //
                                  0x40, 1, 1, 0,                                    //
                                  0x40, 2, 4, 2, 1, 0x5b, 0xa0,                     //
                                  0x40, 3, 4, 198, 19, 1, 2,                        //
                                  0xc0, 17, 6, 2, 1, 0xfa, 0x56, 0xea, 0x01,        //
                                  32, 198, 19, 0, 1}));
  // read back as the old speaker reads it: AS_TRANS
  CodecContext old_ctx;
  old_ctx.four_octet_as = false;
  CHECK(std::get<Update>(std::get<Message>(decode(a[0].bytes, old_ctx))).as_path == std::vector<uint32_t>{23456});
  // a 2-octet AS of our own needs no AS4_PATH
  auto small = established(false, false, true, false, 65001);
  u.as_path = {65001};
  a = small.send(u);
  REQUIRE(a.size() == 1);
  CHECK(a[0].bytes == message(2, {0, 0, 0, 18, 0x40, 1, 1, 0, 0x40, 2, 4, 2, 1, 0xfd, 0xe9, 0x40, 3, 4, 198, 19, 1,
                                  2, 32, 198, 19, 0, 1}));
  // a 4-octet peer gets 4-octet ASNs and no AS4_PATH
  auto new_peer = established();
  u.as_path = {4200000001u};
  a = new_peer.send(u);
  REQUIRE(a.size() == 1);
  CHECK(a[0].bytes == message(2, {0, 0, 0, 20, 0x40, 1, 1, 0, 0x40, 2, 6, 2, 1, 0xfa, 0x56, 0xea, 0x01, 0x40, 3, 4,
                                  198, 19, 1, 2, 32, 198, 19, 0, 1}));
}
