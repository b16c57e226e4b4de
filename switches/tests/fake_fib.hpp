#pragma once
// A kernel for the FIB agent's unit tests, and the laptop rack's agent config.

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "lanes/testbed/topology_loader.hpp"
#include "lanes/switches/fib_agent.hpp"
#include "lanes/switches/switch_config.hpp"
#include "support.hpp"

namespace lanes::test {

using namespace lanes::testbed;
using namespace lanes::switches;

// A kernel that keeps nexthops, groups and routes in maps, and drops a
// port's next hops when told its carrier went (as the kernel does).
class FakeFib : public KernelFib {
 public:
  std::map<std::string, int> ifindexes;
  std::map<uint32_t, std::pair<int, std::string>> nhs;  // id → oif, gw
  std::map<uint32_t, std::vector<uint32_t>> groups;
  std::map<uint32_t, std::map<uint32_t, uint16_t>> weights;  // group → member → weight
  std::map<uint32_t, std::vector<BucketInfo>> bucket_activity;  // what buckets() says
  std::map<std::string, uint32_t> routes_;  // prefix → group
  std::set<int> down;                        // oifs without carrier
  std::map<std::pair<int, std::string>, std::string> neighbours;  // (oif, ip) -> MAC
  int group_writes = 0, route_writes = 0;

  Result<int> ifindex(const std::string& n) override {
    if (!ifindexes.count(n)) ifindexes[n] = 10 + static_cast<int>(ifindexes.size());
    return ifindexes[n];
  }
  Result<std::vector<NexthopInfo>> nexthops() override {
    std::vector<NexthopInfo> out;
    for (auto& [id, v] : nhs) out.push_back({id, kProtoBgp, v.first, v.second});
    for (auto& [id, m] : groups) {
      NexthopInfo g{id, kProtoBgp};
      g.is_group = true;
      g.resilient = true;
      for (auto x : m) g.members.emplace_back(x, 1);
      out.push_back(g);
    }
    return out;
  }
  Result<std::vector<RouteEntry>> routes(int family) override {
    std::vector<RouteEntry> out;
    for (auto& [p, g] : routes_)
      if ((p.find(':') != std::string::npos) == (family == AF_INET6)) {
        RouteEntry e;
        e.family = family;
        e.dst = p;
        e.protocol = kProtoBgp;
        e.nh_id = g;
        out.push_back(e);
      }
    return out;
  }
  Status add_nexthop(uint32_t id, int oif, const std::string& gw) override {
    if (down.count(oif)) return os_error(ENETDOWN, "carrier down");
    nhs[id] = {oif, gw};
    return {};
  }
  Status set_group(uint32_t id, const std::vector<std::pair<uint32_t, uint16_t>>& m, const ResilientParams&,
                   bool replace) override {
    if (!replace && groups.count(id)) return os_error(EEXIST, "exists");
    for (auto [x, w] : m)
      if (!nhs.count(x)) return os_error(EINVAL, "no such member");
    groups[id].clear();
    weights[id].clear();
    for (auto [x, w] : m) {
      groups[id].push_back(x);
      weights[id][x] = w;
    }
    ++group_writes;
    return {};
  }
  Result<std::vector<BucketInfo>> buckets(uint32_t group) override {
    if (!groups.count(group)) return os_error(ENOENT, "no such group");
    return bucket_activity[group];
  }
  Status delete_nexthop(uint32_t id) override {
    nhs.erase(id);
    groups.erase(id);
    return {};
  }
  Status set_route(const std::string& p, uint32_t g) override {
    if (!groups.count(g)) return os_error(EINVAL, "no group");
    routes_[p] = g;
    ++route_writes;
    return {};
  }
  Status delete_route(const std::string& p) override {
    routes_.erase(p);
    return {};
  }
  Status add_static(const AgentStatic&, int) override { return {}; }
  Status add_blackhole(const std::string&) override { return {}; }
  Status add_neighbor(int oif, const std::string&, const std::string& ip, const std::string& mac) override {
    neighbours[{oif, ip}] = mac;
    return {};
  }

  // the kernel's reaction to carrier loss on OIF
  void lose_carrier(int oif) {
    down.insert(oif);
    std::set<uint32_t> gone;
    for (auto it = nhs.begin(); it != nhs.end();)
      if (it->second.first == oif) {
        gone.insert(it->first);
        it = nhs.erase(it);
      } else {
        ++it;
      }
    for (auto it = groups.begin(); it != groups.end();) {
      auto& m = it->second;
      m.erase(std::remove_if(m.begin(), m.end(), [&](uint32_t x) { return gone.count(x); }), m.end());
      if (m.empty()) {
        uint32_t g = it->first;
        for (auto r = routes_.begin(); r != routes_.end();) r = r->second == g ? routes_.erase(r) : std::next(r);
        it = groups.erase(it);
      } else {
        ++it;
      }
    }
  }
};

inline AgentConfig four_nic_config() {
  auto t = load_topology(topology("laptop.xml"));
  return render_agent_config(t, t.find_node("r1-tor"));
}

inline const std::vector<std::string> kH1 = {"198.19.1.0", "198.19.1.1", "198.19.1.2", "198.19.1.3"};


}  // namespace lanes::test
