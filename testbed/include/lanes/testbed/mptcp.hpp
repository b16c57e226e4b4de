#pragma once
// The kernel's MPTCP path manager of one namespace, over generic netlink
// (family "mptcp_pm", libnl-genl): its limits and its endpoints, what
// `ip mptcp limits` and `ip mptcp endpoint` set. The in-kernel path
// manager makes a subflow from every "subflow" endpoint of the side that
// connected, and announces every "signal" endpoint to the peer; the
// accepting side makes none of its own.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lanes/testbed/address.hpp"
#include "lanes/testbed/result.hpp"

struct nl_sock;

namespace lanes::testbed {

// The most subflows the kernel lets a connection add, and the most
// endpoints a namespace may have, both families together (MPTCP_PM_ADDR_MAX;
// a ninth endpoint is refused with ERANGE)
inline constexpr uint32_t kMptcpMaxSubflows = 8;
inline constexpr size_t kMptcpMaxEndpoints = 8;
// How many of a job's NICS beyond the first get an endpoint (egress mptcp:
// NIC k's address, k ≥ 1) when its job has FAMILIES address families: the
// kernel's 8 shared among them
inline size_t mptcp_endpoint_nics(size_t nics, int families) {
  size_t per_family = kMptcpMaxEndpoints / static_cast<size_t>(families < 1 ? 1 : families);
  return nics == 0 ? 0 : (nics - 1 < per_family ? nics - 1 : per_family);
}

struct MptcpLimits {
  uint32_t subflows = 0;           // additional subflows a connection may have
  uint32_t add_addr_accepted = 0;  // announced addresses of the peer it makes subflows to
  bool operator==(const MptcpLimits&) const = default;
};

struct MptcpEndpoint {
  uint8_t id = 0;  // 1..255 (0 is the first subflow's)
  IpAddr addr;
  int ifindex = 0;  // the device its subflows are bound to (0: routed)
  bool subflow = false, signal = false;
  bool operator==(const MptcpEndpoint&) const = default;
  // "198.18.0.2 id 1 subflow dev 12"
  std::string describe() const;
};

class MptcpPm {
 public:
  // A path-manager socket in the namespace NS_FD (NS names it in
  // messages); an error saying so where the kernel has no MPTCP.
  static Result<MptcpPm> open_in(int ns_fd, const std::string& ns);
  MptcpPm(MptcpPm&&) noexcept;
  MptcpPm& operator=(MptcpPm&&) noexcept;
  ~MptcpPm();

  Status set_limits(const MptcpLimits& l);
  Result<MptcpLimits> limits();
  Status add_endpoint(const MptcpEndpoint& e);
  Result<std::vector<MptcpEndpoint>> endpoints();

 private:
  MptcpPm(nl_sock* sk, int family, std::string ns);
  struct Free {
    void operator()(nl_sock* s) const;
  };
  std::unique_ptr<nl_sock, Free> sk_;
  int family_ = 0;
  std::string ns_;
};

}  // namespace lanes::testbed
