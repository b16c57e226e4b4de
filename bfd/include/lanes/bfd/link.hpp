#pragma once
// One single-hop BFD session on one link (RFC 5881) with its sockets:
// packets received on UDP port 3784 at the link's local address, only with
// TTL (hop limit) 255 and only from the peer's address; packets sent from a
// port in 49152-65535 with TTL 255 and DSCP CS6. The Session does the
// protocol; this is its I/O. Non-blocking: a daemon calls readable() and
// tick() by next_deadline() (lanes-bfdd reads its sockets only then, not
// when a packet arrives: each packet keeps the time the kernel received
// it, so its session's detection time runs from then).

#include <sys/socket.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "lanes/bfd/bfd.hpp"
#include "lanes/bfd/rx_filter.hpp"
#include "lanes/testbed/handle.hpp"
#include "lanes/testbed/result.hpp"

namespace lanes::bfd {

struct LinkConfig {
  std::string ifname;         // the link the session runs on
  std::string local, remote;  // this side's and the peer's address on it (one family)
  SessionConfig session;
};

class LinkSession {
 public:
  static testbed::Result<std::unique_ptr<LinkSession>> open(LinkConfig cfg, Clock::time_point now);

  int fd() const { return rx_.get(); }
  // Lets FILTER take the peer's steady packets while the session is Up
  // (rx_filter.hpp); absorbed() then gives them to the session.
  testbed::Status use_filter(RxFilter& filter);
  // The packets the filter took since the last call, given to the session
  // as of when the last came (no later than NOW). True if the state changed.
  bool absorbed(Clock::time_point now);
  // Reads every datagram waiting, each as of the time the kernel received
  // it (no later than NOW). True if the session's state changed.
  bool readable(Clock::time_point now);
  // Sends what is due (COALESCE: Session::tick) and expires the detection
  // time. True if the state changed.
  bool tick(Clock::time_point now, bool coalesce = false);
  Clock::time_point next_deadline() const { return session_.next_deadline(); }
  // The link lost carrier: the session starts again as one that never came
  // up (the carrier already took the path out of use; its return must not
  // wait for a handshake).
  void reset(Clock::time_point now);
  // Going away: AdminDown sent at once, so the peer keeps the path in use.
  void admin_down(Clock::time_point now);

  const LinkConfig& config() const { return cfg_; }
  const Session& session() const { return session_; }
  // The path may carry traffic (Session::path_failed()).
  bool usable() const { return !session_.path_failed(); }
  nlohmann::json status() const;

 private:
  LinkSession(LinkConfig cfg, Clock::time_point now) : cfg_(std::move(cfg)), session_(cfg_.session, now, seed()) {}
  uint64_t seed() const;
  void send(const Control& c);
  // the filter follows the session: the steady packet while Up, nothing else
  void follow(std::span<const uint8_t> packet, const Control& c);

  LinkConfig cfg_;
  Session session_;
  testbed::Fd rx_, tx_;
  sockaddr_storage remote_{};  // the peer's address, what packets must come from
  uint64_t received_ = 0, sent_ = 0, send_errors_ = 0, resets_ = 0;
  uint64_t dropped_ttl_ = 0, dropped_source_ = 0, dropped_invalid_ = 0, dropped_disc_ = 0;
  std::string last_invalid_;
  std::optional<RxSlot> slot_;
  std::optional<Control> expected_;  // what the filter takes, decoded
  uint64_t absorbed_ = 0;
};

}  // namespace lanes::bfd
