#pragma once
// What the scenario runner asks of the live fabric — a switch's routes,
// nexthop groups and their buckets, gobgpd's RIB and sessions — behind one
// interface, so the logic over the answers (live assertions, waits) is
// unit-tested with a fake. LiveFabric asks a running LiveRun.

#include <cstdint>
#include <sys/socket.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <memory>
#include <string>
#include <vector>

#include "lanes/testbed/netns.hpp"
#include "lanes/testbed/netlink.hpp"
#include "lanes/testbed/run_registry.hpp"
#include "lanes/testbed/live_run.hpp"
#include "lanes/testbed/netlink.hpp"
#include "lanes/switches/gobgp_client.hpp"
#include "lanes/switches/switches.hpp"

namespace lanes::scenarios {

// A BGP session as a switch counts it: what its neighbor announced and what
// import policy rejected of it.
struct SessionCounts {
  std::string neighbor;
  uint64_t received = 0;
  uint64_t rejected = 0;
};

class FabricView {
 public:
  virtual ~FabricView() = default;
  // NODE's kernel (a node index of the run's topology)
  virtual testbed::Result<std::vector<testbed::RouteEntry>> routes(int node, int family) = 0;
  virtual testbed::Result<std::vector<testbed::NexthopInfo>> nexthops(int node) = 0;
  // every resilient group's buckets: group id → nexthop id per bucket
  virtual testbed::Result<std::map<uint32_t, std::vector<uint32_t>>> buckets(int node) = 0;
  // gobgpd on NODE: every path of FAMILY, or of PREFIX alone
  virtual testbed::Result<std::vector<switches::BgpRoute>> rib(int node, int family, const std::string& prefix = "") = 0;
  virtual testbed::Result<std::vector<SessionCounts>> sessions(int node) = 0;
  // NODE's neighbour entries (ARP and ND), or, JOB, those of its job container's
  virtual testbed::Result<std::vector<testbed::NeighborInfo>> neighbors(int node, bool job) = 0;
  // the device NODE's kernel forwards each of FLOWS out of (0: no route)
  virtual testbed::Result<std::vector<int>> flow_oifs(int node, const std::vector<testbed::FlowKey>& flows) = 0;
};

// A view of a run's kernels and speakers on this machine: a run this
// process holds, or (at_rest) the part of a run that another process
// holds here (a shard's, asked by the first rank of a run over several
// machines), its namespaces opened as they are asked for.
class LiveFabric : public FabricView {
 public:
  explicit LiveFabric(testbed::LiveRun& run);
  static std::unique_ptr<LiveFabric> at_rest(const testbed::RunRegistry& reg, const std::string& run_id,
                                             const testbed::Topology& topo);
  testbed::Result<std::vector<testbed::RouteEntry>> routes(int node, int family) override;
  testbed::Result<std::vector<testbed::NexthopInfo>> nexthops(int node) override;
  testbed::Result<std::map<uint32_t, std::vector<uint32_t>>> buckets(int node) override;
  testbed::Result<std::vector<switches::BgpRoute>> rib(int node, int family, const std::string& prefix) override;
  testbed::Result<std::vector<SessionCounts>> sessions(int node) override;
  testbed::Result<std::vector<testbed::NeighborInfo>> neighbors(int node, bool job) override;
  testbed::Result<std::vector<int>> flow_oifs(int node, const std::vector<testbed::FlowKey>& flows) override;

 private:
  LiveFabric() = default;
  switches::SpeakerRef speaker(int node);
  // NODE's namespace fd and netlink socket
  testbed::Result<int> ns_fd(int node);
  testbed::Result<testbed::Netlink*> netlink(int node);
  const testbed::RunRegistry* reg_ = nullptr;
  std::string id_;
  const testbed::Topology* topo_ = nullptr;
  testbed::LiveRun* run_ = nullptr;  // or the namespaces opened here:
  std::map<int, std::pair<testbed::Netns, testbed::Netlink>> opened_;
};

// One FabricView call as JSON and back: what the first rank of a run over
// several machines asks of another machine's nodes (lanes fabric-query
// there answers with answer_query over an at-rest LiveFabric).
nlohmann::json answer_query(FabricView& view, const nlohmann::json& query);

// A view of a run over several machines: each call asks NODE's machine
// (ASK: the query as JSON text → the answer's text, or an error).
class RemoteFabric : public FabricView {
 public:
  using Ask = std::function<testbed::Result<std::string>(int node, const std::string& query)>;
  explicit RemoteFabric(Ask ask) : ask_(std::move(ask)) {}
  testbed::Result<std::vector<testbed::RouteEntry>> routes(int node, int family) override;
  testbed::Result<std::vector<testbed::NexthopInfo>> nexthops(int node) override;
  testbed::Result<std::map<uint32_t, std::vector<uint32_t>>> buckets(int node) override;
  testbed::Result<std::vector<switches::BgpRoute>> rib(int node, int family, const std::string& prefix) override;
  testbed::Result<std::vector<SessionCounts>> sessions(int node) override;
  testbed::Result<std::vector<testbed::NeighborInfo>> neighbors(int node, bool job) override;
  testbed::Result<std::vector<int>> flow_oifs(int node, const std::vector<testbed::FlowKey>& flows) override;

 private:
  template <class T>
  testbed::Result<T> call(int node, nlohmann::json q);
  Ask ask_;
};

// Each job host's task-IP group at its rack switch, read through a view:
// one route dump and one nexthop dump per switch, however many hosts.
class TaskGroups {
 public:
  // the groups of the task IPs of FAMILY (AF_INET: the /32s, AF_INET6: the
  // /128s; 0: each host's first family, IPv6 for an IPv6-only job)
  TaskGroups(const testbed::Topology& topo, FabricView& fabric, int family = 0)
      : topo_(topo), fabric_(fabric), family_(family) {}
  // the task prefix of HOST ("198.19.0.1/32", "2001:2:0:100::1/128")
  std::string prefix(const std::string& host) const;
  int switch_of(const std::string& host) const;
  int family_of(const std::string& host) const;
  // HOST → its group id at its switch (0: no route, or one without a group)
  testbed::Result<std::map<std::string, uint32_t>> ids(const std::vector<std::string>& hosts);
  // HOST → its group's members (a multipath route's without a group: the
  // devices of its live paths); a dump that fails counts as no members
  std::map<std::string, std::vector<uint32_t>> members(const std::vector<std::string>& hosts);
  // HOST → the switch port each of FLOWS flows towards its task IP leaves
  // by, as the switch's kernel forwards them, whatever programmed it (a
  // resilient group, a multipath route): the flows enter where traffic
  // for the host comes from outside its rack's host ports (a server's
  // port, else the uplink, else another host's port), with ports spread
  // as a workload's connections are
  testbed::Result<std::map<std::string, std::vector<uint32_t>>> flow_ports(const std::vector<std::string>& hosts,
                                                                         int flows = 256);
  // HOST → its group's buckets (nexthop id per bucket)
  testbed::Result<std::map<std::string, std::vector<uint32_t>>> buckets(const std::vector<std::string>& hosts);
  bool all_have(const std::vector<std::string>& hosts, size_t count);

 private:
  const testbed::Topology& topo_;
  FabricView& fabric_;
  int family_;
};

}  // namespace lanes::scenarios
