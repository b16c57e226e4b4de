#include "lanes/testbed/netlink.hpp"

#include <arpa/inet.h>
#include <linux/if.h>
#include <linux/fib_rules.h>
#include <linux/if_link.h>
#include <linux/nexthop.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/link/vxlan.h>
#include <netlink/route/neighbour.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/qdisc/tbf.h>
#include <netlink/route/route.h>
#include <netlink/route/rtnl.h>
#include <netlink/route/tc.h>

#include <algorithm>
#include <map>
#include <cstring>

#include "lanes/testbed/log.hpp"
#include "lanes/testbed/netns.hpp"

namespace lanes::testbed {
namespace {

class LibnlCategory : public std::error_category {
 public:
  const char* name() const noexcept override { return "libnl"; }
  std::string message(int code) const override { return nl_geterror(code); }
};

std::system_error nl_error(int err, const std::string& what) {
  return std::system_error(std::abs(err), libnl_category(), what);
}

template <typename T, auto Free>
using NlPtr = UniquePtr<T, Free>;

void cache_free(nl_cache* c) { nl_cache_free(c); }
void link_put(rtnl_link* l) { rtnl_link_put(l); }
void addr_put(rtnl_addr* a) { rtnl_addr_put(a); }
void qdisc_put(rtnl_qdisc* q) { rtnl_qdisc_put(q); }
void nladdr_put(nl_addr* a) { nl_addr_put(a); }
void neigh_put(rtnl_neigh* n) { rtnl_neigh_put(n); }
void msg_free(nl_msg* m) { nlmsg_free(m); }

using Msg = NlPtr<nl_msg, msg_free>;

// A request being built. Every put says whether it fit: a message that
// cannot hold an attribute is an error naming what the message was for,
// never a request sent without it.
class MsgBuilder {
 public:
  MsgBuilder(int type, int flags, std::string what)
      : msg_(nlmsg_alloc_simple(type, flags)), what_(std::move(what)) {}
  const std::string& what() const { return what_; }
  template <typename H>
  Status header(const H& h) {
    if (!msg_ || nlmsg_append(msg_.get(), const_cast<H*>(&h), sizeof h, NLMSG_ALIGNTO) < 0) return full("its header");
    return {};
  }
  Status u16(int attr, uint16_t v) { return checked(msg_ ? nla_put_u16(msg_.get(), attr, v) : -1, attr); }
  Status u32(int attr, uint32_t v) { return checked(msg_ ? nla_put_u32(msg_.get(), attr, v) : -1, attr); }
  Status str(int attr, const std::string& v) {
    return checked(msg_ ? nla_put_string(msg_.get(), attr, v.c_str()) : -1, attr);
  }
  Status bytes(int attr, const void* data, size_t len) {
    return checked(msg_ ? nla_put(msg_.get(), attr, static_cast<int>(len), data) : -1, attr);
  }
  Status addr(int attr, const IpAddr& a) {
    if (a.is_v6()) {
      auto b = a.to_v6().to_bytes();
      return bytes(attr, b.data(), b.size());
    }
    auto b = a.to_v4().to_bytes();
    return bytes(attr, b.data(), b.size());
  }
  Result<nlattr*> nest(int attr) {
    nlattr* n = msg_ ? nla_nest_start(msg_.get(), attr) : nullptr;
    if (!n) return full(fmt::format("attribute {}", attr));
    return n;
  }
  void end(nlattr* n) { nla_nest_end(msg_.get(), n); }
  // room for a T inside the message (rtnexthop of a multipath route)
  template <typename T>
  Result<T*> reserve() {
    void* p = msg_ ? nlmsg_reserve(msg_.get(), sizeof(T), NLMSG_ALIGNTO) : nullptr;
    if (!p) return full("its room for a structure");
    std::memset(p, 0, sizeof(T));
    return static_cast<T*>(p);
  }
  char* tail() { return reinterpret_cast<char*>(nlmsg_tail(nlmsg_hdr(msg_.get()))); }
  nl_msg* get() { return msg_.get(); }
  nl_msg* release() { return msg_.release(); }

 private:
  std::system_error full(const std::string& part) {
    return os_error(EMSGSIZE, fmt::format("{}: {} does not fit in the netlink message", what_, part));
  }
  Status checked(int err, int attr) {
    if (err < 0) return full(fmt::format("attribute {}", attr));
    return {};
  }
  Msg msg_;
  std::string what_;
};

// ATTEMPT's error, or nothing: `LANES_TRY(b.u32(...))` in a Status function.
#define LANES_TRY(expr)                   \
  do {                                    \
    if (auto st_ = (expr); !st_) return st_; \
  } while (0)

Result<UniquePtr<nl_sock, nl_socket_free>> connect_here(const std::string& ns) {
  UniquePtr<nl_sock, nl_socket_free> sk(nl_socket_alloc());
  if (!sk) return os_error(ENOMEM, "allocating a netlink socket for " + ns);
  if (int err = nl_connect(sk.get(), NETLINK_ROUTE); err < 0)
    return nl_error(err, "connecting rtnetlink in " + ns);
  nl_socket_set_buffer_size(sk.get(), 1 << 20, 1 << 20);
  return sk;
}

Result<NlPtr<nl_addr, nladdr_put>> parse_addr(const std::string& s, int family) {
  nl_addr* a = nullptr;
  if (int err = nl_addr_parse(s.c_str(), family, &a); err < 0)
    return nl_error(err, "parsing address " + s);
  return NlPtr<nl_addr, nladdr_put>(a);
}

std::string addr_str(const void* data, int family) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(family, data, buf, sizeof buf);
  return buf;
}

// Sends the dump request MSG and feeds each reply to PARSE(nlmsghdr*).
template <typename Parse>
Status dump_request(nl_sock* sk, nl_msg* msg, const std::string& what, Parse parse) {
  if (int err = nl_send_auto(sk, msg); err < 0) return nl_error(err, what);
  nl_cb* cb = nl_cb_alloc(NL_CB_DEFAULT);
  auto trampoline = [](nl_msg* m, void* arg) -> int {
    (*static_cast<Parse*>(arg))(nlmsg_hdr(m));
    return NL_OK;
  };
  nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, trampoline, &parse);
  int err = nl_recvmsgs(sk, cb);
  nl_cb_put(cb);
  if (err < 0) return nl_error(err, what);
  return {};
}

// A dump of message TYPE with an all-zero family header of HDR_SIZE bytes.
template <typename Parse>
Status dump(nl_sock* sk, int type, int hdr_size, const std::string& what, Parse parse) {
  MsgBuilder b(type, NLM_F_REQUEST | NLM_F_DUMP, what);
  std::vector<char> hdr(static_cast<size_t>(hdr_size), 0);
  if (!b.get() || nlmsg_append(b.get(), hdr.data(), hdr.size(), NLMSG_ALIGNTO) < 0) return os_error(ENOMEM, what);
  return dump_request(sk, b.get(), what, parse);
}

}  // namespace

// A dump the kernel interrupted because the table changed meanwhile
// (NLM_F_DUMP_INTR: next hops being removed after a carrier loss) is asked
// again, up to five times; RESET empties what the partial one parsed.
template <typename Parse, typename Reset>
Status dump_retrying(nl_sock* sk, nl_msg* msg, const std::string& what, Parse&& parse, Reset&& reset) {
  for (int attempt = 0;; ++attempt) {
    auto st = dump_request(sk, msg, what, parse);
    if (st || attempt == 4 || st.error().code().value() != NLE_DUMP_INTR) return st;
    reset();
    nlmsg_hdr(msg)->nlmsg_seq = NL_AUTO_SEQ;  // a new request, not the old one again
  }
}

const std::error_category& libnl_category() {
  static LibnlCategory c;
  return c;
}

Result<Netlink> Netlink::open_here(const std::string& ns) {
  auto sk = connect_here(ns);
  if (!sk) return sk.error();
  return Netlink(std::move(sk).value(), ns);
}

Result<Netlink> Netlink::open_in(int ns_fd, const std::string& ns) {
  std::optional<Netlink> out;
  auto st = run_in_netns(
      ns_fd,
      [&]() -> Status {
        auto r = open_here(ns);
        if (!r) return r.error();
        out.emplace(std::move(r).value());
        return {};
      },
      "a netlink socket in " + ns);
  if (!st) return st.error();
  return std::move(*out);
}

Status Netlink::send_raw(void* m, const std::string& what) {
  int err = nl_send_sync(sock_.get(), static_cast<nl_msg*>(m));  // frees the message
  if (err < 0) return nl_error(err, what);
  return {};
}

std::string to_string(const MacAddr& m) {
  return fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5]);
}

std::optional<MacAddr> parse_mac(const std::string& s) {
  MacAddr m{};
  unsigned v[6];
  char tail = 0;
  if (std::sscanf(s.c_str(), "%2x:%2x:%2x:%2x:%2x:%2x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &tail) != 6)
    return std::nullopt;
  for (size_t i = 0; i < 6; ++i) m[i] = static_cast<uint8_t>(v[i]);
  return m;
}

Status Netlink::create_veth(const std::string& name, int index, const std::string& peer,
                            int peer_index, int peer_ns_fd, const std::string& peer_ns, bool up,
                            const MacAddr* mac, const MacAddr* peer_mac) {
  std::string what = "creating veth " + name + " in " + ns_ + " with peer " + peer +
                     (peer_ns.empty() ? "" : " in " + peer_ns);
  rtnl_link* link = rtnl_link_veth_alloc();
  if (!link) return os_error(ENOMEM, what);
  rtnl_link* p = rtnl_link_veth_get_peer(link);
  rtnl_link_set_name(link, name.c_str());
  rtnl_link_set_name(p, peer.c_str());
  if (index > 0) rtnl_link_set_ifindex(link, index);
  if (peer_index > 0) rtnl_link_set_ifindex(p, peer_index);
  if (peer_ns_fd >= 0) rtnl_link_set_ns_fd(p, peer_ns_fd);
  // the MACs, where given (the link holds its own reference to each)
  for (auto [dev, m] : {std::pair{link, mac}, std::pair{p, peer_mac}}) {
    if (!m) continue;
    NlPtr<nl_addr, nladdr_put> ll(nl_addr_build(AF_LLC, m->data(), m->size()));
    if (!ll) {
      rtnl_link_veth_release(link);
      return os_error(ENOMEM, what);
    }
    rtnl_link_set_addr(dev, ll.get());
  }
  // Only this end can come up in the same request: the kernel configures
  // the peer before the pair is joined, and opening it then fails with
  // ENOTCONN. The caller brings the peer up from the peer's namespace.
  if (up) rtnl_link_set_flags(link, IFF_UP);
  int err = rtnl_link_add(sock_.get(), link, NLM_F_CREATE | NLM_F_EXCL);
  rtnl_link_put(p);
  rtnl_link_veth_release(link);
  if (err < 0) return nl_error(err, what);
  log::debug("{}: created veth {} <-> {} {}", ns_, name, peer_ns, peer);
  return {};
}

Status Netlink::create_vxlan(const std::string& name, int index, uint32_t vni, const IpAddr& local,
                             const IpAddr& remote, uint16_t dstport, uint32_t mtu, const MacAddr& mac, int ns_fd,
                             const std::string& target_ns, bool up) {
  std::string what = fmt::format("creating vxlan {} (VNI {}, {} -> {} port {}) from {} in {}", name, vni,
                                 local.to_string(), remote.to_string(), dstport, ns_, target_ns);
  if (family_of(local) != family_of(remote)) return os_error(EINVAL, what + ": the two ends' families differ");
  NlPtr<rtnl_link, link_put> link(rtnl_link_vxlan_alloc());
  if (!link) return os_error(ENOMEM, what);
  rtnl_link_set_name(link.get(), name.c_str());
  if (index > 0) rtnl_link_set_ifindex(link.get(), index);
  auto lo = parse_addr(local.to_string(), family_of(local));
  if (!lo) return lo.error();
  auto re = parse_addr(remote.to_string(), family_of(remote));
  if (!re) return re.error();
  NlPtr<nl_addr, nladdr_put> ll(nl_addr_build(AF_LLC, mac.data(), mac.size()));
  if (!ll) return os_error(ENOMEM, what);
  int err = 0;
  for (int e : {rtnl_link_vxlan_set_id(link.get(), vni), rtnl_link_vxlan_set_local(link.get(), lo.value().get()),
                rtnl_link_vxlan_set_group(link.get(), re.value().get()), rtnl_link_vxlan_set_port(link.get(), dstport),
                rtnl_link_vxlan_set_learning(link.get(), 0)})
    if (e < 0 && err == 0) err = e;
  if (err < 0) return nl_error(err, what);
  rtnl_link_set_addr(link.get(), ll.get());
  if (mtu > 0) rtnl_link_set_mtu(link.get(), mtu);
  if (ns_fd >= 0) rtnl_link_set_ns_fd(link.get(), ns_fd);
  if (up) rtnl_link_set_flags(link.get(), IFF_UP);
  if (int e = rtnl_link_add(sock_.get(), link.get(), NLM_F_CREATE | NLM_F_EXCL); e < 0) return nl_error(e, what);
  log::debug("{}: created vxlan {} VNI {} in {}", ns_, name, vni, target_ns);
  return {};
}

namespace {
// netkit's netlink attributes (linux/if_link.h of 6.7; absent from the
// bookworm headers lanes builds against)
constexpr int kIflaNetkitPeerInfo = 1;
constexpr int kIflaNetkitMode = 5;
constexpr uint32_t kNetkitL3 = 1;
}  // namespace

Status Netlink::create_netkit(const std::string& name, int index, const std::string& peer, int peer_index,
                              int peer_ns_fd, const std::string& peer_ns) {
  std::string what = "creating netkit " + name + " in " + ns_ + " with peer " + peer + " in " + peer_ns;
  MsgBuilder b(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL, what);
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  ifi.ifi_index = index;
  ifi.ifi_flags = IFF_UP;
  ifi.ifi_change = IFF_UP;
  LANES_TRY(b.header(ifi));
  LANES_TRY(b.str(IFLA_IFNAME, name));
  auto linkinfo = b.nest(IFLA_LINKINFO);
  if (!linkinfo) return linkinfo.error();
  LANES_TRY(b.str(IFLA_INFO_KIND, "netkit"));
  auto data = b.nest(IFLA_INFO_DATA);
  if (!data) return data.error();
  LANES_TRY(b.u32(kIflaNetkitMode, kNetkitL3));
  auto peer_info = b.nest(kIflaNetkitPeerInfo);
  if (!peer_info) return peer_info.error();
  auto pifi = b.reserve<ifinfomsg>();
  if (!pifi) return pifi.error();
  pifi.value()->ifi_family = AF_UNSPEC;
  pifi.value()->ifi_index = peer_index;
  LANES_TRY(b.str(IFLA_IFNAME, peer));
  if (peer_ns_fd >= 0) LANES_TRY(b.u32(IFLA_NET_NS_FD, static_cast<uint32_t>(peer_ns_fd)));
  b.end(peer_info.value());
  b.end(data.value());
  b.end(linkinfo.value());
  log::debug("{}: create netkit {} <-> {} {}", ns_, name, peer_ns, peer);
  return send_raw(b.release(), what);
}

Status Netlink::create_dummy(const std::string& name, int index) {
  NlPtr<rtnl_link, link_put> link(rtnl_link_alloc());
  rtnl_link_set_name(link.get(), name.c_str());
  rtnl_link_set_type(link.get(), "dummy");
  if (index > 0) rtnl_link_set_ifindex(link.get(), index);
  rtnl_link_set_flags(link.get(), IFF_UP);
  int err = rtnl_link_add(sock_.get(), link.get(), NLM_F_CREATE | NLM_F_EXCL);
  if (err < 0) return nl_error(err, "creating dummy " + name + " in " + ns_);
  log::debug("{}: created dummy {}", ns_, name);
  return {};
}

Status Netlink::delete_link(const std::string& name) {
  NlPtr<rtnl_link, link_put> link(rtnl_link_alloc());
  rtnl_link_set_name(link.get(), name.c_str());
  if (int err = rtnl_link_delete(sock_.get(), link.get()); err < 0)
    return nl_error(err, "deleting link " + name + " in " + ns_);
  log::debug("{}: deleted link {}", ns_, name);
  return {};
}

Status Netlink::set_link_up(int index, bool up, const std::string& name, uint32_t gso_max_size) {
  std::string what = fmt::format("setting {} {} in {}", name, up ? "up" : "down", ns_);
  MsgBuilder b(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK, what);
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  ifi.ifi_index = index;
  ifi.ifi_flags = up ? IFF_UP : 0;
  ifi.ifi_change = IFF_UP;
  LANES_TRY(b.header(ifi));
  if (gso_max_size) LANES_TRY(b.u32(IFLA_GSO_MAX_SIZE, gso_max_size));
  log::debug("{}: set {} {}", ns_, name, up ? "up" : "down");
  return send_raw(b.release(), what);
}

Result<int> Netlink::ifindex(const std::string& name) {
  rtnl_link* l = nullptr;
  if (int err = rtnl_link_get_kernel(sock_.get(), 0, name.c_str(), &l); err < 0)
    return nl_error(err, "looking up " + name + " in " + ns_);
  int idx = rtnl_link_get_ifindex(l);
  rtnl_link_put(l);
  return idx;
}

Result<std::vector<LinkInfo>> Netlink::links() {
  nl_cache* raw = nullptr;
  if (int err = rtnl_link_alloc_cache(sock_.get(), AF_UNSPEC, &raw); err < 0)
    return nl_error(err, "listing links in " + ns_);
  NlPtr<nl_cache, cache_free> cache(raw);
  std::vector<LinkInfo> out;
  for (nl_object* o = nl_cache_get_first(cache.get()); o; o = nl_cache_get_next(o)) {
    auto* l = reinterpret_cast<rtnl_link*>(o);
    LinkInfo li;
    li.index = rtnl_link_get_ifindex(l);
    li.name = rtnl_link_get_name(l) ? rtnl_link_get_name(l) : "";
    const char* type = rtnl_link_get_type(l);
    li.kind = type ? type : "";
    li.admin_up = rtnl_link_get_flags(l) & IFF_UP;
    li.carrier = rtnl_link_get_carrier(l) != 0;
    li.mtu = static_cast<int>(rtnl_link_get_mtu(l));
    if (nl_addr* a = rtnl_link_get_addr(l); a && nl_addr_get_len(a) == 6)
      std::memcpy(li.mac.data(), nl_addr_get_binary_addr(a), 6);
    li.rx_bytes = rtnl_link_get_stat(l, RTNL_LINK_RX_BYTES);
    li.tx_bytes = rtnl_link_get_stat(l, RTNL_LINK_TX_BYTES);
    li.rx_packets = rtnl_link_get_stat(l, RTNL_LINK_RX_PACKETS);
    li.tx_packets = rtnl_link_get_stat(l, RTNL_LINK_TX_PACKETS);
    li.rx_dropped = rtnl_link_get_stat(l, RTNL_LINK_RX_DROPPED);
    li.tx_dropped = rtnl_link_get_stat(l, RTNL_LINK_TX_DROPPED);
    out.push_back(std::move(li));
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.index < b.index; });
  return out;
}

Result<std::optional<LinkInfo>> Netlink::link(const std::string& name) {
  auto all = links();
  if (!all) return all.error();
  for (auto& l : all.value())
    if (l.name == name) return std::optional<LinkInfo>(l);
  return std::optional<LinkInfo>();
}

namespace {
template <typename A>
Status add_addr(nl_sock* sk, int index, const A& a, int family, const std::string& ifname,
                const std::string& ns) {
  std::string what = "adding " + a.str() + " to " + ifname + " in " + ns;
  auto local = parse_addr(a.str(), family);
  if (!local) return local.error();
  NlPtr<rtnl_addr, addr_put> addr(rtnl_addr_alloc());
  rtnl_addr_set_ifindex(addr.get(), index);
  rtnl_addr_set_family(addr.get(), family);
  if (int err = rtnl_addr_set_local(addr.get(), local.value().get()); err < 0)
    return nl_error(err, what);
  rtnl_addr_set_prefixlen(addr.get(), a.len);
  if (family == AF_INET6) rtnl_addr_set_flags(addr.get(), IFA_F_NODAD);
  if (int err = rtnl_addr_add(sk, addr.get(), NLM_F_CREATE | NLM_F_EXCL); err < 0)
    return nl_error(err, what);
  log::debug("{}: added {} to {}", ns, a.str(), ifname);
  return {};
}
}  // namespace

Status Netlink::add_neighbor(int index, const IpAddr& ip, const MacAddr& mac, const std::string& ifname) {
  std::string what =
      "adding permanent neighbour " + ip.to_string() + " at " + to_string(mac) + " on " + ifname + " in " + ns_;
  int family = family_of(ip);
  auto dst = parse_addr(ip.to_string(), family);
  if (!dst) return dst.error();
  NlPtr<nl_addr, nladdr_put> ll(nl_addr_build(AF_LLC, mac.data(), mac.size()));
  NlPtr<rtnl_neigh, neigh_put> n(rtnl_neigh_alloc());
  if (!ll || !n) return os_error(ENOMEM, what);
  rtnl_neigh_set_ifindex(n.get(), index);
  rtnl_neigh_set_family(n.get(), family);
  if (int err = rtnl_neigh_set_dst(n.get(), dst.value().get()); err < 0) return nl_error(err, what);
  rtnl_neigh_set_lladdr(n.get(), ll.get());
  rtnl_neigh_set_state(n.get(), NUD_PERMANENT);
  if (int err = rtnl_neigh_add(sock_.get(), n.get(), NLM_F_CREATE | NLM_F_REPLACE); err < 0)
    return nl_error(err, what);
  log::debug("{}: permanent neighbour {} at {} on {}", ns_, ip.to_string(), to_string(mac), ifname);
  return {};
}

bool NeighborInfo::counted() const { return (state & (NUD_PERMANENT | NUD_NOARP)) == 0; }

Result<std::vector<NeighborInfo>> Netlink::neighbors() {
  nl_cache* raw = nullptr;
  if (int err = rtnl_neigh_alloc_cache(sock_.get(), &raw); err < 0)
    return nl_error(err, "listing neighbours in " + ns_);
  NlPtr<nl_cache, cache_free> cache(raw);
  std::vector<NeighborInfo> out;
  for (nl_object* o = nl_cache_get_first(cache.get()); o; o = nl_cache_get_next(o)) {
    auto* n = reinterpret_cast<rtnl_neigh*>(o);
    int family = rtnl_neigh_get_family(n);
    if (family != AF_INET && family != AF_INET6) continue;  // bridge FDB entries are not neighbours
    NeighborInfo ni;
    ni.ifindex = rtnl_neigh_get_ifindex(n);
    ni.state = static_cast<uint16_t>(rtnl_neigh_get_state(n));
    if (nl_addr* a = rtnl_neigh_get_dst(n)) {
      char buf[INET6_ADDRSTRLEN + 8];
      nl_addr2str(a, buf, sizeof buf);
      ni.ip = buf;
    }
    out.push_back(std::move(ni));
  }
  return out;
}

Status Netlink::add_address(int index, const IfAddr4& a, const std::string& ifname) {
  return add_addr(sock_.get(), index, a, AF_INET, ifname, ns_);
}
Status Netlink::add_address(int index, const IfAddr6& a, const std::string& ifname) {
  return add_addr(sock_.get(), index, a, AF_INET6, ifname, ns_);
}

Result<std::vector<AddrInfo>> Netlink::addresses() {
  nl_cache* raw = nullptr;
  if (int err = rtnl_addr_alloc_cache(sock_.get(), &raw); err < 0)
    return nl_error(err, "listing addresses in " + ns_);
  NlPtr<nl_cache, cache_free> cache(raw);
  std::vector<AddrInfo> out;
  for (nl_object* o = nl_cache_get_first(cache.get()); o; o = nl_cache_get_next(o)) {
    auto* a = reinterpret_cast<rtnl_addr*>(o);
    char buf[128];
    AddrInfo ai;
    ai.index = rtnl_addr_get_ifindex(a);
    ai.family = rtnl_addr_get_family(a);
    ai.addr = nl_addr2str(rtnl_addr_get_local(a), buf, sizeof buf);
    out.push_back(ai);
  }
  return out;
}

namespace {
// An address of the route's own family, or an error naming it.
Status same_family(const Route& r, const IpAddr& a, const char* role, const std::string& what) {
  if (family_of(a) == r.family()) return {};
  return os_error(EINVAL, fmt::format("{}: {} {} is not of the family of {}", what, role, a.to_string(), r.dst.str()));
}

// DELETING: a route to delete may leave its next hops out (any match).
Status route_msg(MsgBuilder& b, const Route& r, bool deleting) {
  rtmsg rtm{};
  rtm.rtm_family = static_cast<unsigned char>(r.family());
  rtm.rtm_table = static_cast<unsigned char>(r.table < 256 ? r.table : uint32_t{RT_TABLE_UNSPEC});
  rtm.rtm_protocol = static_cast<unsigned char>(r.protocol);
  rtm.rtm_scope = RT_SCOPE_UNIVERSE;
  rtm.rtm_type = std::holds_alternative<Blackhole>(r.to) ? RTN_BLACKHOLE : RTN_UNICAST;
  rtm.rtm_dst_len = static_cast<unsigned char>(r.dst.prefix_length());
  LANES_TRY(b.header(rtm));
  if (!r.dst.is_default()) LANES_TRY(b.addr(RTA_DST, r.dst.address()));
  if (r.table >= 256) LANES_TRY(b.u32(RTA_TABLE, r.table));
  if (r.metric) LANES_TRY(b.u32(RTA_PRIORITY, r.metric));
  if (r.prefsrc) {
    LANES_TRY(same_family(r, *r.prefsrc, "source", b.what()));
    LANES_TRY(b.addr(RTA_PREFSRC, *r.prefsrc));
  }
  if (const auto* nh = std::get_if<NhId>(&r.to)) return b.u32(RTA_NH_ID, nh->id);
  const auto* vias = std::get_if<std::vector<Via>>(&r.to);
  if (!vias) return {};  // a blackhole: no next hop
  if (vias->empty()) return deleting ? Status{} : os_error(EINVAL, b.what() + ": a route needs a next hop");
  for (const auto& v : *vias)
    if (v.gateway) LANES_TRY(same_family(r, *v.gateway, "gateway", b.what()));
  if (vias->size() == 1) {
    const auto& v = vias->front();
    if (v.gateway) LANES_TRY(b.addr(RTA_GATEWAY, *v.gateway));
    if (v.ifindex) LANES_TRY(b.u32(RTA_OIF, static_cast<uint32_t>(v.ifindex)));
    return {};
  }
  auto mp = b.nest(RTA_MULTIPATH);
  if (!mp) return mp.error();
  for (const auto& v : *vias) {
    auto rtnh = b.reserve<rtnexthop>();
    if (!rtnh) return rtnh.error();
    rtnh.value()->rtnh_hops = static_cast<unsigned char>(std::max(1, v.weight) - 1);
    rtnh.value()->rtnh_ifindex = v.ifindex;
    if (v.gateway) LANES_TRY(b.addr(RTA_GATEWAY, *v.gateway));
    rtnh.value()->rtnh_len = static_cast<unsigned short>(b.tail() - reinterpret_cast<char*>(rtnh.value()));
  }
  b.end(mp.value());
  return {};
}
}  // namespace

std::string Route::describe() const {
  std::string s = dst.str();
  if (table != 254) s += fmt::format(" table {}", table);
  if (std::holds_alternative<Blackhole>(to)) s += " blackhole";
  if (const auto* nh = std::get_if<NhId>(&to)) s += fmt::format(" nhid {}", nh->id);
  if (const auto* vias = std::get_if<std::vector<Via>>(&to))
    for (const auto& v : *vias) {
      if (v.gateway) s += " via " + v.gateway->to_string();
      if (v.ifindex) s += fmt::format(" dev {}", v.ifindex);
      if (v.weight != 1) s += fmt::format(" weight {}", v.weight);
    }
  if (prefsrc) s += " src " + prefsrc->to_string();
  if (metric) s += fmt::format(" metric {}", metric);
  return s;
}

std::string Rule::describe() const {
  std::string s = family == AF_INET6 ? "-6" : "-4";
  if (src) s += " from " + src->str();
  if (!iif.empty()) s += " iif " + iif;
  s += fmt::format(" table {}", table);
  if (priority) s += fmt::format(" pref {}", priority);
  return s;
}

Status Netlink::add_route(const Route& r) {
  std::string route = r.describe(), what = "adding route " + route + " in " + ns_;
  MsgBuilder b(RTM_NEWROUTE, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | (r.replace ? NLM_F_REPLACE : NLM_F_EXCL), what);
  LANES_TRY(route_msg(b, r, false));
  log::debug("{}: add route {}", ns_, route);
  return send_raw(b.release(), what);
}

Status Netlink::add_rule(const Rule& r) {
  std::string what = "adding rule " + r.describe() + " in " + ns_;
  MsgBuilder b(RTM_NEWRULE, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL, what);
  if (r.src && r.src->family() != r.family)
    return os_error(EINVAL, what + ": the source is not of the rule's family");
  fib_rule_hdr frh{};
  frh.family = static_cast<unsigned char>(r.family);
  frh.action = FR_ACT_TO_TBL;
  frh.table = r.table < 256 ? static_cast<unsigned char>(r.table) : 0;
  if (r.src) frh.src_len = static_cast<unsigned char>(r.src->prefix_length());
  LANES_TRY(b.header(frh));
  if (r.src) LANES_TRY(b.addr(FRA_SRC, r.src->address()));
  if (!r.iif.empty()) LANES_TRY(b.str(FRA_IIFNAME, r.iif));
  LANES_TRY(b.u32(FRA_TABLE, r.table));
  if (r.priority) LANES_TRY(b.u32(FRA_PRIORITY, r.priority));
  log::debug("{}: add rule {}", ns_, r.describe());
  return send_raw(b.release(), what);
}

Status Netlink::delete_route(const Route& r) {
  std::string route = r.describe(), what = "deleting route " + route + " in " + ns_;
  MsgBuilder b(RTM_DELROUTE, NLM_F_REQUEST | NLM_F_ACK, what);
  LANES_TRY(route_msg(b, r, true));
  log::debug("{}: delete route {}", ns_, route);
  return send_raw(b.release(), what);
}

Result<std::vector<RouteEntry>> Netlink::route_entries(int family) {
  std::vector<RouteEntry> out;
  auto parse = [&](nlmsghdr* h) {
    if (h->nlmsg_type != RTM_NEWROUTE) return;
    auto* rtm = static_cast<rtmsg*>(nlmsg_data(h));
    nlattr* tb[RTA_MAX + 1] = {};
    if (nlmsg_parse(h, sizeof(rtmsg), tb, RTA_MAX, nullptr) < 0) return;
    uint32_t table = tb[RTA_TABLE] ? nla_get_u32(tb[RTA_TABLE]) : rtm->rtm_table;
    if (table != RT_TABLE_MAIN) return;
    RouteEntry e;
    e.family = rtm->rtm_family;
    e.protocol = rtm->rtm_protocol;
    e.type = rtm->rtm_type;
    e.dst = tb[RTA_DST] ? addr_str(nla_data(tb[RTA_DST]), rtm->rtm_family)
                        : (rtm->rtm_family == AF_INET6 ? "::" : "0.0.0.0");
    e.dst += "/" + std::to_string(rtm->rtm_dst_len);
    if (tb[RTA_NH_ID]) e.nh_id = nla_get_u32(tb[RTA_NH_ID]);
    if (tb[RTA_OIF]) e.oif = static_cast<int>(nla_get_u32(tb[RTA_OIF]));
    if (tb[RTA_GATEWAY]) e.gateway = addr_str(nla_data(tb[RTA_GATEWAY]), rtm->rtm_family);
    e.paths = 1;
    if (tb[RTA_MULTIPATH]) {
      int len = nla_len(tb[RTA_MULTIPATH]), n = 0;
      auto* rtnh = static_cast<rtnexthop*>(nla_data(tb[RTA_MULTIPATH]));
      while (len >= static_cast<int>(sizeof(rtnexthop)) && rtnh->rtnh_len >= sizeof(rtnexthop) &&
             rtnh->rtnh_len <= len) {
        ++n;
        if (!(rtnh->rtnh_flags & RTNH_F_DEAD)) e.path_oifs.push_back(rtnh->rtnh_ifindex);
        len -= NLMSG_ALIGN(rtnh->rtnh_len);
        rtnh = reinterpret_cast<rtnexthop*>(reinterpret_cast<char*>(rtnh) + NLMSG_ALIGN(rtnh->rtnh_len));
      }
      e.paths = n;
    } else if (e.oif) {
      e.path_oifs.push_back(e.oif);
    }
    out.push_back(std::move(e));
  };
  rtmsg hdr{};
  hdr.rtm_family = static_cast<unsigned char>(family);
  MsgBuilder b(RTM_GETROUTE, NLM_F_REQUEST | NLM_F_DUMP, "listing routes in " + ns_);
  if (auto st = b.header(hdr); !st) return st.error();
  if (auto st = dump_request(sock_.get(), b.get(), b.what(), parse); !st) return st.error();
  return out;
}

Result<int> Netlink::route_oif(const FlowKey& f) {
  std::string what = fmt::format("looking up the route of {} -> {} in {}", f.src.to_string(), f.dst.to_string(), ns_);
  auto iif = ifindex(f.iif);
  if (!iif) return iif.error();
  rtmsg hdr{};
  hdr.rtm_family = static_cast<unsigned char>(f.dst.is_v6() ? AF_INET6 : AF_INET);
  hdr.rtm_dst_len = f.dst.is_v6() ? 128 : 32;
  hdr.rtm_src_len = hdr.rtm_dst_len;
  MsgBuilder b(RTM_GETROUTE, NLM_F_REQUEST, what);
  if (auto st = b.header(hdr); !st) return st.error();
  for (auto st : {b.addr(RTA_DST, f.dst), b.addr(RTA_SRC, f.src), b.u32(RTA_IIF, static_cast<uint32_t>(iif.value())),
                  b.bytes(RTA_IP_PROTO, &f.proto, 1), b.u16(RTA_SPORT, htons(f.sport)),
                  b.u16(RTA_DPORT, htons(f.dport))})
    if (!st) return st.error();
  int oif = 0;
  auto parse = [&](nlmsghdr* h) {
    if (h->nlmsg_type != RTM_NEWROUTE) return;
    nlattr* tb[RTA_MAX + 1] = {};
    if (nlmsg_parse(h, sizeof(rtmsg), tb, RTA_MAX, nullptr) < 0) return;
    if (tb[RTA_OIF]) oif = static_cast<int>(nla_get_u32(tb[RTA_OIF]));
  };
  auto st = dump_request(sock_.get(), b.get(), what, parse);
  // no route: the kernel answers ENETUNREACH or EHOSTUNREACH (libnl's
  // NLE_FAILURE), a blackhole EINVAL (NLE_INVAL): no device
  if (!st && (st.error().code().value() == NLE_FAILURE || st.error().code().value() == NLE_INVAL)) return 0;
  if (!st) return st.error();
  // the answer is not a dump: libnl stops after it, and the ACK it asked
  // for follows (left unread, the next request would take it as its answer)
  if (int err = nl_wait_for_ack(sock_.get()); err < 0) return nl_error(err, what);
  return oif;
}

Status Netlink::add_nexthop(uint32_t id, int oif, const std::optional<IpAddr>& gateway, bool replace,
                            int protocol, bool onlink) {
  std::string what =
      fmt::format("adding nexthop {} via {} dev {} in {}", id, gateway ? gateway->to_string() : "-", oif, ns_);
  MsgBuilder b(RTM_NEWNEXTHOP, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | (replace ? int{NLM_F_REPLACE} : int{NLM_F_EXCL}),
               what);
  nhmsg nhm{};
  nhm.nh_family = static_cast<unsigned char>(gateway ? family_of(*gateway) : AF_INET);
  nhm.nh_protocol = static_cast<unsigned char>(protocol);
  if (onlink && gateway) nhm.nh_flags = RTNH_F_ONLINK;
  LANES_TRY(b.header(nhm));
  LANES_TRY(b.u32(NHA_ID, id));
  LANES_TRY(b.u32(NHA_OIF, static_cast<uint32_t>(oif)));
  if (gateway) LANES_TRY(b.addr(NHA_GATEWAY, *gateway));
  log::debug("{}: add nexthop {} via {} dev {}", ns_, id, gateway ? gateway->to_string() : "-", oif);
  return send_raw(b.release(), what);
}

Status Netlink::add_nexthop_group(uint32_t id,
                                  const std::vector<std::pair<uint32_t, uint16_t>>& members,
                                  const std::optional<ResilientParams>& res, bool replace, int protocol) {
  std::string what = fmt::format("adding nexthop group {} ({} members) in {}", id, members.size(), ns_);
  MsgBuilder b(RTM_NEWNEXTHOP, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | (replace ? int{NLM_F_REPLACE} : int{NLM_F_EXCL}),
               what);
  nhmsg nhm{};
  nhm.nh_family = AF_UNSPEC;
  nhm.nh_protocol = static_cast<unsigned char>(protocol);
  LANES_TRY(b.header(nhm));
  LANES_TRY(b.u32(NHA_ID, id));
  std::vector<nexthop_grp> grp;
  for (auto [m, w] : members) {
    nexthop_grp g{};
    g.id = m;
    g.weight = static_cast<uint8_t>(std::max<int>(1, w) - 1);
    grp.push_back(g);
  }
  LANES_TRY(b.bytes(NHA_GROUP, grp.data(), grp.size() * sizeof(nexthop_grp)));
  if (res) {
    LANES_TRY(b.u16(NHA_GROUP_TYPE, NEXTHOP_GRP_TYPE_RES));
    auto nest = b.nest(NHA_RES_GROUP);
    if (!nest) return nest.error();
    LANES_TRY(b.u16(NHA_RES_GROUP_BUCKETS, res->buckets));
    // the kernel takes clock_t (USER_HZ = 100 ticks per second)
    LANES_TRY(b.u32(NHA_RES_GROUP_IDLE_TIMER, res->idle_timer_s * 100));
    LANES_TRY(b.u32(NHA_RES_GROUP_UNBALANCED_TIMER, res->unbalanced_timer_s * 100));
    b.end(nest.value());
  }
  log::debug("{}: add nexthop group {} with {} members{}", ns_, id, members.size(),
             res ? " (resilient)" : "");
  return send_raw(b.release(), what);
}

Status Netlink::delete_nexthop(uint32_t id) {
  std::string what = fmt::format("deleting nexthop {} in {}", id, ns_);
  MsgBuilder b(RTM_DELNEXTHOP, NLM_F_REQUEST | NLM_F_ACK, what);
  nhmsg nhm{};
  LANES_TRY(b.header(nhm));
  LANES_TRY(b.u32(NHA_ID, id));
  log::debug("{}: delete nexthop {}", ns_, id);
  return send_raw(b.release(), what);
}

Result<std::vector<NexthopInfo>> Netlink::nexthops() {
  std::vector<NexthopInfo> out;
  auto parse = [&](nlmsghdr* h) {
    if (h->nlmsg_type != RTM_NEWNEXTHOP) return;
    auto* nhm = static_cast<nhmsg*>(nlmsg_data(h));
    nlattr* tb[NHA_MAX + 1] = {};
    if (nlmsg_parse(h, sizeof(nhmsg), tb, NHA_MAX, nullptr) < 0) return;
    NexthopInfo ni;
    ni.protocol = nhm->nh_protocol;
    if (tb[NHA_ID]) ni.id = nla_get_u32(tb[NHA_ID]);
    if (tb[NHA_OIF]) ni.oif = static_cast<int>(nla_get_u32(tb[NHA_OIF]));
    if (tb[NHA_GATEWAY]) ni.gateway = addr_str(nla_data(tb[NHA_GATEWAY]), nhm->nh_family);
    if (tb[NHA_GROUP]) {
      ni.is_group = true;
      auto* g = static_cast<nexthop_grp*>(nla_data(tb[NHA_GROUP]));
      size_t n = static_cast<size_t>(nla_len(tb[NHA_GROUP])) / sizeof(nexthop_grp);
      for (size_t i = 0; i < n; ++i)
        ni.members.emplace_back(g[i].id, static_cast<uint16_t>(g[i].weight + 1));
    }
    if (tb[NHA_GROUP_TYPE] && nla_get_u16(tb[NHA_GROUP_TYPE]) == NEXTHOP_GRP_TYPE_RES) {
      ni.resilient = true;
      if (tb[NHA_RES_GROUP]) {
        nlattr* rt[NHA_RES_GROUP_MAX + 1] = {};
        if (nla_parse_nested(rt, NHA_RES_GROUP_MAX, tb[NHA_RES_GROUP], nullptr) == 0 &&
            rt[NHA_RES_GROUP_BUCKETS])
          ni.buckets = nla_get_u16(rt[NHA_RES_GROUP_BUCKETS]);
      }
    }
    out.push_back(std::move(ni));
  };
  if (auto st = dump(sock_.get(), RTM_GETNEXTHOP, sizeof(nhmsg), "listing nexthops in " + ns_, parse); !st)
    return st.error();
  return out;
}

std::pair<uint32_t, std::vector<uint32_t>> Netlink::route_group(const std::string& prefix) {
  auto routes = route_entries(prefix.find(':') != std::string::npos ? AF_INET6 : AF_INET);
  if (!routes) return {};
  for (const auto& r : routes.value()) {
    if (r.dst != prefix || r.nh_id == 0) continue;
    auto nhs = nexthops();
    if (!nhs) return {};
    for (const auto& n : nhs.value())
      if (n.id == r.nh_id) {
        std::vector<uint32_t> m;
        for (auto [id, w] : n.members) m.push_back(id);
        return {r.nh_id, m};
      }
  }
  return {};
}

Result<std::vector<uint32_t>> Netlink::nexthop_buckets(uint32_t group) {
  auto b = nexthop_bucket_activity(group);
  if (!b) return b.error();
  std::vector<uint32_t> out;
  for (const auto& x : b.value()) out.push_back(x.nh_id);
  return out;
}

Result<std::vector<BucketInfo>> Netlink::nexthop_bucket_activity(uint32_t group) {
  std::map<uint16_t, BucketInfo> buckets;
  std::string what = fmt::format("listing buckets of nexthop group {} in {}", group, ns_);
  MsgBuilder msg(RTM_GETNEXTHOPBUCKET, NLM_F_REQUEST | NLM_F_DUMP, what);
  nhmsg nhm{};
  if (auto st = msg.header(nhm); !st) return st.error();
  if (auto st = msg.u32(NHA_ID, group); !st) return st.error();
  auto parse = [&](nlmsghdr* h) {
    if (h->nlmsg_type != RTM_NEWNEXTHOPBUCKET) return;
    nlattr* tb[NHA_MAX + 1] = {};
    if (nlmsg_parse(h, sizeof(nhmsg), tb, NHA_MAX, nullptr) < 0 || !tb[NHA_RES_BUCKET]) return;
    nlattr* bt[NHA_RES_BUCKET_MAX + 1] = {};
    if (nla_parse_nested(bt, NHA_RES_BUCKET_MAX, tb[NHA_RES_BUCKET], nullptr) < 0) return;
    if (bt[NHA_RES_BUCKET_INDEX] && bt[NHA_RES_BUCKET_NH_ID])
      buckets[nla_get_u16(bt[NHA_RES_BUCKET_INDEX])] = {
          nla_get_u32(bt[NHA_RES_BUCKET_NH_ID]),
          bt[NHA_RES_BUCKET_IDLE_TIME] ? nla_get_u64(bt[NHA_RES_BUCKET_IDLE_TIME]) : 0};
  };
  if (auto st = dump_retrying(sock_.get(), msg.get(), what, parse, [&] { buckets.clear(); }); !st) return st.error();
  std::vector<BucketInfo> out;
  for (auto& [i, b] : buckets) out.push_back(b);
  return out;
}

Result<std::map<uint32_t, std::vector<uint32_t>>> Netlink::all_nexthop_buckets() {
  std::map<uint32_t, std::map<uint16_t, uint32_t>> buckets;
  MsgBuilder msg(RTM_GETNEXTHOPBUCKET, NLM_F_REQUEST | NLM_F_DUMP, "listing the buckets of every nexthop group in " + ns_);
  nhmsg nhm{};
  if (auto st = msg.header(nhm); !st) return st.error();
  auto parse = [&](nlmsghdr* h) {
    if (h->nlmsg_type != RTM_NEWNEXTHOPBUCKET) return;
    nlattr* tb[NHA_MAX + 1] = {};
    if (nlmsg_parse(h, sizeof(nhmsg), tb, NHA_MAX, nullptr) < 0 || !tb[NHA_ID] || !tb[NHA_RES_BUCKET]) return;
    nlattr* bt[NHA_RES_BUCKET_MAX + 1] = {};
    if (nla_parse_nested(bt, NHA_RES_BUCKET_MAX, tb[NHA_RES_BUCKET], nullptr) < 0) return;
    if (bt[NHA_RES_BUCKET_INDEX] && bt[NHA_RES_BUCKET_NH_ID])
      buckets[nla_get_u32(tb[NHA_ID])][nla_get_u16(bt[NHA_RES_BUCKET_INDEX])] = nla_get_u32(bt[NHA_RES_BUCKET_NH_ID]);
  };
  if (auto st = dump_retrying(sock_.get(), msg.get(), msg.what(), parse,
                              [&] { buckets.clear(); });
      !st)
    return st.error();
  std::map<uint32_t, std::vector<uint32_t>> out;
  for (auto& [g, b] : buckets)
    for (auto& [i, id] : b) out[g].push_back(id);
  return out;
}

Status Netlink::set_tbf(int index, uint64_t rate_bps, const std::string& ifname) {
  std::string what = "setting TBF " + std::to_string(rate_bps) + " bit/s on " + ifname + " in " + ns_;
  NlPtr<rtnl_qdisc, qdisc_put> q(rtnl_qdisc_alloc());
  auto* tc = TC_CAST(q.get());
  rtnl_tc_set_ifindex(tc, index);
  rtnl_tc_set_parent(tc, TC_H_ROOT);
  rtnl_tc_set_handle(tc, TC_HANDLE(1, 0));
  if (int err = rtnl_tc_set_kind(tc, "tbf"); err < 0) return nl_error(err, what);
  uint64_t bytes_per_s = rate_bps / 8;
  // burst: at least 4 ms of traffic (timer granularity), and never below
  // the largest GSO packet with its segments' headers (about 69 KB): a
  // packet above the burst is cut into segments in software, and every
  // segment then costs the whole path a packet (at 100 Mbit/s that took
  // 83% of 2 cores in softirq). Queue: about 20 ms at line rate on top of
  // the burst, and never below 4 full-size frames for each of 64 flows
  // (below that, many flows on a slow line lose packets on every round
  // trip and sit in retransmission timeouts: 64 flows at 10 Mbit/s carried
  // 86% of the line with 121 KB).
  uint64_t burst = std::max<uint64_t>(bytes_per_s / 250, 128 * 1024);
  uint64_t limit = burst + std::max<uint64_t>(bytes_per_s / 50, 256 * 1514);
  rtnl_qdisc_tbf_set_limit(q.get(), static_cast<int>(limit));
  rtnl_qdisc_tbf_set_rate(q.get(), static_cast<int>(bytes_per_s), static_cast<int>(burst), 0);
  if (int err = rtnl_qdisc_add(sock_.get(), q.get(), NLM_F_CREATE | NLM_F_REPLACE); err < 0)
    return nl_error(err, what);
  log::debug("{}: TBF {} bit/s on {} (burst {} B, limit {} B)", ns_, rate_bps, ifname, burst, limit);
  return {};
}

Result<std::vector<QdiscInfo>> Netlink::qdiscs() {
  nl_cache* raw = nullptr;
  if (int err = rtnl_qdisc_alloc_cache(sock_.get(), &raw); err < 0)
    return nl_error(err, "listing qdiscs in " + ns_);
  NlPtr<nl_cache, cache_free> cache(raw);
  std::vector<QdiscInfo> out;
  for (nl_object* o = nl_cache_get_first(cache.get()); o; o = nl_cache_get_next(o)) {
    auto* q = reinterpret_cast<rtnl_qdisc*>(o);
    auto* tc = TC_CAST(q);
    QdiscInfo qi;
    qi.index = rtnl_tc_get_ifindex(tc);
    qi.kind = rtnl_tc_get_kind(tc) ? rtnl_tc_get_kind(tc) : "";
    qi.handle = rtnl_tc_get_handle(tc);
    qi.parent = rtnl_tc_get_parent(tc);
    qi.bytes = rtnl_tc_get_stat(tc, RTNL_TC_BYTES);
    qi.packets = rtnl_tc_get_stat(tc, RTNL_TC_PACKETS);
    qi.drops = rtnl_tc_get_stat(tc, RTNL_TC_DROPS);
    if (qi.kind == "tbf") {
      qi.rate_bps = static_cast<uint64_t>(rtnl_qdisc_tbf_get_rate(q)) * 8;
      qi.burst_bytes = static_cast<uint32_t>(rtnl_qdisc_tbf_get_rate_bucket(q));
      qi.limit_bytes = static_cast<uint32_t>(rtnl_qdisc_tbf_get_limit(q));
    }
    out.push_back(qi);
  }
  return out;
}

// ---- link monitor ----

Result<LinkMonitor> LinkMonitor::open_in(int ns_fd, const std::string& ns) {
  std::optional<LinkMonitor> out;
  auto st = run_in_netns(
      ns_fd,
      [&]() -> Status {
        UniquePtr<nl_sock, nl_socket_free> sk(nl_socket_alloc());
        if (!sk) return os_error(ENOMEM, "allocating a netlink socket");
        nl_socket_disable_seq_check(sk.get());
        if (int err = nl_connect(sk.get(), NETLINK_ROUTE); err < 0)
          return nl_error(err, "connecting the link monitor in " + ns);
        if (int err = nl_socket_add_membership(sk.get(), RTNLGRP_LINK); err < 0)
          return nl_error(err, "subscribing to link events in " + ns);
        nl_socket_set_nonblocking(sk.get());
        out.emplace(LinkMonitor(std::move(sk)));
        return {};
      },
      "the link monitor in " + ns);
  if (!st) return st.error();
  return std::move(*out);
}

int LinkMonitor::fd() const { return nl_socket_get_fd(sock_.get()); }

Result<std::vector<LinkEvent>> LinkMonitor::read_events() {
  std::vector<LinkEvent> events;
  auto cb = [](nl_msg* m, void* arg) -> int {
    nlmsghdr* h = nlmsg_hdr(m);
    if (h->nlmsg_type != RTM_NEWLINK && h->nlmsg_type != RTM_DELLINK) return NL_OK;
    auto* ifi = static_cast<ifinfomsg*>(nlmsg_data(h));
    nlattr* tb[IFLA_MAX + 1] = {};
    if (nlmsg_parse(h, sizeof(ifinfomsg), tb, IFLA_MAX, nullptr) < 0) return NL_OK;
    LinkEvent e;
    e.index = ifi->ifi_index;
    if (tb[IFLA_IFNAME]) e.name = nla_get_string(tb[IFLA_IFNAME]);
    e.admin_up = ifi->ifi_flags & IFF_UP;
    e.carrier = tb[IFLA_CARRIER] ? nla_get_u8(tb[IFLA_CARRIER]) != 0 : (ifi->ifi_flags & IFF_LOWER_UP) != 0;
    e.deleted = h->nlmsg_type == RTM_DELLINK;
    static_cast<std::vector<LinkEvent>*>(arg)->push_back(std::move(e));
    return NL_OK;
  };
  nl_socket_modify_cb(sock_.get(), NL_CB_VALID, NL_CB_CUSTOM, cb, &events);
  nl_cb* socket_cb = nl_socket_get_cb(sock_.get());
  int err = 0;
  for (int resyncs = 0;;) {
    // non-blocking: each call reads one datagram; 0 or EAGAIN means drained
    while ((err = nl_recvmsgs_report(sock_.get(), socket_cb)) > 0) {
    }
    // ENOBUFS (libnl: NLE_NOMEM): events came faster than they were read
    // (64 ports losing carrier at once) and the kernel dropped some. The
    // links' state is asked afresh on this socket: the dump's answers are
    // link messages like the events, so the caller sees every link's
    // present state (callers treat an event that changes nothing as
    // nothing).
    if (err != -NLE_NOMEM || resyncs++ == 3) break;
    ++overruns_;
    if (int e = nl_rtgen_request(sock_.get(), RTM_GETLINK, AF_UNSPEC, NLM_F_DUMP); e < 0) {
      err = e;
      break;
    }
  }
  nl_cb_put(socket_cb);
  if (err < 0 && err != -NLE_AGAIN) return nl_error(err, "reading link events");
  return events;
}

}  // namespace lanes::testbed
