#pragma once
// IP addresses and prefixes (Boost.Asio's types) and the arithmetic the
// address plan needs.

#include <sys/socket.h>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/network_v4.hpp>
#include <boost/asio/ip/network_v6.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lanes::testbed {

using Ip4 = boost::asio::ip::address_v4;
using Ip6 = boost::asio::ip::address_v6;
using Net4 = boost::asio::ip::network_v4;
using Net6 = boost::asio::ip::network_v6;

// The ranges reserved for benchmarking (RFC 2544, RFC 5180): every address
// lanes uses lies inside them.
Net4 benchmark_range4();  // 198.18.0.0/15
Net6 benchmark_range6();  // 2001:2::/48

std::optional<Ip4> parse_ip4(const std::string& s);
std::optional<Ip6> parse_ip6(const std::string& s);
std::optional<Net4> parse_net4(const std::string& s);  // "a.b.c.d/len", host bits must be zero
std::optional<Net6> parse_net6(const std::string& s);

// Address OFFSET positions after the network address of NET.
Ip4 nth(const Net4& net, uint64_t offset);
Ip6 nth(const Net6& net, uint64_t offset);
// Number of addresses in NET (saturates at 2^63 for IPv6).
uint64_t size_of(const Net4& net);
uint64_t size_of(const Net6& net);
bool contains(const Net4& outer, const Net4& inner);
bool contains(const Net6& outer, const Net6& inner);
bool contains(const Net4& net, const Ip4& a);
bool contains(const Net6& net, const Ip6& a);
bool overlaps(const Net4& a, const Net4& b);
bool overlaps(const Net6& a, const Net6& b);
// The OFFSET-th subnet of length LEN inside NET.
Net4 subnet(const Net4& net, int len, uint64_t index);
Net6 subnet(const Net6& net, int len, uint64_t index);

// An interface address: address plus prefix length ("198.18.128.1/31").
struct IfAddr4 {
  Ip4 addr;
  int len = 32;
  std::string str() const { return addr.to_string() + "/" + std::to_string(len); }
  bool operator==(const IfAddr4&) const = default;
};
struct IfAddr6 {
  Ip6 addr;
  int len = 128;
  std::string str() const { return addr.to_string() + "/" + std::to_string(len); }
  bool operator==(const IfAddr6&) const = default;
};

// An address of either family.
using IpAddr = boost::asio::ip::address;
std::optional<IpAddr> parse_ip(const std::string& s);
inline int family_of(const IpAddr& a) { return a.is_v6() ? AF_INET6 : AF_INET; }

// A prefix of either family: a route's destination ("198.19.0.0/22",
// "2001:2::1/128", the default route of a family is its /0).
class IpNet {
 public:
  IpNet(const Net4& n) : v6_(false), a4_(n.network()), len_(n.prefix_length()) {}  // NOLINT: a prefix is a prefix
  IpNet(const Net6& n) : v6_(true), a6_(n.network()), len_(n.prefix_length()) {}   // NOLINT
  // ADDR/32 or ADDR/128
  static IpNet host(const IpAddr& a);
  static IpNet default_route(int family);
  // "a.b.c.d/len", "x::y/len" (host bits zero), a bare address (a host
  // prefix), or "default" of FAMILY
  static std::optional<IpNet> parse(const std::string& s, int family = AF_INET);

  int family() const { return v6_ ? AF_INET6 : AF_INET; }
  bool is_v6() const { return v6_; }
  IpAddr address() const { return v6_ ? IpAddr(a6_) : IpAddr(a4_); }
  int prefix_length() const { return len_; }
  bool is_default() const { return len_ == 0; }
  // "198.19.0.0/22"; "default" for a /0
  std::string str() const;
  bool operator==(const IpNet& o) const {
    return v6_ == o.v6_ && len_ == o.len_ && (v6_ ? a6_ == o.a6_ : a4_ == o.a4_);
  }

 private:
  bool v6_ = false;
  Ip4 a4_;
  Ip6 a6_;
  int len_ = 0;
};

// The fewest prefixes that hold exactly ADDRESSES (of either family, each
// family's in order): 198.19.1.0 to .255 is 198.19.1.0/24. A set that
// matches one by one (a routing daemon's neighbor set) matches the same
// addresses at a fraction of the cost.
std::vector<IpNet> collapse(const std::vector<IpAddr>& addresses);

}  // namespace lanes::testbed
