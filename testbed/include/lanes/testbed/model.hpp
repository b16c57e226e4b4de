#pragma once
// The topology model: what a topology file describes, fully resolved —
// every parametric count expanded, every address assigned, every interface
// named. Built by load_topology(); read by the builder, the CLI and the
// modules that deploy on top of it.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lanes/testbed/impair.hpp"
#include "lanes/testbed/address.hpp"

namespace lanes::testbed {

struct SourceLoc {
  std::string file;
  int line = 0;
};

enum class NodeKind { spine, rack_switch, host, server };
const char* to_string(NodeKind k);

enum class ServerRole { storage, param };
const char* to_string(ServerRole r);

enum class EgressMode { single, ecmp, bpf, bpf_numa, bind, active_backup, mptcp };
const char* to_string(EgressMode m);
std::optional<EgressMode> parse_egress_mode(const std::string& s);

enum class VipMode { per_nic, add_path };
const char* to_string(VipMode m);
std::optional<VipMode> parse_vip_mode(const std::string& s);

// The BGP software a switch runs: GoBGP with lanes' FIB agent, or FRR
// (bgpd, zebra and staticd) programming the kernel itself.
enum class SwitchStack { gobgp, frr };
const char* to_string(SwitchStack s);
std::optional<SwitchStack> parse_switch_stack(const std::string& s);

// One end of a point-to-point link, inside a node's namespace.
struct Endpoint {
  int node = -1;      // index into Topology::nodes
  std::string ifname; // at most 15 characters
  IfAddr4 addr4;
  IfAddr6 addr6;
};

enum class LinkKind { host_nic, server, fabric };
const char* to_string(LinkKind k);

// A veth pair. Side A is the upper device (switch or spine), side B the
// lower one (host NIC, server, rack switch uplink).
struct Link {
  LinkKind kind = LinkKind::fabric;
  Endpoint a;
  Endpoint b;
  uint64_t rate_bps = 0;  // TBF line rate on both sides; 0 = unshaped
  Impairment impair;      // on both sides (impair.hpp)
  SourceLoc impair_loc;   // the element that asked for it
  int nic = -1;           // host NIC index for host_nic links
  SourceLoc loc;
};

struct Nic {
  int index = 0;
  uint64_t rate_bps = 0;
  Impairment impair;  // its link's, both ways (<nic loss="..."/>)
  SourceLoc impair_loc;
  int numa = 0;
  int link = -1;    // index into Topology::links
  IfAddr4 job_addr4; // the container's address for this NIC (inside the rack block)
  IfAddr6 job_addr6;
  // the host <-> container link for this NIC (/31, /127 from the hostlink pools)
  IfAddr4 host_side4, cont_side4;
  IfAddr6 host_side6, cont_side6;
};

// The address families a job's network has (<job family="...">): both, or
// one. An IPv6-only job has no IPv4 task IP or NIC addresses, and its
// injector sessions run over IPv6; an IPv4-only one the other way round.
enum class JobFamily { dual, ipv4, ipv6 };
const char* to_string(JobFamily f);
std::optional<JobFamily> parse_job_family(const std::string& s);

// Who announces a job's task IPs (<job injector="...">): lanes' own
// speaker, Debian's ExaBGP or BIRD 2 configured by lanes from the same
// plan, or the user's own command (exec).
enum class InjectorKind { lanes, exabgp, bird, exec };
const char* to_string(InjectorKind k);
std::optional<InjectorKind> parse_injector_kind(const std::string& s);

struct Job {
  std::string name;
  Ip4 task_ip4;  // planned for every job (the numbering stays put); used only where has4()
  Ip6 task_ip6;  // likewise, where has6()
  EgressMode egress = EgressMode::ecmp;
  VipMode vip = VipMode::per_nic;
  JobFamily family = JobFamily::dual;
  // program= (egress bpf or bpf-numa): the user's own tc object in place
  // of lanes' datapath, an absolute path; empty: lanes' own
  std::string egress_program;
  InjectorKind injector = InjectorKind::lanes;
  // injector-cmd= (injector="exec"): the user's own VIP injector, run as
  // sh -c in the job's container in place of lanes'
  std::string injector_cmd;
  bool has4() const { return family != JobFamily::ipv6; }
  bool has6() const { return family != JobFamily::ipv4; }
};

// The most machines a run over several spans (machine="N" takes 0..N-1).
inline constexpr int kMaxMachines = 1024;

struct Node {
  std::string name;
  NodeKind kind = NodeKind::host;
  int rack = -1;               // index into Topology::racks, -1 for spines and fabric servers
  uint32_t asn = 0;            // switches and spines; hosts get one for their injector
  Ip4 router_id;               // switches and spines: loopback / router id
  Ip6 loopback6;
  std::vector<Nic> nics;       // hosts
  std::optional<Job> job;      // hosts
  ServerRole role = ServerRole::storage;  // servers
  SwitchStack stack = SwitchStack::gobgp;  // rack switches and spines
  // machine="N" on the node's element (or its rack's): pinned to the Nth
  // machine of a run over several (partition.hpp); -1: lanes places it
  int machine = -1;
  SourceLoc loc;
  // a host whose job's egress is M
  bool on_egress(EgressMode m) const { return job && job->egress == m; }
};

// The rack switch's BGP and FIB settings (attributes of <rack>).
struct SwitchParams {
  uint16_t buckets = 128;        // resilient group size per task IP
  uint32_t idle_timer_s = 1;     // resilient group idle timer
  // a group left unbalanced this long (a next hop came back) moves busy
  // buckets onto the returned member too; 0 = only idle buckets move
  uint32_t unbalanced_timer_s = 1;
  uint32_t max_prefixes = 4;     // per host session and address family
  uint32_t hold_time_s = 9;      // BGP hold time offered to the hosts
  // BFD between the switch's ports and the job hosts' NICs (RFC 5880/5881):
  // the interval each side sends at once the session is up, and the
  // multiplier (the detection time is their product); 0 = no BFD
  uint32_t bfd_interval_ms = 100;
  uint32_t bfd_multiplier = 3;
  // bfd-interval= was written (in the topology or a scenario's override):
  // without it the interval is lanes' to choose (adapt_bfd_default)
  bool bfd_interval_given = false;
};

struct Rack {
  std::string name;
  int switch_node = -1;
  SwitchParams sw;
  Net4 block4;  // the rack's task-IP block and aggregate
  Net6 block6;
  std::vector<int> hosts;
  std::vector<int> servers;
  SourceLoc loc;
};

struct AddressPools {
  Net4 loopback4;  // router ids
  Net6 loopback6;
  Net4 infra4;     // /31 point-to-point links
  Net6 infra6;     // /127 point-to-point links
  Net4 hostlink4;  // /31 host <-> container links, one per host NIC
  Net6 hostlink6;
  Net4 task4;      // carved into one block per rack
  Net6 task6;
  int rack_block4_len = 22;
  int rack_block6_len = 64;
};

struct Topology {
  std::string name;
  std::string file;
  SourceLoc loc;  // the <topology> element
  AddressPools pools;
  std::vector<Node> nodes;
  std::vector<Link> links;
  std::vector<Rack> racks;
  ImpairEngine impair_engine = ImpairEngine::automatic;

  int find_node(const std::string& name) const;  // -1 if absent
  // the first host whose job's egress is M (nullptr: none)
  const Node* first_on_egress(EgressMode m) const {
    for (const auto& n : nodes)
      if (n.on_egress(m)) return &n;
    return nullptr;
  }
  // NODE is a host with a job (what workloads, faults and assertions act on)
  bool is_job_host(const std::string& node) const;
  std::vector<int> links_of(int node) const;
  size_t count(NodeKind k) const;
};

// ADD-PATH mode runs this many injector sessions (on NICs 0 and 1), each
// carrying every NIC's path: the loss of any one NIC leaves a session that
// withdraws exactly that NIC's path.
inline constexpr int kAddPathSessions = 2;
// Whether a host's VIP injector has a session on NIC `nic`: every NIC in
// per-NIC mode, the first kAddPathSessions in ADD-PATH mode.
bool has_injector_session(const Node& host, int nic);
// The address that session uses: the job container's address for the NIC
// (its IPv6 one for an IPv6-only job: the session runs over IPv6).
std::string injector_session_address(const Node& host, int nic);
// The switch's end of it: the switch port's address of the same family.
std::string injector_session_peer(const Topology& t, const Node& host, int nic);

}  // namespace lanes::testbed
