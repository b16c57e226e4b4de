#pragma once
// Kernel features lanes adapts to, probed at run time in a scratch network
// namespace of its own (never the root namespace): netkit devices, the
// netem qdisc, nexthop objects and resilient nexthop groups; and whether
// BPF programs load (a program is loaded, never attached).

#include <nlohmann/json.hpp>
#include <string>

#include "lanes/testbed/model.hpp"
#include "lanes/testbed/result.hpp"

namespace lanes::testbed {

struct KernelFeatures {
  std::string kernel;  // uname release
  bool netkit = false;
  bool dummy = false;
  bool netem = false;
  bool tbf = false;
  bool nexthop_objects = false;
  bool resilient_groups = false;
  bool mptcp = false;  // a namespace's sockets may be MPTCP (CONFIG_MPTCP, net.mptcp.enabled): egress mptcp
  bool rootless = false;  // lanes runs without root, in the user's own user namespace (rootless.hpp)
  bool bpf = false;       // this process can load a tc BPF program
  std::string bpf_error;  // why not, when it cannot
  std::string notes;  // what a missing feature disables

  // which link impairments lanes can apply here, and how
  std::string impairments() const;
  // who lanes runs as, and what that withholds
  std::string privileges() const;
  nlohmann::json to_json() const;
};

KernelFeatures probe_kernel_features();

// What TOPO asks of the kernel that it lacks: an impairment that needs
// netem on a kernel without it, named at its element's file:line; a job on
// egress mptcp where there is no MPTCP. Probes only when the topology asks.
Status check_kernel_for(const Topology& topo);
// Why TOPO's delays cannot be had on this machine ("" when they can):
// impair-engine="netem" where the kernel has none, "lanes" (or "auto"
// without netem) where lanes cannot load BPF. Says nothing of whether TOPO
// asks for a delay at all.
std::string delay_engine_problem(const Topology& topo);  // (this machine's features, probed once)
std::string delay_engine_problem(ImpairEngine e, const KernelFeatures& f);

}  // namespace lanes::testbed
