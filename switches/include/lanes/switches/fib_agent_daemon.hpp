#pragma once
// The FIB agent as a daemon (lanes-fib-agent's main runs one): the kernel
// side (FibAgent over a KernelFib), gobgpd's side (a gRPC client whose
// WatchEvent stream feeds a RibFollower, and the rack aggregates to
// originate until gobgpd takes them), the switch's carrier events, and its
// state file, all on one EventLoop.

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lanes/testbed/daemon_main.hpp"
#include "lanes/testbed/event_loop.hpp"
#include "lanes/switches/fib_agent.hpp"
#include "lanes/switches/gobgp_client.hpp"
#include "lanes/switches/rib_follower.hpp"

namespace lanes::switches {

using testbed::EventLoop;
using testbed::StateFile;

class FibAgentDaemon {
 public:
  using Clock = std::chrono::steady_clock;
  // CFG for the switch whose namespace this runs in, gobgpd's API on
  // API_PORT there, the kernel through FIB, the state at STATE_PATH (also
  // read at start: the sessions an earlier agent had up).
  FibAgentDaemon(AgentConfig cfg, uint16_t api_port, KernelFib& fib, std::string state_path);
  // Until SIGTERM or SIGINT: 0; 1 after logging what kept it from starting.
  int run();

 private:
  void link_changed(const std::string& ifname, bool carrier);
  void end_sessions(const std::string& why, const std::vector<std::string>& sessions);
  void save();
  void on_stream();
  void try_connect(Clock::time_point now);
  void originate(Clock::time_point now);
  void readd(Clock::time_point now);
  // after every wake: what is due, then when the loop must wake next
  std::optional<Clock::time_point> turn();

  AgentConfig cfg_;
  uint16_t port_;
  FibAgent agent_;
  std::string state_path_;
  StateFile state_file_;
  EventLoop loop_;
  std::optional<RibFollower> follower_;
  std::optional<GobgpClient> client_;
  std::unique_ptr<GobgpWatch> watch_;
  std::vector<std::string> to_originate_;  // aggregates gobgpd has not taken yet
  std::map<std::string, std::string> peer_configs_;  // neighbor → its configuration, as gobgpd gave it
  std::map<std::string, std::string> to_readd_;      // peers ended and not yet made again
  Clock::time_point next_try_ = Clock::now(), next_originate_ = Clock::now(), next_readd_ = Clock::now();
};

}  // namespace lanes::switches
