#pragma once
// Root-tier helpers for the switch tests: a stand-in announcer (one gobgpd
// per host NIC in the host's namespace, as the VIP injector will be), and
// readers of the switch's kernel groups.

#include <sys/socket.h>

#include <fstream>
#include <set>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lanes/testbed/netlink.hpp"
#include "root_support.hpp"

namespace lanes::test {

// Members (nexthop ids) of the group that PREFIX routes through, or {}.
inline std::vector<uint32_t> group_members(testbed::Netlink& nl, const std::string& prefix, uint32_t* group = nullptr) {
  auto [id, members] = nl.route_group(prefix);
  if (group && id) *group = id;
  return members;
}

// GoBGP's RIB on switch SW for PREFIX (gobgp global rib -j), or null.
inline nlohmann::json rib_json(ScopedRun& run, const std::string& sw, const std::string& prefix) {
  testbed::ProcessSpec spec{"gobgp", {"gobgp", "global", "rib", "-j", "-a",
                                      prefix.find(':') != std::string::npos ? "ipv6" : "ipv4", prefix}};
  spec.netns_fd = run.tb().netns(run.node(sw)).fd();
  spec.new_session = false;
  auto r = testbed::run_capture(spec, std::chrono::seconds(5));
  if (!r || r.value().status != 0) return nullptr;
  try {
    return nlohmann::json::parse(r.value().out);
  } catch (const std::exception&) {
    return nullptr;
  }
}

// Paths GoBGP on switch SW holds for PREFIX.
inline size_t rib_paths(ScopedRun& run, const std::string& sw, const std::string& prefix) {
  auto j = rib_json(run, sw, prefix);
  size_t n = 0;
  if (j.is_object())
    for (const auto& [p, paths] : j.items()) n += paths.size();
  return n;
}

// The distinct next hops of those paths (ADD-PATH mode: two sessions
// carry the same next hops).
inline std::set<std::string> rib_next_hops(ScopedRun& run, const std::string& sw, const std::string& prefix) {
  std::set<std::string> out;
  auto j = rib_json(run, sw, prefix);
  if (!j.is_object()) return out;
  for (const auto& [p, paths] : j.items())
    for (const auto& path : paths)
      for (const auto& a : path.value("attrs", nlohmann::json::array())) {
        if (a.contains("nexthop") && a["nexthop"].is_string()) out.insert(a["nexthop"].get<std::string>());
        if (a.contains("nexthops") && a["nexthops"].is_array())
          for (const auto& n : a["nexthops"]) out.insert(n.get<std::string>());
      }
  return out;
}

// One gobgpd per NIC of HOST, each with a session from the job's NIC
// address to the switch port, announcing PREFIXES (default: the host's own
// task IPs). The host gets its job addresses on lo and a default route via
// NIC 0, so it can answer what reaches it.
class StandIn {
 public:
  // CONTAINER_NS_FD: run in the host's job container (hostnet deployed it,
  // addresses and routes are there) instead of the host's namespace.
  StandIn(ScopedRun& run, const std::string& host, std::vector<std::string> prefixes = {}, int container_ns_fd = -1)
      : run_(run), host_(run.node(host)), ns_fd_(container_ns_fd >= 0 ? container_ns_fd : run.tb().netns(host_).fd()) {
    const auto& t = run.topo();
    const auto& h = t.nodes[host_];
    if (prefixes.empty()) prefixes = {h.job->task_ip4.to_string() + "/32", h.job->task_ip6.to_string() + "/128"};
    prefixes_ = prefixes;
    if (container_ns_fd < 0) setup_host();
    start();
  }

 private:
  void setup_host() {
    const auto& t = run_.topo();
    const auto& h = t.nodes[host_];
    auto& run = run_;
    auto& nl = run.tb().netlink(host_);
    // addresses (EEXIST is fine: a second stand-in on the same host)
    (void)nl.add_address(1, testbed::IfAddr4{h.job->task_ip4, 32}, "lo");
    (void)nl.add_address(1, testbed::IfAddr6{h.job->task_ip6, 128}, "lo");
    for (const auto& nic : h.nics) {
      (void)nl.add_address(1, nic.job_addr4, "lo");
      (void)nl.add_address(1, nic.job_addr6, "lo");
    }
    const auto& l0 = t.links[h.nics[0].link];
    for (testbed::IpAddr gw : {testbed::IpAddr(l0.a.addr4.addr), testbed::IpAddr(l0.a.addr6.addr)}) {
      testbed::Route r{testbed::IpNet::default_route(testbed::family_of(gw)),
                       std::vector<testbed::Via>{{gw, run.tb().ifindex(host_, "nic0").value(), 1}}};
      r.replace = true;
      (void)nl.add_route(r);
    }
  }

  void start() {
    const auto& t = run_.topo();
    const auto& h = t.nodes[host_];
    auto& run = run_;
    static int next_port = 50100;
    const auto& sw = t.nodes[t.racks[h.rack].switch_node];
    for (const auto& nic : h.nics) {
      const auto& l = t.links[nic.link];
      int port = next_port++;
      std::string dir = run.registry().dir(run.id());
      std::string cfg = dir + "/standin-" + h.name + "-" + std::to_string(port) + ".toml";
      std::ofstream(cfg) << "[global.config]\n  as = " << h.asn << "\n  router-id = \"" << nic.job_addr4.addr.to_string()
                         << "\"\n  port = -1\n[[neighbors]]\n  [neighbors.config]\n    neighbor-address = \""
                         << l.a.addr4.addr.to_string() << "\"\n    peer-as = " << sw.asn
                         << "\n  [neighbors.transport.config]\n    local-address = \"" << nic.job_addr4.addr.to_string()
                         << "\"\n  [neighbors.ebgp-multihop.config]\n    enabled = true\n    multihop-ttl = 3\n"
                            "  [neighbors.timers.config]\n    hold-time = 9\n    keepalive-interval = 3\n"
                            "    connect-retry = 1\n"
                            "  [[neighbors.afi-safis]]\n    [neighbors.afi-safis.config]\n      afi-safi-name = \"ipv4-unicast\"\n"
                            "  [[neighbors.afi-safis]]\n    [neighbors.afi-safis.config]\n      afi-safi-name = \"ipv6-unicast\"\n";
      testbed::ProcessSpec spec{"stand-in gobgpd",
                                {"gobgpd", "-f", cfg, "-t", "toml", "-p", "--pprof-disable", "--api-hosts",
                                 "127.0.0.1:" + std::to_string(port)}};
      spec.netns_fd = ns_fd_;
      spec.log_path = dir + "/standin-" + h.name + "-" + std::to_string(port) + ".log";
      auto d = testbed::Daemon::start(spec);
      if (!d) throw d.error();
      daemons_.push_back(std::move(d).value());
      ports_.push_back(port);
    }
    for (size_t i = 0; i < ports_.size(); ++i) {
      if (!eventually([&] { return gobgp(i, {"global"}) == 0; }, std::chrono::seconds(10)))
        throw std::runtime_error("stand-in gobgpd did not start");
      announce(i);
    }
  }

 public:
  ~StandIn() {
    for (auto& d : daemons_) (void)d.stop(std::chrono::milliseconds(2000));
  }

  int gobgp(size_t nic, std::vector<std::string> args) {
    std::vector<std::string> argv = {"gobgp", "-p", std::to_string(ports_[nic])};
    argv.insert(argv.end(), args.begin(), args.end());
    testbed::ProcessSpec spec{"gobgp", argv};
    spec.netns_fd = ns_fd_;
    spec.new_session = false;
    auto r = testbed::run_capture(spec, std::chrono::seconds(5));
    return r ? r.value().status : -1;
  }
  void announce(size_t nic) {
    for (const auto& p : prefixes_) gobgp(nic, {"global", "rib", "add", "-a", p.find(':') != std::string::npos ? "ipv6" : "ipv4", p});
  }
  void withdraw(size_t nic) {
    for (const auto& p : prefixes_) gobgp(nic, {"global", "rib", "del", "-a", p.find(':') != std::string::npos ? "ipv6" : "ipv4", p});
  }

 private:
  ScopedRun& run_;
  int host_;
  int ns_fd_;
  std::vector<std::string> prefixes_;
  std::vector<testbed::Daemon> daemons_;
  std::vector<int> ports_;
};

}  // namespace lanes::test
