#pragma once
// The VIP injector's BGP speaker: its sessions to the rack switch (one per
// NIC, or two — on NICs 0 and 1 — each carrying an ADD-PATH path per NIC,
// so that no single NIC takes every path with it), each a socket-free
// Session driven over a socket on the daemon's event loop, and what they
// announce: the task IP with one next hop per NIC that has carrier. A NIC
// that loses carrier has its next hop withdrawn at once and the session
// riding it closed; when the NIC returns, that session is dialled at once
// and the next hop announced again. stop() withdraws everything, then
// closes with a Cease.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "lanes/testbed/event_loop.hpp"
#include "lanes/vip/dial.hpp"
#include "lanes/vip/session.hpp"

namespace lanes::vip {

struct SpeakerConfig {
  struct Nic {
    int index = 0;
    std::string eth;
    std::string nh4, nh6;  // the job's addresses for this NIC: the next hops
    bool up = true;        // carrier, as the speaker starts (not in the file: read from the link)
    bool operator==(const Nic& o) const {
      return index == o.index && eth == o.eth && nh4 == o.nh4 && nh6 == o.nh6;
    }
  };
  struct Peering {
    std::string local, peer;  // addresses
    std::vector<int> nics;    // NICs this session announces
    std::string eth;          // the NIC it rides: closed when that NIC loses carrier
    bool operator==(const Peering&) const = default;
  };
  std::string host;
  std::string injector = "lanes";  // who runs this plan: lanes, exabgp, bird or exec
  std::string task4, task6;        // "" = not announced
  bool add_path = false;
  // egress active-backup's ingress: the task IP's next hop is announced for
  // one NIC at a time, the lowest whose carrier is up and whose session is
  // established (the first that has carrier while none is), the others
  // waiting for its failure; a NIC that returns takes the traffic back
  // once its session is up (announced before the other is withdrawn)
  bool active_backup = false;
  uint32_t local_as = 0, peer_as = 0;
  uint16_t hold_time = 9;
  std::vector<Nic> nics;
  std::vector<Peering> sessions;

  // The injector's config file (injector_files(...).config).
  static SpeakerConfig from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
  bool operator==(const SpeakerConfig&) const = default;
};

// active-backup: the NIC whose next hop is announced (-1: none) — the
// lowest-index NIC with carrier whose session is established
// (ESTABLISHED(index)), else the lowest with carrier (its session is coming)
int choose_active(const std::vector<SpeakerConfig::Nic>& nics, const std::function<bool(int nic)>& established);

class Speaker {
 public:
  Speaker(SpeakerConfig cfg, testbed::EventLoop& loop, uint64_t seed);
  ~Speaker();
  Speaker(const Speaker&) = delete;
  Speaker& operator=(const Speaker&) = delete;

  // NIC ETH's carrier is UP (from the link monitor).
  void link_changed(const std::string& eth, bool up);
  // Dials what is due, gives up attempts past their deadline, runs the
  // sessions' timers; returns when it must run again at the latest.
  Clock::time_point turn(Clock::time_point now);
  // Withdraws everything, then closes every session with a Cease.
  void stop();

  // For the state file; changed() tells whether it would say anything new
  // (a thousand idle injectors otherwise spend a core rendering JSON).
  nlohmann::json state() const;
  bool changed();

 private:
  struct Peer;
  // NIC N's next hop for the task IPs (of family ONLY, if given)
  std::vector<Update> route_update(const SpeakerConfig::Nic& n, bool withdraw, std::optional<Afi> only = {}) const;
  void run(Peer& p, std::vector<Action> acts);
  void close_peer(Peer& p, const std::string& why);
  void announce(Peer& p, const SpeakerConfig::Nic& n, bool withdraw);
  void readvertise(Peer& p, Afi afi);
  void dial(Peer& p, Clock::time_point now);
  void on_socket(Peer& p, uint32_t events);
  void lost(Peer& p, const std::string& why);
  bool rides_up_nic(const Peer& p) const;
  // active-backup: the NIC to announce now (-1: none), and moving to it
  int pick_active() const;
  void reselect();

  SpeakerConfig cfg_;
  testbed::EventLoop& loop_;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::vector<uint64_t> said_;
  int active_ = -1;  // active-backup: the NIC announced
};

}  // namespace lanes::vip
