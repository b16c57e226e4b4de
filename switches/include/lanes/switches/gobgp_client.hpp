#pragma once
// A client of gobgpd's gRPC API (GoBGP's own gobgp.proto, from Debian's
// golang-github-osrg-gobgp-dev): what lanes asks of a switch's BGP speaker
// — its sessions, its RIB, an originated prefix, and the event stream the
// FIB agent follows — without a `gobgp` process per question.
//
// Every client talks over one TCP connection that lanes opens itself, in
// the namespace the switch runs in (from the calling thread's namespace or
// from a given one), so a process in the root namespace can ask a switch
// without entering it. The connection is not remade: a client whose gobgpd
// went away fails its calls, and the caller makes a new one.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lanes/testbed/result.hpp"
#include "lanes/switches/switch_config.hpp"

namespace lanes::switches {

using testbed::Result;
using testbed::Status;

// GoBGP's session states (PeerState.SessionState): 6 is Established.
inline constexpr int kBgpEstablished = 6;
const char* session_state_name(int state);

struct BgpSession {
  std::string neighbor;  // the neighbor's address
  std::string description;
  uint32_t peer_as = 0;
  int state = 0;              // kBgpEstablished, ...
  uint64_t received = 0;      // paths in its Adj-RIB-In, every family
  int64_t up_since_unix = 0;  // 0 while not up
  bool established() const { return state == kBgpEstablished; }
};

struct BgpRoute {
  std::string prefix;    // "198.19.1.0/32"
  std::string next_hop;  // "" when it has none
  std::string neighbor;  // who sent it; "" for a path originated here
  bool best = false;
};

// Prefix → the next hops of its paths; an empty set is a withdrawal.
using PathSets = std::map<std::string, std::vector<std::string>>;

// The WatchEvent stream: the best (multipath) sets, the whole table first,
// and every session's state changes. Read on a thread of its own; fd() is
// readable while events wait to be taken.
class GobgpWatch {
 public:
  struct Event {
    enum class Kind { table, peer, closed } kind = Kind::table;
    bool snapshot = false;  // table: the whole table, as the stream began
    PathSets paths;         // table: the complete sets of the prefixes it names
    std::string neighbor;   // peer
    int state = 0;          // peer: its session state
  };
  virtual ~GobgpWatch() = default;
  virtual int fd() const = 0;
  // Every event that arrived since the last call, oldest first. A closed
  // event is the last one: gobgpd went away or the stream failed.
  virtual std::vector<Event> take() = 0;
};

// EVENTS with each run of table changes (not a snapshot) one change: a
// prefix's last set stands for it, as each set is complete. What a busy
// reader finds queued (the four sessions of a host, up one after another)
// reaches the kernel once; the order against session events stays.
std::vector<GobgpWatch::Event> coalesce_tables(std::vector<GobgpWatch::Event> events);

class GobgpClient {
 public:
  // Opens a connection to gobgpd at 127.0.0.1:PORT inside the network
  // namespace NETNS_FD (-1: the calling thread's own).
  static Result<GobgpClient> connect(int netns_fd = -1, uint16_t port = kGobgpApiPort,
                                     std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));

  // gobgpd answers and its BGP server runs (GetBgp).
  Status ping(std::chrono::milliseconds timeout = std::chrono::milliseconds(2000)) const;
  // Every configured neighbor (ListPeer).
  Result<std::vector<BgpSession>> sessions(std::chrono::milliseconds timeout = std::chrono::milliseconds(3000)) const;
  // The global RIB of FAMILY (AF_INET or AF_INET6), every path of every
  // prefix, or of PREFIX alone (ListPath).
  Result<std::vector<BgpRoute>> routes(int family, const std::string& prefix = "",
                                       std::chrono::milliseconds timeout = std::chrono::milliseconds(3000)) const;
  // Originates PREFIX from this speaker, next hop itself (AddPath).
  Status originate(const std::string& prefix,
                   std::chrono::milliseconds timeout = std::chrono::milliseconds(2000)) const;
  // Every neighbor's configuration (ListPeer, the session's state left
  // out), serialized: neighbor address → what add_peer() takes.
  Result<std::map<std::string, std::string>> peer_configs(
      std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) const;
  // A peer removed (DeletePeer: its session ends, its paths go) and made
  // anew from its configuration (AddPeer): the new peer takes a connection
  // at once. A reset would not do: after ResetPeer gobgpd refuses the peer
  // for idle-hold-time-after-reset, which GoBGP 3.10 drops from its config
  // file (30 s, whatever it says), and after any other session loss for
  // 5 s. Each succeeds when it finds its work already done (a call that
  // timed out here may have gone through).
  Status delete_peer(const std::string& neighbor,
                     std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) const;
  Status add_peer(const std::string& config,
                  std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) const;
  // Starts the event stream (WatchEvent: best paths with the table first, and peers).
  Result<std::unique_ptr<GobgpWatch>> watch() const;

  struct Impl;

 private:
  explicit GobgpClient(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

}  // namespace lanes::switches
