#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "lanes/vip/dial.hpp"
#include "lanes/vip/session.hpp"
#include "support.hpp"

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

std::vector<uint8_t> peer_open(uint32_t asn = 65101, uint16_t hold = 90, bool add_path_rx = false) {
  Open o;
  o.asn = asn;
  o.hold_time = hold;
  inet_pton(AF_INET, "198.18.0.1", &o.bgp_id);
  o.mp_ipv6 = true;
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

Session established(bool add_path = false, bool peer_rx = false) {
  Session s(cfg(add_path));
  auto t = Clock::now();
  s.connected(t);
  s.received(peer_open(65101, 90, peer_rx), t);
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
  auto without = established(true, false);
  CHECK_FALSE(without.codec().add_path_tx_v4);
  // nothing is sent before Established
  Session idle(cfg());
  CHECK(idle.send(u).empty());
}

TEST_CASE("a connect to a peer that never answers gives up at its deadline, and retries spread out", "[unit]") {
  using namespace std::chrono_literals;
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
