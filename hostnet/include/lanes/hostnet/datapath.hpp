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
struct bpf_object;

namespace lanes::hostnet {

struct DatapathNic {
  int ifindex = 0;
  bool up = true;
  int numa = 0;
  std::string gw4, gw6;
  std::string job4, job6;
  uint64_t line_rate = 0;  // bytes/s; 0: unshaped (never full)
};

struct DatapathConfig {
  int mode = LANES_MODE_BPF;
  std::vector<DatapathNic> nics;
  std::vector<int> container_ifindex;               // host side of each container link
  std::vector<std::array<uint8_t, 6>> container_mac; // container side MAC per link
  std::vector<std::array<uint8_t, 6>> host_mac;      // host side MAC per link
  std::string task4, task6;
  std::vector<uint32_t> cpu_node;                    // CPU → NUMA node
  uint64_t window_ns = 0;                            // load measurement window (0: the program's 50 ms)
};

class Datapath {
 public:
  Datapath();
  ~Datapath();  // closes the skeleton; attached programs stay with their filters
  Datapath(Datapath&&) noexcept;
  Datapath& operator=(Datapath&&) noexcept;

  static testbed::Result<Datapath> open_and_load();
  // The user's own object (<job program="FILE.bpf.o">) in place of lanes':
  // checked against the ABI (check_egress_program), then loaded.
  static testbed::Result<Datapath> open_and_load_file(const std::string& path);
  testbed::Status configure(const DatapathConfig& cfg);
  // A NIC that comes back starts a new epoch: open flows rebalance onto it.
  testbed::Status set_nic_up(int nic, bool up);
  // Stops the programs' clock at NS (0: the kernel's clock again). For
  // tests, which drive the load windows with it.
  testbed::Status set_clock(uint64_t ns);
  // tc ingress of IFINDEX in the calling thread's namespace
  testbed::Status attach_egress(int ifindex);
  testbed::Status attach_ingress(int ifindex);
  // Whether the program set has an ingress program (a user's may not:
  // ingress then goes through the host's routing)
  bool has_ingress() const;
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
  int map_fd(const char* name) const;   // -1: the object has no such map
  int prog_fd(const char* name) const;  // -1: no such program
  datapath_bpf* skel_ = nullptr;
  bpf_object* obj_ = nullptr;  // the user's object (owned), or null for lanes' skeleton
  std::vector<int> links_;  // bpf_link fds (netkit)
};

// Whether the BPF object at PATH can stand in for lanes' egress program,
// read from its ELF without loading anything: a tc program `lanes_egress`
// (and `lanes_egress_l3` for netkit devices, `lanes_ingress` optionally),
// and the maps lanes fills, each of the type and sizes hostnet_abi.h gives:
// `config` and `nics` required, `cpu_node`, `nic_stats` and `flows`
// checked where present. The error says what is missing or wrong.
testbed::Status check_egress_program(const std::string& path);

// CPU → NUMA node from /sys/devices/system/node; with a single node the
// CPUs are split evenly over NODES emulated nodes.
std::vector<uint32_t> cpu_to_node(int emulated_nodes);

}  // namespace lanes::hostnet
