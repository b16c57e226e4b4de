// unit tier: BFD control packets byte for byte (RFC 5880 §4.1), the
// reception checks of §6.8.6, and two sessions driven against each other
// on a fake clock: the three-way handshake, a silent peer declared down
// after the detection time, AdminDown, Poll and Final, the intervals.

#include <catch2/catch.hpp>
#include <vector>

#include "lanes/bfd/bfd.hpp"

using namespace lanes::bfd;
using std::chrono::microseconds;
using std::chrono::milliseconds;

namespace {

Control sample() {
  Control c;
  c.diag = Diag::time_expired;
  c.state = State::up;
  c.poll = true;
  c.detect_mult = 3;
  c.my_disc = 0x01020304;
  c.your_disc = 0x0a0b0c0d;
  c.desired_min_tx_us = 100'000;
  c.required_min_rx_us = 300'000;
  c.required_min_echo_rx_us = 0;
  return c;
}

// Two sessions on one clock, each packet delivered unless the link drops it.
struct Pair {
  Clock::time_point now{};
  Session a, b;
  bool a_to_b = true, b_to_a = true;
  int sent_a = 0, sent_b = 0;
  explicit Pair(SessionConfig ca = {1}, SessionConfig cb = {2}) : a(ca, now, 7), b(cb, now, 9) {}
  void run(milliseconds d, milliseconds step = milliseconds(1)) {
    for (auto end = now + d; now < end; now += step) {
      if (auto p = a.tick(now)) {
        ++sent_a;
        auto wire = encode(*p);
        if (a_to_b) b.received(*decode(wire), now);
      }
      if (auto p = b.tick(now)) {
        ++sent_b;
        auto wire = encode(*p);
        if (b_to_a) a.received(*decode(wire), now);
      }
    }
  }
};

}  // namespace

TEST_CASE("BFD control packet: byte for byte as RFC 5880 lays it out", "[unit]") {
  auto b = encode(sample());
  const std::vector<uint8_t> want = {
      0x21,                    // version 1, diag 1
      0xe0,                    // state Up (3 << 6), Poll
      3,    24,                // detect mult, length
      1,    2,    3,    4,     // My Discriminator
      10,   11,   12,   13,    // Your Discriminator
      0x00, 0x01, 0x86, 0xa0,  // Desired Min TX 100000 us
      0x00, 0x04, 0x93, 0xe0,  // Required Min RX 300000 us
      0,    0,    0,    0};    // Required Min Echo RX
  CHECK(std::vector<uint8_t>(b.begin(), b.end()) == want);
  auto back = decode(b);
  REQUIRE(back);
  CHECK(*back == sample());
  Control f;
  f.final = true;
  f.state = State::admin_down;
  f.diag = Diag::admin_down;
  f.my_disc = 5;
  CHECK(encode(f)[0] == 0x27);
  CHECK(encode(f)[1] == 0x10);  // AdminDown is 0, Final
}

TEST_CASE("BFD reception checks discard what RFC 5880 section 6.8.6 discards, saying why", "[unit]") {
  auto ok = encode(sample());
  auto with = [&](size_t i, uint8_t v) {
    auto b = ok;
    b[i] = v;
    return b;
  };
  std::string why;
  CHECK_FALSE(decode(std::span<const uint8_t>(ok.data(), 23), &why));
  CHECK(why == "shorter than a control packet");
  CHECK_FALSE(decode(with(0, 0x41), &why));  // version 2
  CHECK(why == "not BFD version 1");
  CHECK_FALSE(decode(with(3, 20), &why));
  CHECK(why == "length field too small");
  CHECK_FALSE(decode(with(3, 30), &why));
  CHECK(why == "length field beyond the datagram");
  CHECK_FALSE(decode(with(2, 0), &why));
  CHECK(why == "detect multiplier 0");
  CHECK_FALSE(decode(with(1, 0xe1), &why));
  CHECK(why == "multipoint bit set");
  CHECK_FALSE(decode(with(1, 0xe4), &why));  // A bit; 24 bytes is too short for it first
  CHECK(why == "length field too small");
  auto auth = ok;
  auth[1] = 0xe4;
  auth[3] = 26;
  std::vector<uint8_t> longer(auth.begin(), auth.end());
  longer.resize(26);
  CHECK_FALSE(decode(longer, &why));
  CHECK(why == "authenticated, and no authentication is in use");
  auto nodisc = ok;
  for (int i = 4; i < 8; ++i) nodisc[i] = 0;
  CHECK_FALSE(decode(nodisc, &why));
  CHECK(why == "My Discriminator 0");
  auto noyour = ok;
  for (int i = 8; i < 12; ++i) noyour[i] = 0;
  CHECK_FALSE(decode(noyour, &why));  // state Up
  CHECK(why == "Your Discriminator 0 from a peer that is not down");
  noyour[1] = 0x40;  // Down: fine
  CHECK(decode(noyour));
}

TEST_CASE("BFD sessions come up through the three-way handshake, then send at the fast rate", "[unit]") {
  Pair p;
  CHECK(p.a.state() == State::down);
  // slow (1 s) packets until Up, so the handshake takes a few of them
  p.run(milliseconds(3000));
  REQUIRE(p.a.state() == State::up);
  REQUIRE(p.b.state() == State::up);
  CHECK(p.a.remote_disc() == 2);
  CHECK(p.b.remote_disc() == 1);
  CHECK(p.a.transitions() <= 2);  // down → init → up, or down → up
  CHECK(p.a.diag() == Diag::none);
  // Up: 100 ms × 3 both ways; after the Poll Sequence both at 100 ms
  p.run(milliseconds(500));
  CHECK(p.a.tx_interval() == microseconds(100'000));
  CHECK(p.a.detection_time() == microseconds(300'000));
  int before = p.sent_a;
  p.run(milliseconds(1000));
  // 75-100% of 100 ms apart: 10 to 14 packets a second (and no more Finals)
  CHECK(p.sent_a - before >= 10);
  CHECK(p.sent_a - before <= 14);
}

TEST_CASE("BFD declares a silent peer down after its detection time, and comes back with it", "[unit]") {
  Pair p;
  p.run(milliseconds(3500));
  REQUIRE(p.a.state() == State::up);
  // b's packets stop reaching a (a gray failure: no carrier change)
  p.b_to_a = false;
  auto cut = p.now;
  while (p.a.state() == State::up) p.run(milliseconds(1));
  auto took = p.now - cut;
  CHECK(took <= milliseconds(301));
  CHECK(took >= milliseconds(200));  // the last packet came up to 100 ms before the cut
  CHECK(p.a.diag() == Diag::time_expired);
  CHECK(p.a.remote_disc() == 0);
  CHECK(p.a.path_failed());
  // b hears a say Down: it goes down too (and on to Init), naming its neighbour
  p.run(milliseconds(1200));
  CHECK(p.b.state() != State::up);
  CHECK(p.b.diag() == Diag::neighbor_down);
  CHECK(p.b.transitions() >= 3);
  // the path heals: both up again
  p.b_to_a = true;
  p.run(milliseconds(4000));
  CHECK(p.a.state() == State::up);
  CHECK(p.b.state() == State::up);
  CHECK_FALSE(p.a.path_failed());
  CHECK_FALSE(p.b.path_failed());
}

TEST_CASE("BFD AdminDown takes the peer down at once with diag 3 and stays down", "[unit]") {
  Pair p;
  p.run(milliseconds(3500));
  REQUIRE(p.b.state() == State::up);
  p.a.admin_down(p.now);
  p.run(milliseconds(5));
  CHECK(p.a.state() == State::admin_down);
  CHECK(p.a.diag() == Diag::admin_down);
  CHECK(p.b.state() == State::down);
  CHECK(p.b.diag() == Diag::neighbor_down);
  CHECK_FALSE(p.b.path_failed());  // the peer is stopping; forwarding may be fine
  p.run(milliseconds(3000));
  CHECK(p.b.state() == State::down);  // a packet from an AdminDown peer never brings it up
  p.b_to_a = p.a_to_b = false;        // and then the peer goes quiet
  p.run(milliseconds(5000));
  CHECK_FALSE(p.b.path_failed());
}

TEST_CASE("BFD answers a Poll with a Final at once and ends its own Poll on the peer's Final", "[unit]") {
  Clock::time_point t{};
  Session s({1}, t, 3);
  Control peer;
  peer.state = State::down;
  peer.my_disc = 9;
  peer.poll = true;
  peer.desired_min_tx_us = 1'000'000;
  peer.required_min_rx_us = 100'000;
  s.received(peer, t);
  CHECK(s.next_deadline() <= t);
  auto f = s.tick(t);
  REQUIRE(f);
  CHECK(f->final);
  CHECK_FALSE(f->poll);
  CHECK(f->your_disc == 9);
  CHECK(f->state == State::init);
  // Up: the Desired Min TX drops to 100 ms, announced with a Poll until the Final
  peer.poll = false;
  peer.state = State::up;
  peer.your_disc = 1;
  s.received(peer, t);
  REQUIRE(s.state() == State::up);
  auto next = s.tick(t + milliseconds(1));
  REQUIRE(next);
  CHECK(next->poll);
  CHECK(next->desired_min_tx_us == 100'000);
  peer.final = true;
  s.received(peer, t + milliseconds(2));
  auto after = s.tick(t + milliseconds(2000));
  REQUIRE(after);
  CHECK_FALSE(after->poll);
  // a peer asking for no packets (Required Min RX 0) gets none
  peer.final = false;
  peer.required_min_rx_us = 0;
  s.received(peer, t + milliseconds(2001));
  CHECK_FALSE(s.tick(t + milliseconds(4000)));
}

TEST_CASE("coalesced ticks send within 75-100% of the interval, and the sessions stay up", "[unit]") {
  // what lanes-bfdd does: a pass at the earliest deadline of its sessions,
  // every session sending whatever may go then, packets read in the pass
  Clock::time_point now{};
  Session a({1}, now, 3), b({2}, now, 5);
  std::vector<Clock::time_point> sent_a;
  std::vector<std::pair<Clock::time_point, Control>> to_b, to_a;  // in flight, sent at
  int passes = 0;
  while (now < Clock::time_point{} + std::chrono::seconds(20)) {
    // both sides' passes at the earliest deadline
    auto next = std::min(a.next_deadline(), b.next_deadline());
    now = std::max(now, next);
    ++passes;
    for (auto& [at, c] : to_b) b.received(c, at);
    for (auto& [at, c] : to_a) a.received(c, at);
    to_b.clear();
    to_a.clear();
    while (auto p = a.tick(now, true)) {
      if (!p->final) sent_a.push_back(now);
      to_b.emplace_back(now, *p);
    }
    while (auto p = b.tick(now, true)) to_a.emplace_back(now, *p);
  }
  CHECK(a.state() == State::up);
  CHECK(b.state() == State::up);
  CHECK(a.transitions() == 2);  // Down, Init, Up: never down again
  // once at 100 ms, every gap between periodic packets is 75-100 ms
  size_t checked = 0;
  for (size_t i = 1; i < sent_a.size(); ++i) {
    if (sent_a[i - 1] < Clock::time_point{} + std::chrono::seconds(5)) continue;  // past the slow start
    auto gap = std::chrono::duration_cast<microseconds>(sent_a[i] - sent_a[i - 1]).count();
    INFO("gap " << gap << " us");
    CHECK(gap >= 75'000);
    CHECK(gap <= 100'000);
    ++checked;
  }
  CHECK(checked > 100);
  // the two sessions share passes: far fewer than one per packet
  CHECK(static_cast<size_t>(passes) < sent_a.size() * 2);
}
