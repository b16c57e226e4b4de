#pragma once
// The host agent's work, in a host's namespace: loads and attaches the BPF
// datapath in the bpf egress modes, and carries each NIC's carrier to its
// container link, the container's nexthop group and the datapath (a NIC
// that goes down takes its container link down and out of the BPF
// program's choices; when it returns, so do the link and its next hops).
// lanes-host-agent runs it on its event loop.

#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "lanes/testbed/netlink.hpp"
#include "lanes/testbed/result.hpp"
#include "lanes/testbed/run_layout.hpp"
#include "lanes/hostnet/datapath.hpp"

namespace lanes::hostnet {

struct HostAgentConfig {
  struct Nic {
    int index = 0;
    std::string ifname, jnic, eth;  // the NIC, its host-side container link, the container's side
    int numa = 0;
    std::string gw4, gw6, job4, job6, host_side4, host_side6, cont_side4, cont_side6;
    std::string gw_mac;  // the switch port's MAC: the NIC's permanent neighbour for gw4 and gw6
    uint32_t table = 0;  // the NIC's own routing table (0: none)
    uint64_t rate_bps = 0;  // its line rate (0: unshaped): the datapath's measure of full
    bool operator==(const Nic&) const = default;
  };
  std::string host;
  std::string mode = "ecmp";  // egress mode: single, ecmp, bpf, bpf-numa, bind, active-backup
  std::string program;        // the user's egress BPF object in place of lanes' ("" = lanes')
  std::string container_netns;
  std::string task4, task6;
  std::string bfd_socket;  // lanes-bfdd's verdicts on the NICs ("" = no BFD)
  std::vector<Nic> nics;

  // The host agent's config file (host_agent_files(...).config).
  static HostAgentConfig from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
  bool operator==(const HostAgentConfig&) const = default;
};

// What the host agent publishes (host_agent_files(...).state) and what
// lanes status and the scenario runner read, through read_host_agent_state:
// no one else spells its file or its keys.
struct HostAgentState {
  struct Counters {  // the datapath's, per NIC (bpf modes)
    uint64_t tx_packets = 0, tx_bytes = 0, rx_packets = 0, rx_bytes = 0;
    uint64_t flows_active = 0, flows_total = 0;
    uint64_t moved = 0;       // flows moved away from the NIC when it went down
    uint64_t rebalanced = 0;  // flows moved onto it from a busier one (load, or a NIC's return)
    uint64_t spilled = 0;     // flows placed or moved onto it off their CPU's node (bpf-numa)
    uint64_t rate = 0;        // bytes/s over its last measured window
    bool operator==(const Counters&) const = default;
  };
  struct Nic {
    int index = 0;
    std::string ifname;
    bool up = true, carrier = true, bfd_ok = true;  // up: in use (carrier, and BFD agrees)
    int numa = 0;
    std::optional<Counters> bpf;   // the datapath's counters (bpf modes)
    std::optional<uint64_t> flows;  // flows the datapath placed on it (bpf modes)
    bool operator==(const Nic&) const = default;
  };
  struct Flow {  // one flow of the datapath's flow table
    int nic = -1;
    uint64_t bytes = 0, packets = 0;
    bool closed = false;
    int proto = 0, family = 0, sport = 0, dport = 0;
    int node = 0;       // the NUMA node of the CPU that opened it
    int nic_node = 0;   // the node of the NIC it runs on
    uint64_t rate = 0;  // bytes/s over its last measured window
    bool operator==(const Flow&) const = default;
  };
  std::string host, mode;
  std::vector<Nic> nics;
  std::optional<std::vector<Flow>> flows;  // the 256 largest flows (bpf modes)

  static HostAgentState from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
  bool operator==(const HostAgentState&) const = default;
};

struct HostAgentFiles {
  std::string config;  // <run>/hosts/<host>/host-agent.json (HostAgentConfig)
  std::string state;   // <run>/hosts/<host>/host-agent-state.json (HostAgent::state)
};

// The container's egress groups (1000 IPv4, 1001 IPv6): 64 buckets and an
// idle timer of 0, so a change of members balances the table at once
// (host_agent.cpp, set_egress_groups).
testbed::ResilientParams egress_group_params();

HostAgentFiles host_agent_files(const testbed::RunLayout& run, const std::string& host);
// The state HOST's agent last published; nullopt while it has published
// none, or when the file cannot be read or parsed.
std::optional<HostAgentState> read_host_agent_state(const testbed::RunLayout& run, const std::string& host);

class HostAgent {
 public:
  // Opens the host's and the container's netlink sockets, finds every
  // NIC's links and, in the bpf modes, loads and attaches the datapath.
  static testbed::Result<std::unique_ptr<HostAgent>> open(HostAgentConfig cfg);

  // A link of the host's namespace changed (from the link monitor): a
  // NIC's carrier takes it in or out of use; a container link's host side
  // (jnic<k>) that comes back up gets what its going down flushed.
  void link_changed(const testbed::LinkEvent& e);
  // A link of the container's namespace changed: an eth<k> that comes back
  // up likewise.
  void container_link_changed(const testbed::LinkEvent& e);
  // lanes-bfdd's verdicts: a NIC whose path failed is out of use as if it
  // had lost carrier, until BFD is up on it again. NICs not named keep
  // the verdict they had.
  void bfd_changed(const std::map<std::string, bool>& usable);
  // NIC state and the datapath's counters (the links' own counters are the
  // kernel's to tell: lanes status and the runner read them over netlink).
  HostAgentState state() const;
  size_t nic_count() const { return nics_.size(); }
  // The datapath's counters move without an event (the bpf modes): only
  // then has state() to be read again on a timer.
  bool has_counters() const { return dp_.has_value(); }

 private:
  struct Nic : HostAgentConfig::Nic {
    int nic_idx = 0, jnic_idx = 0, eth_idx = 0;
    bool up = true;                    // in use: carrier, and BFD does not say its path failed
    bool carrier = true, bfd_ok = true;
    bool veth = true;                  // the container link has neighbours (netkit is L3)
    testbed::MacAddr eth_mac{};        // the container side's MAC
    testbed::MacAddr jnic_mac{};       // the host side's
    // the container link's two ends as last seen (admin up and running):
    // a return that this agent did not make is healed (heal)
    bool jnic_ok = true, eth_ok = true;
    bool eth_flushed = false;  // the container side was taken down: its own routes went with it
  };
  HostAgent(HostAgentConfig cfg, testbed::Netlink host, testbed::Netlink container)
      : cfg_(std::move(cfg)), hnl_(std::move(host)), cnl_(std::move(container)) {}
  void apply(Nic& s, bool up);
  void update(Nic& s);
  void restore_routes(const Nic& s, bool job);
  void heal(Nic& s, const char* why);
  void restore_container_route(const Nic& s);
  void restore_backup_route(const Nic& s);
  void container_link_seen(Nic& s, bool jnic_side, const testbed::LinkEvent& e);
  void set_egress_groups();
  void report_balance();
  std::vector<uint32_t> egress_members(uint32_t base) const;

  HostAgentConfig cfg_;
  testbed::Netlink hnl_, cnl_;
  std::vector<Nic> nics_;
  std::optional<Datapath> dp_;
};

}  // namespace lanes::hostnet
