#pragma once
// One BGP session's finite state machine (RFC 4271 §8), without sockets:
// events in (TCP connected, bytes received, time passing, stop), actions
// out (bytes to send, close, session up or down). The injector drives it
// with real sockets; the unit tests drive it directly.

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lanes/vip/bgp.hpp"

namespace lanes::vip {

using Clock = std::chrono::steady_clock;

enum class State { idle, open_sent, open_confirm, established };
const char* to_string(State s);

struct SessionConfig {
  uint32_t local_as = 0;
  uint32_t peer_as = 0;
  uint32_t bgp_id = 0;      // network order
  uint16_t hold_time = 9;   // offered; 0 = no keepalives; otherwise at least 3
  bool ipv6 = true;         // negotiate IPv6 unicast too
  bool add_path_send = false;
};

struct Action {
  // refresh: the peer asked for every route of AFI again (ROUTE-REFRESH)
  enum class Kind { send, close, up, down, refresh } kind;
  std::vector<uint8_t> bytes;  // send
  std::string reason;          // close, down
  Afi afi = Afi::ipv4;         // refresh
};

class Session {
 public:
  explicit Session(SessionConfig cfg);

  std::vector<Action> connected(Clock::time_point now);
  std::vector<Action> received(std::span<const uint8_t> bytes, Clock::time_point now);
  std::vector<Action> tick(Clock::time_point now);
  // Sends NOTIFICATION (CODE, SUBCODE) if the session is open, then closes.
  std::vector<Action> stop(uint8_t code = err::kCease, uint8_t subcode = err::kAdminShutdown);
  // The transport broke (connection reset, EOF).
  std::vector<Action> transport_lost(const std::string& why);
  // An UPDATE to send (only when established), without the families the
  // peer did not negotiate (nothing at all if that leaves it empty).
  std::vector<Action> send(const Update& u);
  // The End-of-RIB marker of AFI, if that family was negotiated.
  std::vector<Action> end_of_rib(Afi afi);
  // The unicast families both ends negotiated (from the peer's OPEN).
  bool ipv4() const { return ipv4_; }
  bool ipv6() const { return ipv6_; }

  State state() const { return state_; }
  uint16_t hold_time() const { return hold_; }
  const CodecContext& codec() const { return ctx_; }
  const std::string& last_error() const { return last_error_; }
  uint64_t updates_sent() const { return updates_sent_; }
  uint64_t updates_received() const { return updates_received_; }
  // Next time tick() has work (keepalive or hold timer).
  Clock::time_point next_deadline() const;

 private:
  std::vector<Action> fail(uint8_t code, uint8_t subcode, const std::string& why, std::vector<uint8_t> data = {});
  std::vector<Action> handle(const Message& m, Clock::time_point now);
  void reset();

  SessionConfig cfg_;
  State state_ = State::idle;
  CodecContext ctx_;
  uint16_t hold_ = 0;
  bool ipv4_ = false, ipv6_ = false;
  std::vector<uint8_t> buf_;
  Clock::time_point hold_deadline_{}, keepalive_due_{};
  std::string last_error_;
  uint64_t updates_sent_ = 0, updates_received_ = 0;
};

}  // namespace lanes::vip
