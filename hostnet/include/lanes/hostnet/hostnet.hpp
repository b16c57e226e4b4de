#pragma once
// A multi-NIC host and its job container.
//
// Every host with a job gets a container namespace `lanes-<run>-<host>.job`
// that sees NIC k through its own device: a netkit pair where the kernel
// has netkit, a veth pair otherwise (host side `jnic<k>`, container side
// `eth<k>`, a /31 and /127 from the hostlink pools). The container holds
// the task IP on its loopback and the job's address for NIC k on eth<k>.
//
// Egress, chosen per job:
//   single    everything leaves through NIC 0
//   ecmp      a resilient multipath group over every NIC (L4 hash, sticky)
//   bpf       the container spreads over eth<k> like ecmp, and lanes' BPF
//             program on every jnic<k> picks the least-loaded physical NIC
//             per new flow and redirects straight to it (bpf_redirect_neigh)
//   bpf-numa  like bpf, preferring NICs on the sending CPU's NUMA node
// A flow from the job's NIC-k address always leaves through NIC k.
// Ingress to the job's addresses: host routes to the container; in the bpf
// modes a program on each physical NIC hands packets straight to the
// container (bpf_redirect_peer).
//
// The host agent (lanes-host-agent, supervised) follows NIC carrier: a NIC
// that goes down takes its container link down with it (so the container's
// group and the BPF program stop using it) and brings it back.

#include <nlohmann/json.hpp>
#include <string>

#include "lanes/testbed/deploy.hpp"
#include "lanes/testbed/kernel_plan.hpp"
#include "lanes/testbed/model.hpp"
#include "lanes/testbed/netlink.hpp"
#include "lanes/testbed/role.hpp"
#include "lanes/hostnet/host_agent.hpp"

namespace lanes::hostnet {

// The container namespace of HOST in run RUN_ID.
std::string job_netns(const std::string& run_id, const std::string& host);
// egress active-backup: the metric of the container's default route by NIC
// K (the lowest index that has carrier carries everything)
uint32_t active_backup_metric(int nic);
// mptcp: the id of the container's MPTCP endpoint for NIC k's address (k ≥ 1)
uint8_t mptcp_endpoint_id(int nic, bool v6);
// Names of NIC k's container link on each side.
std::string host_side_ifname(int nic);
std::string container_ifname(int nic);

// Egress mode actually used for JOB given the kernel's features (bpf modes
// fall back to ecmp when BPF cannot be loaded).
testbed::EgressMode effective_mode(testbed::EgressMode wanted, const testbed::KernelFeatures& f, std::string* why);

// The permanent neighbours of the link between HOST and its container for
// NIC: on the host's jnic<NIC> the container end's addresses, in the
// container on eth<NIC> the host end's (both families; veth links only).
struct ContainerNeighbor {
  bool in_container = false;
  std::string ifname;
  testbed::IpAddr ip;
  testbed::MacAddr mac{};
};
std::vector<ContainerNeighbor> container_neighbors(const testbed::Topology& t, int host, int nic);

// What HOST's job container and routing are in the kernel (deploy_host
// applies it once the container's namespace exists): NIC k's link pair
// (netkit where NETKIT, else veth with permanent neighbours), the
// addresses on both sides, per-NIC tables and source rules in the
// container, its default route (NIC 0 alone with single egress, else a
// resilient group over every NIC), and on the host the task and job routes
// towards the container and per-NIC tables out of each NIC. HOST_NS and
// JOB_NS name the two namespaces; NIC_IFINDEX[k] is NIC k's interface index
// on the host (the fabric plan's).
testbed::KernelPlan host_plan(const testbed::Topology& t, int host, testbed::EgressMode mode, bool netkit,
                              const std::string& host_ns, const std::string& job_ns,
                              const std::vector<int>& nic_ifindex);

// Builds the container of HOST: namespace, links, addresses, routes and
// rules on both sides.
testbed::Status deploy_host(testbed::DeployContext& ctx, int host);

// Every host with a job: its container, egress routes, datapath and agent.
testbed::Status deploy_all(testbed::DeployContext& ctx);

// The host role: deploy_all, and the host agent's state as its status.
class HostRole final : public testbed::Role {
 public:
  const char* name() const override { return "hostnet"; }
  testbed::Status deploy(testbed::DeployContext& ctx) const override { return deploy_all(ctx); }
  const char* status_key() const override { return "hostnet"; }
  nlohmann::json status(const testbed::RunRegistry& reg, const std::string& run_id, const testbed::Node& node,
                        int netns_fd, bool detailed) const override;
  void print_status(const nlohmann::json& view, const nlohmann::json& node, std::ostream& out) const override;
};

// The host agent's configuration for HOST.
HostAgentConfig host_agent_config(const testbed::Topology& t, int host, const std::string& run_id,
                                  testbed::EgressMode mode);

}  // namespace lanes::hostnet
