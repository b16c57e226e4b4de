#pragma once
// BFD (RFC 5880) in asynchronous mode, for single-hop sessions (RFC 5881):
// the control packet, and one session's state machine without sockets —
// packets and time in, packets to send and state changes out — in the way
// vip's BGP Session is driven. The switch's and the host's daemons put it
// on UDP port 3784 with TTL 255.

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string>

namespace lanes::bfd {

using Clock = std::chrono::steady_clock;

inline constexpr uint16_t kControlPort = 3784;  // RFC 5881 §4
inline constexpr uint8_t kTtl = 255;            // RFC 5881 §5: sent with, and received only with

enum class State : uint8_t { admin_down = 0, down = 1, init = 2, up = 3 };
const char* to_string(State s);

// RFC 5880 §4.1, the Diagnostic field
enum class Diag : uint8_t {
  none = 0,
  time_expired = 1,
  echo_failed = 2,
  neighbor_down = 3,
  forwarding_reset = 4,
  path_down = 5,
  concatenated_down = 6,
  admin_down = 7,
  reverse_concatenated_down = 8,
};
const char* to_string(Diag d);

// The mandatory section of a control packet (RFC 5880 §4.1); lanes sends
// no authentication section and does not run demand mode.
struct Control {
  Diag diag = Diag::none;
  State state = State::down;
  bool poll = false, final = false, cpi = false, auth = false, demand = false, multipoint = false;
  uint8_t detect_mult = 3;
  uint32_t my_disc = 0, your_disc = 0;
  uint32_t desired_min_tx_us = 0, required_min_rx_us = 0, required_min_echo_rx_us = 0;
  bool operator==(const Control&) const = default;
};

inline constexpr size_t kControlLength = 24;
std::array<uint8_t, kControlLength> encode(const Control& c);
// The checks of RFC 5880 §6.8.6 that need no session: version 1, a length
// of at least 24 (26 with authentication) and at most the datagram, a
// detect multiplier, no multipoint, a My Discriminator, and Your
// Discriminator zero only from a peer in Down or AdminDown. WHY says which
// failed.
std::optional<Control> decode(std::span<const uint8_t> datagram, std::string* why = nullptr);

struct SessionConfig {
  uint32_t local_disc = 1;                 // nonzero, unique on the system
  uint32_t desired_min_tx_us = 100'000;    // once Up (1 s before: RFC 5880 §6.8.3)
  uint32_t required_min_rx_us = 100'000;
  uint8_t detect_mult = 3;
};

class Session {
 public:
  Session(SessionConfig cfg, Clock::time_point now, uint64_t seed = 1);

  // A control packet for this session (the caller matched its
  // discriminators or, with Your Discriminator 0, its addresses).
  void received(const Control& c, Clock::time_point now);
  // The packet due by NOW, if one is: periodic, or the Final a Poll asked
  // for. Detection time expiring is handled here too. COALESCE: a periodic
  // packet goes as soon as 75% of the interval since the last has passed
  // (the earliest §6.8.7's jitter allows), so that a daemon woken for one
  // session sends every other session's packet that may go in the same
  // pass, instead of waking again for each.
  std::optional<Control> tick(Clock::time_point now, bool coalesce = false);
  // When tick() must run next at the latest.
  Clock::time_point next_deadline() const;
  // Administratively down (e.g. on the way out): the peer is told with
  // AdminDown and takes the path out of use without waiting.
  void admin_down(Clock::time_point now);

  State state() const { return state_; }
  Diag diag() const { return diag_; }
  uint32_t remote_disc() const { return remote_disc_; }
  // The time a peer without packets is declared down (RFC 5880 §6.8.4).
  std::chrono::microseconds detection_time() const;
  // The interval between this side's packets, before jitter.
  std::chrono::microseconds tx_interval() const;
  // State changes since the session began.
  uint64_t transitions() const { return transitions_; }
  // The path failed: the session went from Up to Down by its detection
  // time or because the peer saw it down, and has not been Up since. A
  // session that went down because the peer said AdminDown (it is being
  // stopped) has not failed (RFC 5882 §3.2: nothing says forwarding
  // did), nor has one that never came up.
  bool path_failed() const { return path_failed_; }

 private:
  Control packet() const;
  void set_state(State s, Diag d, Clock::time_point now);
  uint32_t desired_tx_now() const;  // 1 s until Up
  void schedule_tx(Clock::time_point now);

  SessionConfig cfg_;
  State state_ = State::down;
  Diag diag_ = Diag::none;
  uint32_t remote_disc_ = 0;
  uint32_t remote_min_rx_us_ = 1;           // the peer's Required Min RX Interval (§6.8.1: 1 at first)
  uint32_t remote_desired_tx_us_ = 0;
  uint8_t remote_detect_mult_ = 0;
  bool polling_ = false;                    // a Poll Sequence of ours awaits its Final
  bool final_due_ = false;                  // the peer's Poll awaits our Final
  uint32_t advertised_tx_us_ = 0;           // the Desired Min TX the peer last acknowledged
  Clock::time_point next_tx_, detect_at_;
  Clock::time_point tx_open_;  // the earliest a periodic packet may go (75% of the interval)
  bool detecting_ = false;
  bool path_failed_ = false;
  uint64_t transitions_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace lanes::bfd
