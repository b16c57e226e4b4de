#pragma once
// rtnetlink through libnl-3, one socket per namespace. A socket stays bound
// to the namespace it was created in, so configuring a namespace never
// needs entering it once its socket exists.


#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "lanes/testbed/address.hpp"
#include "lanes/testbed/handle.hpp"
#include "lanes/testbed/result.hpp"

struct nl_sock;
extern "C" void nl_socket_free(struct nl_sock*);

namespace lanes::testbed {

// An Ethernet address.
using MacAddr = std::array<uint8_t, 6>;
std::string to_string(const MacAddr& m);
// "aa:bb:cc:dd:ee:ff" (what to_string writes), or nothing
std::optional<MacAddr> parse_mac(const std::string& s);

// The error category of libnl's NLE_* codes.
const std::error_category& libnl_category();

struct LinkInfo {
  int index = 0;
  std::string name;
  std::string kind;  // "veth", "netkit", ... ("" for loopback and unknown)
  bool admin_up = false;
  bool carrier = false;
  int mtu = 0;
  std::array<uint8_t, 6> mac{};
  uint64_t rx_bytes = 0, tx_bytes = 0, rx_packets = 0, tx_packets = 0;
  uint64_t rx_dropped = 0, tx_dropped = 0;
};

struct AddrInfo {
  int index = 0;
  int family = 0;
  std::string addr;  // "198.18.128.1/31"
};

struct QdiscInfo {
  int index = 0;
  std::string kind;
  uint32_t handle = 0;
  uint32_t parent = 0;
  uint64_t rate_bps = 0;  // TBF only
  uint32_t burst_bytes = 0;
  uint32_t limit_bytes = 0;
  // what the qdisc sent, as it counts it: every segment of a GSO packet with
  // its own headers (the bytes a line rate is about), and what it dropped
  uint64_t bytes = 0, packets = 0, drops = 0;
};

// One bucket of a resilient group: its next hop, and how long no packet
// used it (centiseconds, as the kernel counts).
struct BucketInfo {
  uint32_t nh_id = 0;
  uint64_t idle_cs = 0;
};

// A neighbour entry (ARP or ND) as the kernel holds it.
struct NeighborInfo {
  int ifindex = 0;
  std::string ip;
  uint16_t state = 0;  // NUD_* bits
  // added by hand (PERMANENT) or not resolved at all (NOARP): such entries
  // do not count against the kernel-wide neighbour limit
  bool counted() const;
};

struct NexthopInfo {
  uint32_t id = 0;
  int protocol = 0;
  int oif = 0;
  std::string gateway;
  bool is_group = false;
  bool resilient = false;
  uint16_t buckets = 0;
  std::vector<std::pair<uint32_t, uint16_t>> members;  // {id, weight}
};

// Where a route sends packets: through next hops (more than one:
// multipath; a next hop without a gateway is a device route), through a
// nexthop object, or nowhere.
struct Via {
  std::optional<IpAddr> gateway;
  int ifindex = 0;
  int weight = 1;
};
struct NhId {
  uint32_t id = 0;
};
struct Blackhole {};
using RouteTarget = std::variant<std::vector<Via>, NhId, Blackhole>;

// A route lanes installs. The family is the destination's; a gateway or
// source of the other family is refused when the message is built.
struct Route {
  IpNet dst;
  RouteTarget to;
  uint32_t table = 254;  // main
  uint32_t metric = 0;
  int protocol = 4;      // RTPROT_STATIC; the FIB agent uses RTPROT_BGP
  bool replace = false;  // replace an existing route to DST instead of failing
  std::optional<IpAddr> prefsrc;

  int family() const { return dst.family(); }
  // "default table 201 via 198.18.0.1 dev 101 src 198.19.1.2"
  std::string describe() const;
};

// A policy routing rule: packets from SRC (or arriving on IIF) use TABLE.
struct Rule {
  int family = AF_INET;
  std::optional<IpNet> src;
  std::string iif;  // input interface name, or ""
  uint32_t table = 0;
  uint32_t priority = 0;
  std::string describe() const;
};

// A route as the kernel reports it (main table).
struct RouteEntry {
  int family = 0;
  std::string dst;  // "198.19.0.1/32"
  int protocol = 0;
  int type = 0;     // RTN_UNICAST, RTN_BLACKHOLE, ...
  uint32_t nh_id = 0;
  int oif = 0;
  std::string gateway;
  int paths = 0;    // next hops of a multipath route (1 for a plain one)
  std::vector<int> path_oifs;  // the devices of its live next hops (none marked dead)
};

// One flow as a router's forwarding sees it: it enters on device IIF
// (a name in the namespace asked), from SRC to DST, protocol PROTO with
// the ports SPORT and DPORT.
struct FlowKey {
  std::string iif;
  IpAddr src, dst;
  uint8_t proto = 6;  // IPPROTO_TCP
  uint16_t sport = 0, dport = 0;
};

inline constexpr int kProtoBgp = 186;  // RTPROT_BGP

struct ResilientParams {
  uint16_t buckets = 128;
  uint32_t idle_timer_s = 1;
  uint32_t unbalanced_timer_s = 0;
  bool operator==(const ResilientParams&) const = default;
};

class Netlink {
 public:
  Netlink() = default;
  // A socket in the calling thread's namespace; NS names it in messages.
  static Result<Netlink> open_here(const std::string& ns);
  // A socket in the namespace NS_FD, created on a helper thread.
  static Result<Netlink> open_in(int ns_fd, const std::string& ns);

  const std::string& ns() const { return ns_; }

  // Creates a veth pair NAME (here, ifindex INDEX, 0 = kernel's choice)
  // and PEER inside namespace PEER_NS_FD (-1 = here). NAME comes up unless
  // UP is false; PEER stays down until set_link_up from its namespace.
  // MAC and PEER_MAC (null: the kernel's random ones) set the ends' MACs,
  // so that permanent neighbours can be installed without asking.
  Status create_veth(const std::string& name, int index, const std::string& peer, int peer_index,
                     int peer_ns_fd, const std::string& peer_ns, bool up = true, const MacAddr* mac = nullptr,
                     const MacAddr* peer_mac = nullptr);
  // A permanent neighbour (NUD_PERMANENT): IP is at MAC on link INDEX.
  // Permanent entries need no ARP or ND and do not count against the
  // kernel's neighbour table limit, which every namespace shares.
  Status add_neighbor(int index, const IpAddr& ip, const MacAddr& mac, const std::string& ifname);
  // Every neighbour entry of the namespace, both families.
  Result<std::vector<NeighborInfo>> neighbors();
  // Creates a netkit pair (Linux 6.7+) in L3 mode: NAME here as the
  // primary device, PEER in namespace PEER_NS_FD. NAME comes up; the peer
  // is brought up from its namespace. Built by hand: libnl 3.7 does not
  // know netkit.
  Status create_netkit(const std::string& name, int index, const std::string& peer, int peer_index,
                       int peer_ns_fd, const std::string& peer_ns);
  // A VXLAN device NAME (ifindex INDEX, MAC, MTU) for one link between two
  // machines: created from this socket's namespace (the machine's own,
  // whose UDP socket carries it: LOCAL to REMOTE, destination port
  // DSTPORT, VNI) straight into namespace NS_FD, so no interface appears
  // here. No learning: the link's one neighbour is permanent. It comes up
  // unless UP is false.
  Status create_vxlan(const std::string& name, int index, uint32_t vni, const IpAddr& local, const IpAddr& remote,
                      uint16_t dstport, uint32_t mtu, const MacAddr& mac, int ns_fd, const std::string& target_ns,
                      bool up = true);
  // Creates a dummy device (e.g. for a task IP).
  Status create_dummy(const std::string& name, int index = 0);
  Status delete_link(const std::string& name);
  // GSO_MAX_SIZE: also caps the GSO packets of the link (0: leaves it)
  Status set_link_up(int index, bool up, const std::string& name, uint32_t gso_max_size = 0);
  Result<int> ifindex(const std::string& name);
  Result<std::vector<LinkInfo>> links();
  Result<std::optional<LinkInfo>> link(const std::string& name);

  Status add_address(int index, const IfAddr4& a, const std::string& ifname);
  Status add_address(int index, const IfAddr6& a, const std::string& ifname);
  Result<std::vector<AddrInfo>> addresses();

  Status add_route(const Route& r);
  Status add_rule(const Rule& r);
  Status delete_route(const Route& r);
  Result<std::vector<RouteEntry>> route_entries(int family);
  // The device the kernel forwards FLOW out of (its multipath hash and
  // resilient buckets included: RTM_GETROUTE builds a packet of the flow
  // and routes it as input on the flow's device); 0 when it has no route.
  Result<int> route_oif(const FlowKey& flow);

  // A nexthop object on OIF, through GATEWAY (none: a device nexthop).
  // ONLINK: the gateway is the link's peer, whatever the routes say (an
  // IPv6 gateway is otherwise checked against routes the kernel marks
  // down until its link watch has seen the carrier return, a while after
  // the link came up)
  Status add_nexthop(uint32_t id, int oif, const std::optional<IpAddr>& gateway, bool replace = false,
                     int protocol = 4, bool onlink = false);
  Status add_nexthop_group(uint32_t id, const std::vector<std::pair<uint32_t, uint16_t>>& members,
                           const std::optional<ResilientParams>& resilient, bool replace = false,
                           int protocol = 4);
  Status delete_nexthop(uint32_t id);
  Result<std::vector<NexthopInfo>> nexthops();
  // Bucket index → nexthop id of resilient group GROUP.
  Result<std::vector<uint32_t>> nexthop_buckets(uint32_t group);
  // Bucket index → next hop and idle time of resilient group GROUP.
  Result<std::vector<BucketInfo>> nexthop_bucket_activity(uint32_t group);
  // Every resilient group's buckets, in one dump: group id → bucket
  // index → nexthop id.
  Result<std::map<uint32_t, std::vector<uint32_t>>> all_nexthop_buckets();
  // The nexthop group the route to PREFIX ("198.19.0.1/32") uses and its
  // members' ids: {0, {}} when there is no such route or it has no group.
  std::pair<uint32_t, std::vector<uint32_t>> route_group(const std::string& prefix);

  // TBF at the root of INDEX's egress: RATE_BPS bits per second.
  Status set_tbf(int index, uint64_t rate_bps, const std::string& ifname);
  Result<std::vector<QdiscInfo>> qdiscs();

  nl_sock* raw() const { return sock_.get(); }

 private:
  Netlink(UniquePtr<nl_sock, nl_socket_free> s, std::string ns) : sock_(std::move(s)), ns_(std::move(ns)) {}
  Status send_raw(void* msg, const std::string& what);  // takes ownership of an nl_msg

  UniquePtr<nl_sock, nl_socket_free> sock_;
  std::string ns_;
};

// Link events (RTNLGRP_LINK) of one namespace, for poll/epoll loops.
struct LinkEvent {
  int index = 0;
  std::string name;
  bool admin_up = false;
  bool carrier = false;
  bool deleted = false;
};

class LinkMonitor {
 public:
  LinkMonitor() = default;
  static Result<LinkMonitor> open_in(int ns_fd, const std::string& ns);
  int fd() const;
  // Reads every pending event without blocking. When the kernel dropped
  // events (the socket's buffer overran), the events read include every
  // link's present state, asked afresh.
  Result<std::vector<LinkEvent>> read_events();
  // How often events were dropped and the links read afresh.
  uint64_t overruns() const { return overruns_; }

 private:
  explicit LinkMonitor(UniquePtr<nl_sock, nl_socket_free> s) : sock_(std::move(s)) {}
  UniquePtr<nl_sock, nl_socket_free> sock_;
  uint64_t overruns_ = 0;
};

}  // namespace lanes::testbed
