// The subflows of an MPTCP connection, from the kernel's MPTCP socket
// options. Apart from engine.cpp: <linux/tcp.h>'s tcp_info (with the
// acknowledged bytes) cannot be included beside glibc's <netinet/tcp.h>.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <linux/mptcp.h>
#include <linux/tcp.h>

#include <array>

#include "engine.hpp"

namespace lanes::traffic_engine {

namespace {

constexpr size_t kMost = 16;  // the kernel allows 8 subflows more than the first

std::string text_of(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET)
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
  else if (sa->sa_family == AF_INET6) {
    const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&a))  // an IPv4 subflow of a socket of both families: as IPv4
      ::inet_ntop(AF_INET, &a.s6_addr[12], buf, sizeof buf);
    else
      ::inet_ntop(AF_INET6, &a, buf, sizeof buf);
  }
  return buf;
}

int port_of(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
  if (sa->sa_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port);
  return 0;
}

// getsockopt(OPT) of an array of T after its mptcp_subflow_data: how many it filled
template <typename T>
size_t subflow_array(int fd, int opt, std::array<T, kMost>& out) {
  struct {
    mptcp_subflow_data d;
    std::array<T, kMost> items;
  } buf{};
  buf.d.size_subflow_data = sizeof buf.d;
  buf.d.size_user = sizeof(T);
  socklen_t len = sizeof buf;
  if (::getsockopt(fd, SOL_MPTCP, opt, &buf, &len) != 0) return 0;
  out = buf.items;
  return std::min<size_t>(buf.d.num_subflows, kMost);
}

}  // namespace

// Addresses and TCP counters are two calls over the same list of subflows:
// they are paired by position only when both counted the same.
std::vector<scenarios::traffic::Subflow> mptcp_subflows(int fd) {
  if (!g_mptcp) return {};
  std::array<mptcp_subflow_addrs, kMost> addrs{};
  std::array<tcp_info, kMost> infos{};
  size_t n = subflow_array(fd, MPTCP_SUBFLOW_ADDRS, addrs);
  size_t m = subflow_array(fd, MPTCP_TCPINFO, infos);
  std::vector<scenarios::traffic::Subflow> out;
  for (size_t i = 0; i < n; ++i) {
    scenarios::traffic::Subflow s;
    s.local = text_of(&addrs[i].sa_local);
    s.remote = text_of(&addrs[i].sa_remote);
    s.local_port = port_of(&addrs[i].sa_local);
    s.remote_port = port_of(&addrs[i].sa_remote);
    if (m == n) {
      s.bytes_acked = infos[i].tcpi_bytes_acked;
      s.retransmits = infos[i].tcpi_total_retrans;
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace lanes::traffic_engine
