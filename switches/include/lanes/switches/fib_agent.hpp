#pragma once
// The FIB agent's logic: GoBGP's multipath sets in, kernel nexthop objects
// and resilient groups out. The kernel sits behind KernelFib so the logic is
// tested with a fake; NetlinkFib is the real one.
//
// Every BGP prefix gets one resilient nexthop group with one member per port
// that its paths resolve to; its route points at the group (protocol bgp).
// Nexthop ids are fixed per (port, family), so a restarted agent recognises
// what it installed before and leaves valid routes alone.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lanes/testbed/netlink.hpp"

namespace lanes::switches {

using testbed::BucketInfo;
using testbed::Netlink;
using testbed::NexthopInfo;
using testbed::ResilientParams;
using testbed::Result;
using testbed::RouteEntry;
using testbed::Status;

struct AgentPort {
  std::string ifname;
  std::string peer;                 // node name on the other side
  std::vector<std::string> match;   // BGP next hops this port stands for
  std::string gw4, gw6;
  std::string peer_mac;  // the other end's MAC: the port's permanent neighbour for gw4 and gw6
  // gobgpd neighbors whose sessions ride this port (the hosts' injectors):
  // reset the moment it loses carrier, as switches do for directly
  // connected eBGP peers ("fast external fallover"), so the session is
  // ready to come back the moment the NIC does
  std::vector<std::string> sessions;
  bool operator==(const AgentPort&) const = default;
};

struct AgentStatic {
  std::string dst;  // "198.19.1.0/32"
  std::string ifname;
  std::string gateway;
  bool operator==(const AgentStatic&) const = default;
};

struct AgentConfig {
  std::string node;
  std::string api = "127.0.0.1:50051";
  ResilientParams resilient;
  std::vector<std::string> originate;  // announced into BGP by the agent
  std::vector<std::string> blackhole;  // discard routes for the aggregates
  std::vector<AgentPort> ports;
  std::vector<AgentStatic> statics;
  std::chrono::seconds stale_timeout{45};
  std::string bfd_socket;  // lanes-bfdd's verdicts on the ports ("" = no BFD)

  // The agent's config file (switch_files(...).agent_config): written by
  // the switch role's deploy step, read by lanes-fib-agent.
  static AgentConfig from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
  bool operator==(const AgentConfig&) const = default;
};

// What the agent needs from the kernel.
class KernelFib {
 public:
  virtual ~KernelFib() = default;
  virtual Result<int> ifindex(const std::string& ifname) = 0;
  virtual Result<std::vector<NexthopInfo>> nexthops() = 0;
  virtual Result<std::vector<RouteEntry>> routes(int family) = 0;
  virtual Status add_nexthop(uint32_t id, int oif, const std::string& gateway) = 0;
  // members {id, weight}
  virtual Status set_group(uint32_t id, const std::vector<std::pair<uint32_t, uint16_t>>& members,
                           const ResilientParams& p, bool replace) = 0;
  virtual Result<std::vector<BucketInfo>> buckets(uint32_t group) = 0;
  virtual Status delete_nexthop(uint32_t id) = 0;
  virtual Status set_route(const std::string& prefix, uint32_t group) = 0;  // create or replace
  virtual Status delete_route(const std::string& prefix) = 0;
  virtual Status add_static(const AgentStatic& s, int oif) = 0;      // create or replace
  virtual Status add_blackhole(const std::string& prefix) = 0;       // create or replace
  // the permanent neighbour IP -> MAC on port OIF (create or replace)
  virtual Status add_neighbor(int oif, const std::string& ifname, const std::string& ip, const std::string& mac) = 0;
};

class NetlinkFib : public KernelFib {
 public:
  explicit NetlinkFib(Netlink nl) : nl_(std::move(nl)) {}
  Result<int> ifindex(const std::string& ifname) override { return nl_.ifindex(ifname); }
  Result<std::vector<NexthopInfo>> nexthops() override { return nl_.nexthops(); }
  Result<std::vector<RouteEntry>> routes(int family) override { return nl_.route_entries(family); }
  Status add_nexthop(uint32_t id, int oif, const std::string& gateway) override;
  Status set_group(uint32_t id, const std::vector<std::pair<uint32_t, uint16_t>>& members, const ResilientParams& p,
                   bool replace) override;
  Result<std::vector<BucketInfo>> buckets(uint32_t group) override { return nl_.nexthop_bucket_activity(group); }
  Status delete_nexthop(uint32_t id) override { return nl_.delete_nexthop(id); }
  Status set_route(const std::string& prefix, uint32_t group) override;
  Status delete_route(const std::string& prefix) override;
  Status add_static(const AgentStatic& s, int oif) override;
  Status add_blackhole(const std::string& prefix) override;
  Status add_neighbor(int oif, const std::string& ifname, const std::string& ip, const std::string& mac) override;

 private:
  Netlink nl_;
};

// Kernel object ids the agent uses.
inline constexpr uint32_t kNexthopIdBase = 1000;     // + port * 2 + (IPv6 ? 1 : 0)
inline constexpr uint32_t kGroupIdBase = 100000;

class FibAgent {
 public:
  FibAgent(AgentConfig cfg, KernelFib& kernel);

  // Learns what an earlier agent installed (routes of protocol bgp and
  // their groups) and installs the statics and blackholes.
  Status start();

  // The complete multipath set of PREFIX (BGP next hops), as GoBGP reports
  // it; an empty set withdraws the prefix.
  void update(const std::string& prefix, const std::vector<std::string>& nexthops);
  // A port's carrier changed (the kernel drops a port's next hops when its
  // carrier goes; they return through the agent). Returns the sessions to
  // reset: those riding a port that has just lost carrier.
  std::vector<std::string> link_changed(const std::string& ifname, bool carrier);
  // lanes-bfdd's verdict on a port's path. A failed path (carrier up,
  // frames lost) leaves every group at once, its next hops kept for its
  // return (healthy buckets stay where they are); returns the sessions to
  // reset, as for a lost carrier. A working one returns to the groups.
  std::vector<std::string> bfd_changed(const std::string& ifname, bool usable);

  // Stale mode (gobgpd lost): nothing is removed from the kernel; updates
  // only add. reconcile() ends it with the complete RIB.
  void set_stale(bool stale);
  bool stale() const { return stale_; }
  void reconcile(const std::map<std::string, std::vector<std::string>>& rib);

  // Per prefix: group id and the ports in it, plus counters.
  nlohmann::json state() const;
  // Ports (names) in PREFIX's installed group.
  std::vector<std::string> members(const std::string& prefix) const;
  uint64_t kernel_ops() const { return ops_; }
  // Rejoins whose weighted phase is over by NOW end (the returned members
  // back at equal weight); the next time one is due.
  void tick(std::chrono::steady_clock::time_point now);
  std::optional<std::chrono::steady_clock::time_point> next_deadline() const;
  // The agent's clock (tests pass their own).
  void set_clock(std::function<std::chrono::steady_clock::time_point()> now) { now_ = std::move(now); }
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  struct Installed {
    uint32_t group = 0;
    std::set<int> ports;  // member ports (indexes into cfg_.ports)
    std::chrono::steady_clock::time_point changed;  // its members last set (or adopted)
  };
  static bool is_v6(const std::string& prefix) { return prefix.find(':') != std::string::npos; }
  std::optional<int> port_of(const std::string& nexthop) const;
  uint32_t nexthop_id(int port, bool v6) const { return kNexthopIdBase + static_cast<uint32_t>(port) * 2 + (v6 ? 1 : 0); }
  bool ensure_nexthop(int port, bool v6);
  void apply(const std::string& prefix);
  bool pull_flows(const std::string& prefix, const Installed& inst, const std::set<int>& usable, bool v6);
  std::vector<std::pair<uint32_t, uint16_t>> weighted(const std::set<int>& ports, bool v6,
                                                      const std::set<int>& heavy = {}, uint16_t weight = 1) const;
  void remove(const std::string& prefix);
  uint32_t new_group_id();
  void note(const std::system_error& e);

  std::function<std::chrono::steady_clock::time_point()> now_ = [] { return std::chrono::steady_clock::now(); };
  // prefix → when its rejoin's weighted phase ends
  // a weighted phase under way (testbed/rejoin.hpp), per prefix
  struct Rejoin {
    std::chrono::steady_clock::time_point started, due, limit;
    std::set<int> back;  // the returned ports
    uint16_t weight = 1;
  };
  std::map<std::string, Rejoin> rejoins_;
  AgentConfig cfg_;
  KernelFib& k_;
  std::vector<int> oif_;            // per port
  std::vector<bool> carrier_;       // per port
  std::vector<bool> bfd_failed_;    // per port: BFD says its path failed
  std::set<uint32_t> nexthops_up_;  // nexthop objects the kernel has
  std::map<std::string, std::set<int>> want_;  // prefix → ports from the RIB
  std::map<std::string, Installed> installed_;
  std::map<std::string, std::set<int>> stale_ports_;  // kept while stale
  std::set<uint32_t> used_groups_;
  bool stale_ = false;
  uint64_t ops_ = 0;
  std::vector<std::string> errors_;
};

}  // namespace lanes::switches
