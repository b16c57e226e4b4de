#pragma once
// How the FIB agent follows gobgpd's RIB, without gobgpd, sockets or a
// clock of its own: the events of GoBGP's watch stream go in (the whole
// table, then changes; session states; the stream's loss), decisions come
// out as calls on a FibAgent. Unit-tested with a fake kernel.
//
// The rule it keeps: routes are never removed because gobgpd went away.
// When the stream is lost (gobgpd killed or restarting) the agent goes
// stale and keeps every route; once a new gobgpd has given back every
// session that was up before (each Established and either its paths are in
// or it has been up for settle_time), or after stale_timeout, the agent
// reconciles against the new RIB, reconcile_delay later so the returning
// sessions' updates are in.

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lanes/switches/fib_agent.hpp"
#include "lanes/switches/gobgp_client.hpp"

namespace lanes::switches {

class RibFollower {
 public:
  using Clock = std::chrono::steady_clock;
  struct Timing {
    std::chrono::milliseconds settle_time{2000};       // a session up this long counts as back
    std::chrono::milliseconds reconcile_delay{300};
    std::chrono::milliseconds stale_timeout{45'000};
  };

  // EXPECTED: sessions that were up before this agent started (from its
  // last state file); if the agent found routes of an earlier agent
  // (RESTARTED), it starts stale and waits for them.
  RibFollower(FibAgent& agent, Timing timing, std::set<std::string> expected, bool restarted, Clock::time_point now);

  // A new stream began (the first table event is the whole table).
  void connected(Clock::time_point now);
  // The stream ended: gobgpd is gone.
  void lost(Clock::time_point now);
  void table(const PathSets& paths, bool snapshot, Clock::time_point now);
  void peer(const std::string& neighbor, int state, Clock::time_point now);
  // Time-driven decisions (a due reconcile); returns when to call it next
  // at the latest (nullopt: nothing is pending).
  std::optional<Clock::time_point> tick(Clock::time_point now);

  bool connected() const { return connected_; }
  // Sessions that are back (Established and settled), for the state file.
  std::set<std::string> settled(Clock::time_point now) const;
  // Sessions the stale agent still waits for.
  std::set<std::string> waiting_for(Clock::time_point now) const;
  uint64_t losses() const { return losses_; }
  uint64_t events() const { return events_; }
  const PathSets& rib() const { return rib_; }

 private:
  bool has_path_from(const std::string& neighbor) const;

  FibAgent& agent_;
  Timing timing_;
  std::set<std::string> expected_;
  bool connected_ = false;
  bool snapshot_pending_ = false;
  PathSets rib_;                                    // as of the last event
  std::map<std::string, Clock::time_point> up_;     // Established sessions, since when
  std::set<std::string> neighbors_;                 // every session gobgpd told of
  Clock::time_point stale_since_;
  std::optional<Clock::time_point> reconcile_at_;
  bool warned_timeout_ = false;
  uint64_t losses_ = 0, events_ = 0;
};

}  // namespace lanes::switches
