#include "lanes/testbed/address.hpp"

#include <algorithm>
#include <array>

namespace lanes::testbed {

Net4 benchmark_range4() { return boost::asio::ip::make_network_v4("198.18.0.0/15"); }
Net6 benchmark_range6() { return boost::asio::ip::make_network_v6("2001:2::/48"); }

std::optional<Ip4> parse_ip4(const std::string& s) {
  boost::system::error_code ec;
  auto a = boost::asio::ip::make_address_v4(s, ec);
  if (ec) return std::nullopt;
  return a;
}
std::optional<Ip6> parse_ip6(const std::string& s) {
  boost::system::error_code ec;
  auto a = boost::asio::ip::make_address_v6(s, ec);
  if (ec) return std::nullopt;
  return a;
}
std::optional<Net4> parse_net4(const std::string& s) {
  if (s.find('/') == std::string::npos) return std::nullopt;
  boost::system::error_code ec;
  auto n = boost::asio::ip::make_network_v4(s, ec);
  if (ec || n.network() != n.address()) return std::nullopt;
  return n;
}
std::optional<Net6> parse_net6(const std::string& s) {
  if (s.find('/') == std::string::npos) return std::nullopt;
  boost::system::error_code ec;
  auto n = boost::asio::ip::make_network_v6(s, ec);
  if (ec || n.network() != n.address()) return std::nullopt;
  return n;
}

Ip4 nth(const Net4& net, uint64_t offset) {
  return Ip4(static_cast<uint32_t>(net.network().to_uint() + offset));
}

Ip6 nth(const Net6& net, uint64_t offset) {
  auto b = net.network().to_bytes();
  // add OFFSET to the 128-bit big-endian number
  unsigned carry = 0;
  for (int i = 15; i >= 0; --i) {
    unsigned sum = b[i] + static_cast<unsigned>(offset & 0xff) + carry;
    b[i] = static_cast<unsigned char>(sum & 0xff);
    carry = sum >> 8;
    offset >>= 8;
  }
  return Ip6(b);
}

uint64_t size_of(const Net4& net) { return uint64_t{1} << (32 - net.prefix_length()); }
uint64_t size_of(const Net6& net) {
  int bits = 128 - net.prefix_length();
  return bits >= 63 ? (uint64_t{1} << 63) : (uint64_t{1} << bits);
}

bool contains(const Net4& outer, const Net4& inner) {
  return inner.prefix_length() >= outer.prefix_length() &&
         Net4(inner.address(), outer.prefix_length()).network() == outer.network();
}
bool contains(const Net6& outer, const Net6& inner) {
  return inner.prefix_length() >= outer.prefix_length() &&
         Net6(inner.address(), outer.prefix_length()).network() == outer.network();
}
bool contains(const Net4& net, const Ip4& a) { return contains(net, Net4(a, 32)); }
bool contains(const Net6& net, const Ip6& a) { return contains(net, Net6(a, 128)); }
bool overlaps(const Net4& a, const Net4& b) { return contains(a, b) || contains(b, a); }
bool overlaps(const Net6& a, const Net6& b) { return contains(a, b) || contains(b, a); }

Net4 subnet(const Net4& net, int len, uint64_t index) {
  return Net4(nth(net, index << (32 - len)), static_cast<unsigned short>(len));
}
Net6 subnet(const Net6& net, int len, uint64_t index) {
  // index shifted into the bits just below LEN; lanes only ever needs the
  // low 64 bits for that (len >= 64 or small indices).
  auto b = net.network().to_bytes();
  int shift = 128 - len;  // bit position of the subnet index
  // write index << shift into the address bytes (OR, since those bits are 0)
  for (int bit = 0; bit < 64 && (index >> bit) != 0; ++bit) {
    if ((index >> bit) & 1) {
      int pos = shift + bit;  // from the least significant end
      if (pos >= 128) break;
      b[15 - pos / 8] |= static_cast<unsigned char>(1u << (pos % 8));
    }
  }
  return Net6(Ip6(b), static_cast<unsigned short>(len));
}

std::optional<IpAddr> parse_ip(const std::string& s) {
  if (auto a = parse_ip4(s)) return IpAddr(*a);
  if (auto a = parse_ip6(s)) return IpAddr(*a);
  return std::nullopt;
}

IpNet IpNet::host(const IpAddr& a) {
  if (a.is_v6()) return IpNet(Net6(a.to_v6(), 128));
  return IpNet(Net4(a.to_v4(), 32));
}

IpNet IpNet::default_route(int family) {
  if (family == AF_INET6) return IpNet(Net6(Ip6::any(), 0));
  return IpNet(Net4(Ip4::any(), 0));
}

std::optional<IpNet> IpNet::parse(const std::string& s, int family) {
  if (s == "default") return default_route(family);
  if (s.find('/') == std::string::npos) {
    if (auto a = parse_ip(s)) return host(*a);
    return std::nullopt;
  }
  if (auto n = parse_net4(s)) return IpNet(*n);
  if (auto n = parse_net6(s)) return IpNet(*n);
  return std::nullopt;
}

std::string IpNet::str() const {
  if (len_ == 0) return "default";
  return (v6_ ? a6_.to_string() : a4_.to_string()) + "/" + std::to_string(len_);
}

std::vector<IpNet> collapse(const std::vector<IpAddr>& addresses) {
  __extension__ typedef unsigned __int128 U;  // an IPv6 address as a number
  auto value = [](const IpAddr& a) -> U {
    if (a.is_v4()) return a.to_v4().to_uint();
    U v = 0;
    for (auto b : a.to_v6().to_bytes()) v = v << 8 | b;
    return v;
  };
  auto prefix = [](bool v6, U v, int len) -> IpNet {
    if (!v6) return IpNet(Net4(Ip4(static_cast<uint32_t>(v)), len));
    Ip6::bytes_type b{};
    for (int i = 15; i >= 0; --i, v >>= 8) b[static_cast<size_t>(i)] = static_cast<uint8_t>(v);
    return IpNet(Net6(Ip6(b), len));
  };
  std::vector<IpNet> out;
  for (bool v6 : {false, true}) {
    int bits = v6 ? 128 : 32;
    std::vector<U> vs;
    for (const auto& a : addresses)
      if (a.is_v6() == v6) vs.push_back(value(a));
    std::sort(vs.begin(), vs.end());
    vs.erase(std::unique(vs.begin(), vs.end()), vs.end());
    for (size_t i = 0; i < vs.size();) {
      size_t j = i;  // the run of consecutive addresses from vs[i] to vs[j]
      while (j + 1 < vs.size() && vs[j + 1] == vs[j] + 1) ++j;
      U lo = vs[i], hi = vs[j];
      for (;;) {
        // the largest block that starts at LO (its alignment) and ends by HI
        int len = bits;
        while (len > 1) {  // (a /0 would need every address there is)
          U size = U(1) << (bits - len + 1);
          if ((lo & (size - 1)) != 0 || lo + (size - 1) > hi) break;
          --len;
        }
        out.push_back(prefix(v6, lo, len));
        U last = lo + ((U(1) << (bits - len)) - 1);
        if (last >= hi) break;
        lo = last + 1;
      }
      i = j + 1;
    }
  }
  return out;
}

}  // namespace lanes::testbed
