#include "lanes/bfd/bfd.hpp"

#include <algorithm>

namespace lanes::bfd {

const char* to_string(State s) {
  switch (s) {
    case State::admin_down: return "admin-down";
    case State::down: return "down";
    case State::init: return "init";
    case State::up: return "up";
  }
  return "?";
}

const char* to_string(Diag d) {
  switch (d) {
    case Diag::none: return "no diagnostic";
    case Diag::time_expired: return "control detection time expired";
    case Diag::echo_failed: return "echo function failed";
    case Diag::neighbor_down: return "neighbor signaled session down";
    case Diag::forwarding_reset: return "forwarding plane reset";
    case Diag::path_down: return "path down";
    case Diag::concatenated_down: return "concatenated path down";
    case Diag::admin_down: return "administratively down";
    case Diag::reverse_concatenated_down: return "reverse concatenated path down";
  }
  return "?";
}

namespace {

void put32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}

uint32_t get32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) << 24 | static_cast<uint32_t>(p[1]) << 16 | static_cast<uint32_t>(p[2]) << 8 | p[3];
}

std::optional<Control> refuse(std::string* why, const char* what) {
  if (why) *why = what;
  return std::nullopt;
}

}  // namespace

std::array<uint8_t, kControlLength> encode(const Control& c) {
  std::array<uint8_t, kControlLength> b{};
  b[0] = static_cast<uint8_t>(1u << 5 | (static_cast<unsigned>(c.diag) & 0x1f));  // version 1
  b[1] = static_cast<uint8_t>(static_cast<unsigned>(c.state) << 6 | c.poll << 5 | c.final << 4 | c.cpi << 3 |
                              c.auth << 2 | c.demand << 1 | static_cast<unsigned>(c.multipoint));
  b[2] = c.detect_mult;
  b[3] = kControlLength;
  put32(&b[4], c.my_disc);
  put32(&b[8], c.your_disc);
  put32(&b[12], c.desired_min_tx_us);
  put32(&b[16], c.required_min_rx_us);
  put32(&b[20], c.required_min_echo_rx_us);
  return b;
}

std::optional<Control> decode(std::span<const uint8_t> d, std::string* why) {
  if (d.size() < kControlLength) return refuse(why, "shorter than a control packet");
  if (d[0] >> 5 != 1) return refuse(why, "not BFD version 1");
  Control c;
  c.diag = static_cast<Diag>(d[0] & 0x1f);
  c.state = static_cast<State>(d[1] >> 6);
  c.poll = d[1] & 0x20;
  c.final = d[1] & 0x10;
  c.cpi = d[1] & 0x08;
  c.auth = d[1] & 0x04;
  c.demand = d[1] & 0x02;
  c.multipoint = d[1] & 0x01;
  c.detect_mult = d[2];
  size_t length = d[3];
  if (length < (c.auth ? 26u : kControlLength)) return refuse(why, "length field too small");
  if (length > d.size()) return refuse(why, "length field beyond the datagram");
  // no authentication is configured here: such a packet is discarded
  if (c.auth) return refuse(why, "authenticated, and no authentication is in use");
  if (c.detect_mult == 0) return refuse(why, "detect multiplier 0");
  if (c.multipoint) return refuse(why, "multipoint bit set");
  c.my_disc = get32(&d[4]);
  c.your_disc = get32(&d[8]);
  if (c.my_disc == 0) return refuse(why, "My Discriminator 0");
  if (c.your_disc == 0 && c.state != State::down && c.state != State::admin_down)
    return refuse(why, "Your Discriminator 0 from a peer that is not down");
  c.desired_min_tx_us = get32(&d[12]);
  c.required_min_rx_us = get32(&d[16]);
  c.required_min_echo_rx_us = get32(&d[20]);
  return c;
}

Session::Session(SessionConfig cfg, Clock::time_point now, uint64_t seed) : cfg_(cfg), rng_(seed) {
  advertised_tx_us_ = desired_tx_now();
  schedule_tx(now);
}

uint32_t Session::desired_tx_now() const {
  // RFC 5880 §6.8.3: not less than one second while the session is not Up
  return state_ == State::up ? cfg_.desired_min_tx_us : std::max<uint32_t>(cfg_.desired_min_tx_us, 1'000'000);
}

std::chrono::microseconds Session::tx_interval() const {
  return std::chrono::microseconds(std::max(desired_tx_now(), remote_min_rx_us_));
}

std::chrono::microseconds Session::detection_time() const {
  // §6.8.4, asynchronous mode: the remote multiplier times the agreed
  // interval at which the remote sends
  return std::chrono::microseconds(static_cast<uint64_t>(remote_detect_mult_) *
                                   std::max(cfg_.required_min_rx_us, remote_desired_tx_us_));
}

void Session::schedule_tx(Clock::time_point now) {
  // §6.8.7: 75-100% of the interval (75-90% with a multiplier of 1), so
  // that sessions do not send in step
  double hi = cfg_.detect_mult == 1 ? 0.90 : 1.0;
  double j = std::uniform_real_distribution<double>(0.75, hi)(rng_);
  next_tx_ = now + std::chrono::duration_cast<Clock::duration>(tx_interval() * j);
  tx_open_ = now + std::chrono::duration_cast<Clock::duration>(tx_interval() * 0.75);
}

Control Session::packet() const {
  Control c;
  c.diag = diag_;
  c.state = state_;
  c.poll = polling_;
  c.detect_mult = cfg_.detect_mult;
  c.my_disc = cfg_.local_disc;
  c.your_disc = remote_disc_;
  c.desired_min_tx_us = desired_tx_now();
  c.required_min_rx_us = cfg_.required_min_rx_us;
  return c;
}

void Session::set_state(State s, Diag d, Clock::time_point now) {
  if (s == state_) return;
  auto before = tx_interval();
  if (s == State::up) path_failed_ = false;
  else if (state_ == State::up) path_failed_ = d == Diag::time_expired || d == Diag::neighbor_down;
  state_ = s;
  diag_ = d;
  ++transitions_;
  // the Desired Min TX Interval changed (1 s outside Up): a Poll Sequence
  if (desired_tx_now() != advertised_tx_us_) polling_ = true;
  // a shorter interval applies at once; the peer hears of the change now
  if (tx_interval() < before || s != State::up) {
    next_tx_ = std::min(next_tx_, now);
    tx_open_ = std::min(tx_open_, now);
  }
}

void Session::received(const Control& c, Clock::time_point now) {
  remote_disc_ = c.my_disc;
  remote_detect_mult_ = c.detect_mult;
  remote_min_rx_us_ = c.required_min_rx_us;
  remote_desired_tx_us_ = c.desired_min_tx_us;
  if (c.final && polling_) {
    polling_ = false;
    advertised_tx_us_ = desired_tx_now();
  }
  if (c.poll) final_due_ = true;
  detect_at_ = now + std::chrono::duration_cast<Clock::duration>(detection_time());
  detecting_ = true;
  if (state_ == State::admin_down) return;  // §6.8.6: discarded
  if (c.state == State::admin_down) {
    // §6.8.6 names the diag; the path is not failed (path_failed())
    if (state_ != State::down) {
      set_state(State::down, Diag::neighbor_down, now);
      path_failed_ = false;
    }
    return;
  }
  switch (state_) {
    case State::down:
      // Init keeps the reason the session last went down; Up clears it
      if (c.state == State::down) set_state(State::init, diag_, now);
      else if (c.state == State::init) set_state(State::up, Diag::none, now);
      break;
    case State::init:
      if (c.state == State::init || c.state == State::up) set_state(State::up, Diag::none, now);
      break;
    case State::up:
      if (c.state == State::down) set_state(State::down, Diag::neighbor_down, now);
      break;
    case State::admin_down:
      break;
  }
}

std::optional<Control> Session::tick(Clock::time_point now, bool coalesce) {
  if (detecting_ && now >= detect_at_) {
    // §6.8.4: the peer is gone; its discriminator with it
    detecting_ = false;
    remote_disc_ = 0;
    remote_min_rx_us_ = 1;
    if (state_ == State::init || state_ == State::up) set_state(State::down, Diag::time_expired, now);
  }
  if (final_due_) {
    final_due_ = false;
    Control c = packet();
    c.poll = false;  // §6.8.7: never both
    c.final = true;
    return c;
  }
  if (now < (coalesce ? tx_open_ : next_tx_)) return std::nullopt;
  schedule_tx(now);
  // §6.8.7: a peer asking for no packets (Required Min RX 0) gets none
  if (remote_min_rx_us_ == 0) return std::nullopt;
  return packet();
}

Clock::time_point Session::next_deadline() const {
  if (final_due_) return Clock::time_point::min();
  auto t = next_tx_;
  if (detecting_) t = std::min(t, detect_at_);
  return t;
}

void Session::admin_down(Clock::time_point now) { set_state(State::admin_down, Diag::admin_down, now); }

}  // namespace lanes::bfd
