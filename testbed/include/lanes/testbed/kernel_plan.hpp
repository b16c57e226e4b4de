#pragma once
// Bring-up as data: the kernel changes a run makes (links, addresses,
// neighbours, qdiscs, nexthops, routes, rules, MPTCP endpoints), each naming the namespace
// it is made in, computed from the topology by pure functions (the fabric's
// in testbed, a host's in hostnet) and applied by one function that logs every
// change. What a topology becomes is therefore checked without root, by
// reading its plan.

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "lanes/testbed/impair.hpp"
#include "lanes/testbed/address.hpp"
#include "lanes/testbed/mptcp.hpp"
#include "lanes/testbed/netlink.hpp"
#include "lanes/testbed/result.hpp"

namespace lanes::testbed {

namespace change {
// a veth pair: NAME here (up), PEER in namespace PEER_NS (brought up by a LinkUp there)
struct Veth {
  std::string name;
  int index = 0;
  std::string peer;
  int peer_index = 0;
  std::string peer_ns;
  MacAddr mac{}, peer_mac{};
};
// a netkit pair in L3 mode: NAME here (up), PEER in PEER_NS
struct Netkit {
  std::string name;
  int index = 0;
  std::string peer;
  int peer_index = 0;
  std::string peer_ns;
};
// one end of a link between two machines (partition.hpp): a VXLAN device
// NAME in this namespace, made from the machine's own (the underlay) and
// up; LOCAL and REMOTE are the two machines' addresses
struct Vxlan {
  std::string name;
  int index = 0;
  uint32_t vni = 0;
  IpAddr local, remote;
  uint16_t dstport = 0;
  uint32_t mtu = 0;
  MacAddr mac{};
};
struct LinkUp {
  int index = 0;
  std::string name;
  uint32_t gso_max_size = 0;  // the largest GSO packet its sockets may build (0: the kernel's 64 KiB)
};
struct Address {
  int index = 0;
  std::string ifname;
  std::variant<IfAddr4, IfAddr6> addr;
};
struct Neighbor {
  int index = 0;
  std::string ifname;
  IpAddr ip;
  MacAddr mac{};
};
struct Tbf {
  int index = 0;
  std::string ifname;
  uint64_t rate_bps = 0;
};
// a link end's impairment (impair.hpp): netem inside its TBF, lanes' program on its egress
struct Impair {
  int index = 0;
  std::string ifname;
  Impairment impairment;
  ImpairEngine engine = ImpairEngine::automatic;  // the topology's: who delays (netem or lanes-delay)
};
struct Nexthop {
  uint32_t id = 0;
  int oif = 0;
  std::optional<IpAddr> gateway;
};
struct Group {
  uint32_t id = 0;
  std::vector<std::pair<uint32_t, uint16_t>> members;  // {id, weight}
  std::optional<ResilientParams> resilient;
};
struct AddRoute {
  Route route;
};
struct AddRule {
  Rule rule;
};
// the namespace's MPTCP path manager (mptcp.hpp): its limits, an endpoint
struct MptcpLimitsSet {
  MptcpLimits limits;
};
struct MptcpEndpointAdd {
  MptcpEndpoint endpoint;
  std::string ifname;  // the endpoint's device, named in the plan's lines
};
}  // namespace change

// The largest GSO packet the emulated endpoints (job containers, servers)
// build. A shaped link's queue drops whole packets, and one GSO packet of
// 64 KiB is 45 frames a real switch would have dropped one by one: with
// the kernel's default, 16 flows through a 100 Mbit/s line retransmitted
// 80-100 thousand segments in 3 all-reduces and sat out retransmission
// timeouts (an all-reduce took 4.7 s, then 7.6 s); with 16 KiB (11 frames)
// 35 thousand, and every one took 4.7-4.8 s.
inline constexpr uint32_t kEndpointGsoMaxSize = 16 * 1024;

using KernelChange = std::variant<change::Veth, change::Netkit, change::Vxlan, change::LinkUp, change::Address, change::Neighbor,
                                  change::Tbf, change::Impair, change::Nexthop, change::Group, change::AddRoute, change::AddRule,
                                  change::MptcpLimitsSet, change::MptcpEndpointAdd>;

// One line for a change: "veth swp1 (100) <-> eth0 (100) in lanes-ab12-h1",
// "route default table 201 via 198.18.0.1 dev 100".
std::string describe(const KernelChange& c);

struct PlannedChange {
  std::string ns;  // the namespace's name
  KernelChange change;
};

class KernelPlan {
 public:
  void add(const std::string& ns, KernelChange c) { changes_.push_back({ns, std::move(c)}); }
  void append(const KernelPlan& other) {
    changes_.insert(changes_.end(), other.changes_.begin(), other.changes_.end());
  }
  const std::vector<PlannedChange>& changes() const { return changes_; }
  size_t size() const { return changes_.size(); }
  // "NS: description", one per change, in order
  std::vector<std::string> lines() const;
  // every change of kind T, with its namespace, in order
  template <typename T>
  std::vector<std::pair<std::string, T>> all() const {
    std::vector<std::pair<std::string, T>> out;
    for (const auto& c : changes_)
      if (const auto* x = std::get_if<T>(&c.change)) out.push_back({c.ns, *x});
    return out;
  }

 private:
  std::vector<PlannedChange> changes_;
};

// Where a plan's namespaces are: the netlink socket of each, and the fd a
// peer end is placed in by.
struct PlanTargets {
  std::function<Netlink*(const std::string& ns)> netlink;
  std::function<int(const std::string& ns)> ns_fd;
  // the machine's own namespace, which VXLAN devices are made from (only
  // a plan with links to other machines needs it)
  std::function<Netlink*()> underlay;
};

// Makes every change of PLAN in order, each logged (debug); the first that
// fails ends it with an error naming the change. STOP, when given, is asked
// before each change (an interrupted bring-up ends with EINTR).
Status apply(const KernelPlan& plan, const PlanTargets& targets, const std::function<bool()>& stop = nullptr);

}  // namespace lanes::testbed
