#pragma once
// A fabric whose answers the test writes (scenarios' unit tier).

#include <sys/socket.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "lanes/scenarios/fabric_view.hpp"

namespace lanes::test {

namespace tb = lanes::testbed;
namespace sw = lanes::switches;
using lanes::scenarios::FabricView;
using lanes::scenarios::SessionCounts;

class FakeFabric : public FabricView {
 public:
  std::map<std::pair<int, int>, std::vector<tb::RouteEntry>> fib;  // (node, family)
  std::map<int, std::vector<tb::NexthopInfo>> groups;
  std::map<int, std::map<uint32_t, std::vector<uint32_t>>> bucket_table;
  std::map<std::pair<int, int>, std::vector<sw::BgpRoute>> paths;  // (node, family)
  std::map<int, std::vector<SessionCounts>> counts;
  int rib_calls = 0;

  tb::Result<std::vector<tb::RouteEntry>> routes(int node, int family) override { return fib[{node, family}]; }
  tb::Result<std::vector<tb::NexthopInfo>> nexthops(int node) override { return groups[node]; }
  tb::Result<std::map<uint32_t, std::vector<uint32_t>>> buckets(int node) override { return bucket_table[node]; }
  tb::Result<std::vector<sw::BgpRoute>> rib(int node, int family, const std::string& prefix) override {
    ++rib_calls;
    std::vector<sw::BgpRoute> out;
    for (const auto& r : paths[{node, family}])
      if (prefix.empty() || r.prefix == prefix) out.push_back(r);
    return out;
  }
  tb::Result<std::vector<SessionCounts>> sessions(int node) override { return counts[node]; }
  std::map<std::pair<int, bool>, std::vector<tb::NeighborInfo>> neighbor_table;  // (node, job container)
  tb::Result<std::vector<tb::NeighborInfo>> neighbors(int node, bool job) override { return neighbor_table[{node, job}]; }
  // the device of each flow at a node: FLOW_PORT(node, flow), or 0
  std::function<int(int, const tb::FlowKey&)> flow_port;
  tb::Result<std::vector<int>> flow_oifs(int node, const std::vector<tb::FlowKey>& flows) override {
    std::vector<int> out;
    for (const auto& f : flows) out.push_back(flow_port ? flow_port(node, f) : 0);
    return out;
  }

  // PREFIX at NODE points at group GROUP with MEMBERS
  void group(int node, const std::string& prefix, uint32_t id, std::vector<uint32_t> members) {
    tb::RouteEntry r;
    r.family = AF_INET;
    r.dst = prefix;
    r.nh_id = id;
    fib[{node, AF_INET}].push_back(r);
    tb::NexthopInfo g;
    g.id = id;
    g.is_group = true;
    for (auto m : members) g.members.emplace_back(m, 1);
    groups[node].push_back(g);
  }
  void route(int node, int family, const std::string& prefix) {
    tb::RouteEntry r;
    r.family = family;
    r.dst = prefix;
    fib[{node, family}].push_back(r);
  }
};

}  // namespace lanes::test
