#pragma once
// FRR as a switch's BGP stack (switch-stack="frr"): Debian's FRR 8.4 —
// zebra, staticd and bgpd, one set per switch namespace, each with its
// own configuration, pid file and sockets in the switch's directory (no
// system service, nothing under /etc/frr or /run/frr). lanes' policies are
// rendered into FRR's own language: route-maps for ownership, a prefix
// filter towards the spines for containment, maximum-prefix, timers,
// multipath. zebra programs the namespace's kernel itself.
//
// lanes reads FRR's state over bgpd's vty socket with the protocol vtysh
// speaks (a command, then the answer ended by three NUL bytes and a status
// byte): no process per question.

#include <chrono>
#include <string>
#include <vector>

#include "lanes/switches/gobgp_client.hpp"
#include "lanes/testbed/model.hpp"
#include "lanes/testbed/result.hpp"

namespace lanes::switches {

using testbed::Result;
using testbed::Topology;

// What FRR's daemons of one switch read.
struct FrrConfig {
  std::string zebra, staticd, bgpd;
};
// The configuration of NODE, a rack switch or spine whose stack is frr.
FrrConfig render_frr_config(const Topology& topo, int node);

// One connection to an FRR daemon's vty socket (DIR/bgpd.vty).
class FrrVty {
 public:
  static Result<FrrVty> connect(const std::string& socket_path,
                                std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));
  FrrVty(FrrVty&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) { o.fd_ = -1; }
  FrrVty& operator=(FrrVty&&) = delete;
  ~FrrVty();
  // COMMAND's output; an error when the daemon says the command failed.
  Result<std::string> run(const std::string& command,
                          std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));

 private:
  FrrVty(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
};

// bgpd's sessions and RIB, in the shapes lanes reads from GoBGP: parsed
// from `show bgp neighbors json` and `show bgp <afi> unicast [PREFIX] json`.
// accepted is what is in the RIB from the neighbor; session.received, what
// it sent before policy, is bgpd's Adj-RIB-In (kept by soft-reconfiguration
// inbound) and costs one question per session and family, so frr_sessions
// reads it only when asked (WITH_RECEIVED).
struct FrrSession {
  BgpSession session;
  uint64_t accepted = 0;
  std::vector<int> families;  // AF_INET / AF_INET6 the session carries
};
Result<std::vector<FrrSession>> frr_sessions(FrrVty& vty, bool with_received = false);
Result<std::vector<BgpRoute>> frr_routes(FrrVty& vty, int family, const std::string& prefix = "");
// The parsers, on bgpd's JSON text (unit-tested).
std::vector<FrrSession> parse_frr_neighbors(const std::string& json);
std::vector<BgpRoute> parse_frr_routes(const std::string& json, const std::string& prefix);
// totalPrefixCounter of `show bgp <afi> unicast neighbors X received-routes json`
uint64_t parse_frr_received(const std::string& json);

}  // namespace lanes::switches
