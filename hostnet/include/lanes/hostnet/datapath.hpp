#pragma once
// The BPF host datapath (bpf/datapath.bpf.c) through its libbpf skeleton:
// open, load, fill the maps, attach — each a step that fails with a message.
// Attachments use libbpf's tc hook API (libbpf 1.1 has no TCX or netkit
// helpers); only the filters lanes created are replaced or removed.

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "hostnet_abi.h"
#include "lanes/testbed/result.hpp"

struct datapath_bpf;

namespace lanes::hostnet {

struct DatapathNic {
  int ifindex = 0;
  bool up = true;
  int numa = 0;
  std::string gw4, gw6;
  std::string job4, job6;
};

struct DatapathConfig {
  int mode = LANES_MODE_BPF;
  std::vector<DatapathNic> nics;
  std::vector<int> container_ifindex;               // host side of each container link
  std::vector<std::array<uint8_t, 6>> container_mac; // container side MAC per link
  std::vector<std::array<uint8_t, 6>> host_mac;      // host side MAC per link
  std::string task4, task6;
  std::vector<uint32_t> cpu_node;                    // CPU → NUMA node
};

class Datapath {
 public:
  Datapath();
  ~Datapath();  // closes the skeleton; attached programs stay with their filters
  Datapath(Datapath&&) noexcept;
  Datapath& operator=(Datapath&&) noexcept;

  static testbed::Result<Datapath> open_and_load();
  testbed::Status configure(const DatapathConfig& cfg);
  // A NIC that comes back starts a new epoch: open flows rebalance onto it.
  testbed::Status set_nic_up(int nic, bool up);
  // tc ingress of IFINDEX in the calling thread's namespace
  testbed::Status attach_egress(int ifindex);
  testbed::Status attach_ingress(int ifindex);
  // A netkit primary device (L3): the egress program through a bpf_link at
  // BPF_NETKIT_PRIMARY (traffic the container sends). The link lives as
  // long as this object.
  testbed::Status attach_netkit_egress(int ifindex);

  testbed::Result<std::vector<lanes_nic_stats>> stats(int n_nics) const;
  // Active (not closed) flows per NIC in the flow table.
  testbed::Result<std::vector<uint64_t>> flows_per_nic(int n_nics) const;
  // Every flow in the table.
  testbed::Result<std::vector<std::pair<lanes_flow_key, lanes_flow>>> flows() const;
  int egress_fd() const;
  int ingress_fd() const;
  int flows_fd() const;

 private:
  testbed::Status attach(int prog_fd, int ifindex, const char* what);
  datapath_bpf* skel_ = nullptr;
  std::vector<int> links_;  // bpf_link fds (netkit)
};

// CPU → NUMA node from /sys/devices/system/node; with a single node the
// CPUs are split evenly over NODES emulated nodes.
std::vector<uint32_t> cpu_to_node(int emulated_nodes);

}  // namespace lanes::hostnet
