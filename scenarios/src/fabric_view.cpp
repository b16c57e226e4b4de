#include "lanes/scenarios/fabric_view.hpp"

#include <fmt/format.h>
#include <sys/socket.h>

#include <optional>

#include "lanes/testbed/netns.hpp"
#include "lanes/hostnet/hostnet.hpp"
#include "lanes/switches/switches.hpp"

namespace lanes::scenarios {

namespace tb = lanes::testbed;
namespace sw = lanes::switches;

LiveFabric::LiveFabric(tb::LiveRun& run)
    : reg_(&run.registry()), id_(run.id()), topo_(&run.topology()), run_(&run) {}

std::unique_ptr<LiveFabric> LiveFabric::at_rest(const tb::RunRegistry& reg, const std::string& run_id,
                                                const tb::Topology& topo) {
  std::unique_ptr<LiveFabric> f(new LiveFabric());
  f->reg_ = &reg;
  f->id_ = run_id;
  f->topo_ = &topo;
  return f;
}

tb::Result<int> LiveFabric::ns_fd(int node) {
  if (run_) return run_->tb().netns(node).fd();
  auto n = netlink(node);
  if (!n) return n.error();
  return opened_.at(node).first.fd();
}

tb::Result<tb::Netlink*> LiveFabric::netlink(int node) {
  if (run_) return &run_->tb().netlink(node);
  auto it = opened_.find(node);
  if (it == opened_.end()) {
    std::string name = tb::RunRegistry::netns_name(id_, topo_->nodes.at(static_cast<size_t>(node)).name);
    auto ns = tb::Netns::open(name);
    if (!ns) return ns.error();
    auto nl = tb::Netlink::open_in(ns.value().fd(), name);
    if (!nl) return nl.error();
    it = opened_.emplace(node, std::make_pair(std::move(ns).value(), std::move(nl).value())).first;
  }
  return &it->second.second;
}

tb::Result<std::vector<tb::RouteEntry>> LiveFabric::routes(int node, int family) {
  auto nl = netlink(node);
  if (!nl) return nl.error();
  return nl.value()->route_entries(family);
}

tb::Result<std::vector<tb::NexthopInfo>> LiveFabric::nexthops(int node) {
  auto nl = netlink(node);
  if (!nl) return nl.error();
  return nl.value()->nexthops();
}

tb::Result<std::map<uint32_t, std::vector<uint32_t>>> LiveFabric::buckets(int node) {
  auto nl = netlink(node);
  if (!nl) return nl.error();
  return nl.value()->all_nexthop_buckets();
}

sw::SpeakerRef LiveFabric::speaker(int node) {
  auto fd = ns_fd(node);
  return sw::speaker_of(*reg_, id_, topo_->nodes.at(static_cast<size_t>(node)), fd ? fd.value() : -1);
}

tb::Result<std::vector<sw::BgpRoute>> LiveFabric::rib(int node, int family, const std::string& prefix) {
  return sw::speaker_routes(speaker(node), family, prefix);
}

tb::Result<std::vector<SessionCounts>> LiveFabric::sessions(int node) {
  auto sp = speaker(node);
  auto paths = sw::session_paths(sp, /*count_rib=*/true);
  if (!paths) return tb::os_error(EIO, std::string(sp.name()) + " does not answer: " + paths.error().what());
  std::vector<SessionCounts> out;
  for (const auto& p : paths.value()) out.push_back({p.session.neighbor, p.session.received, p.rejected});
  return out;
}

tb::Result<std::vector<int>> LiveFabric::flow_oifs(int node, const std::vector<tb::FlowKey>& flows) {
  auto nl = netlink(node);
  if (!nl) return nl.error();
  std::vector<int> out;
  for (const auto& f : flows) {
    auto oif = nl.value()->route_oif(f);
    if (!oif) return oif.error();
    out.push_back(oif.value());
  }
  return out;
}

tb::Result<std::vector<tb::NeighborInfo>> LiveFabric::neighbors(int node, bool job) {
  if (!job) {
    auto nl = netlink(node);
    if (!nl) return nl.error();
    return nl.value()->neighbors();
  }
  std::string name = hostnet::job_netns(id_, topo_->nodes.at(static_cast<size_t>(node)).name);
  auto ns = tb::Netns::open(name);
  if (!ns) return ns.error();
  auto nl = tb::Netlink::open_in(ns.value().fd(), name);
  if (!nl) return nl.error();
  return nl.value().neighbors();
}

// ---- the calls as JSON (a run over several machines) ----

namespace {

using json = nlohmann::json;

json to_j(const tb::RouteEntry& r) {
  return {{"family", r.family}, {"dst", r.dst},         {"protocol", r.protocol}, {"type", r.type},
          {"nh_id", r.nh_id},   {"oif", r.oif},         {"gateway", r.gateway},   {"paths", r.paths},
          {"path_oifs", r.path_oifs}};
}
void from_j(const json& j, tb::RouteEntry& r) {
  r.family = j.at("family");
  r.dst = j.at("dst");
  r.protocol = j.at("protocol");
  r.type = j.at("type");
  r.nh_id = j.at("nh_id");
  r.oif = j.at("oif");
  r.gateway = j.at("gateway");
  r.paths = j.at("paths");
  r.path_oifs = j.at("path_oifs").get<std::vector<int>>();
}
json to_j(const tb::NexthopInfo& n) {
  return {{"id", n.id},     {"protocol", n.protocol},   {"oif", n.oif},         {"gateway", n.gateway},
          {"group", n.is_group}, {"resilient", n.resilient}, {"buckets", n.buckets}, {"members", n.members}};
}
void from_j(const json& j, tb::NexthopInfo& n) {
  n.id = j.at("id");
  n.protocol = j.at("protocol");
  n.oif = j.at("oif");
  n.gateway = j.at("gateway");
  n.is_group = j.at("group");
  n.resilient = j.at("resilient");
  n.buckets = j.at("buckets");
  n.members = j.at("members").get<std::vector<std::pair<uint32_t, uint16_t>>>();
}
json to_j(const sw::BgpRoute& r) {
  return {{"prefix", r.prefix}, {"next_hop", r.next_hop}, {"neighbor", r.neighbor}, {"best", r.best}};
}
void from_j(const json& j, sw::BgpRoute& r) {
  r.prefix = j.at("prefix");
  r.next_hop = j.at("next_hop");
  r.neighbor = j.at("neighbor");
  r.best = j.at("best");
}
json to_j(const SessionCounts& s) { return {{"neighbor", s.neighbor}, {"received", s.received}, {"rejected", s.rejected}}; }
void from_j(const json& j, SessionCounts& s) {
  s.neighbor = j.at("neighbor");
  s.received = j.at("received");
  s.rejected = j.at("rejected");
}
json to_j(const tb::NeighborInfo& n) { return {{"ifindex", n.ifindex}, {"ip", n.ip}, {"state", n.state}}; }
void from_j(const json& j, tb::NeighborInfo& n) {
  n.ifindex = j.at("ifindex");
  n.ip = j.at("ip");
  n.state = j.at("state");
}
json to_j(int x) { return x; }
void from_j(const json& j, int& x) { x = j.get<int>(); }

template <class T>
json list_j(const std::vector<T>& v) {
  json a = json::array();
  for (const auto& x : v) a.push_back(to_j(x));
  return a;
}

// {"ok": VALUE} or {"error": TEXT}
template <class T, class F>
json answer(const tb::Result<T>& r, F&& value) {
  if (!r) return {{"error", tb::message_of(r.error())}};
  return {{"ok", value(r.value())}};
}

}  // namespace

json answer_query(FabricView& view, const json& q) {
  const std::string what = q.value("what", "");
  const int node = q.value("node", -1);
  auto list = [](const auto& v) { return list_j(v); };
  if (what == "routes") return answer(view.routes(node, q.value("family", 0)), list);
  if (what == "nexthops") return answer(view.nexthops(node), list);
  if (what == "buckets")
    return answer(view.buckets(node), [](const std::map<uint32_t, std::vector<uint32_t>>& m) {
      json a = json::array();
      for (const auto& [id, b] : m) a.push_back({id, b});
      return a;
    });
  if (what == "rib") return answer(view.rib(node, q.value("family", 0), q.value("prefix", "")), list);
  if (what == "sessions") return answer(view.sessions(node), list);
  if (what == "neighbors") return answer(view.neighbors(node, q.value("job", false)), list);
  if (what == "flow_oifs") {
    std::vector<tb::FlowKey> flows;
    for (const auto& f : q.value("flows", json::array())) {
      auto src = tb::parse_ip(f.value("src", "")), dst = tb::parse_ip(f.value("dst", ""));
      if (!src || !dst) return {{"error", "a flow without its addresses"}};
      flows.push_back({f.value("iif", ""), *src, *dst, f.value("proto", uint8_t{6}), f.value("sport", uint16_t{0}),
                       f.value("dport", uint16_t{0})});
    }
    return answer(view.flow_oifs(node, flows), list);
  }
  return {{"error", "no such query: '" + what + "'"}};
}

template <class T>
tb::Result<T> RemoteFabric::call(int node, json q) {
  q["node"] = node;
  auto text = ask_(node, q.dump());
  if (!text) return text.error();
  auto j = json::parse(text.value(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return tb::os_error(EPROTO, "an answer that is no JSON: " + text.value());
  if (j.contains("error")) return tb::os_error(EIO, j["error"].get<std::string>());
  try {
    T out{};
    if constexpr (std::is_same_v<T, std::map<uint32_t, std::vector<uint32_t>>>) {
      for (const auto& e : j.at("ok")) out[e.at(0).get<uint32_t>()] = e.at(1).get<std::vector<uint32_t>>();
    } else {
      for (const auto& e : j.at("ok")) {
        typename T::value_type x{};
        from_j(e, x);
        out.push_back(std::move(x));
      }
    }
    return out;
  } catch (const json::exception& e) {
    return tb::os_error(EPROTO, std::string("an answer that cannot be read: ") + e.what());
  }
}

tb::Result<std::vector<tb::RouteEntry>> RemoteFabric::routes(int node, int family) {
  return call<std::vector<tb::RouteEntry>>(node, {{"what", "routes"}, {"family", family}});
}
tb::Result<std::vector<tb::NexthopInfo>> RemoteFabric::nexthops(int node) {
  return call<std::vector<tb::NexthopInfo>>(node, {{"what", "nexthops"}});
}
tb::Result<std::map<uint32_t, std::vector<uint32_t>>> RemoteFabric::buckets(int node) {
  return call<std::map<uint32_t, std::vector<uint32_t>>>(node, {{"what", "buckets"}});
}
tb::Result<std::vector<sw::BgpRoute>> RemoteFabric::rib(int node, int family, const std::string& prefix) {
  return call<std::vector<sw::BgpRoute>>(node, {{"what", "rib"}, {"family", family}, {"prefix", prefix}});
}
tb::Result<std::vector<SessionCounts>> RemoteFabric::sessions(int node) {
  return call<std::vector<SessionCounts>>(node, {{"what", "sessions"}});
}
tb::Result<std::vector<tb::NeighborInfo>> RemoteFabric::neighbors(int node, bool job) {
  return call<std::vector<tb::NeighborInfo>>(node, {{"what", "neighbors"}, {"job", job}});
}
tb::Result<std::vector<int>> RemoteFabric::flow_oifs(int node, const std::vector<tb::FlowKey>& flows) {
  json fl = json::array();
  for (const auto& f : flows)
    fl.push_back({{"iif", f.iif},
                  {"src", f.src.to_string()},
                  {"dst", f.dst.to_string()},
                  {"proto", f.proto},
                  {"sport", f.sport},
                  {"dport", f.dport}});
  return call<std::vector<int>>(node, {{"what", "flow_oifs"}, {"flows", fl}});
}

std::string TaskGroups::prefix(const std::string& host) const {
  const auto& job = *topo_.nodes.at(static_cast<size_t>(topo_.find_node(host))).job;
  return family_of(host) == AF_INET6 ? job.task_ip6.to_string() + "/128" : job.task_ip4.to_string() + "/32";
}

int TaskGroups::family_of(const std::string& host) const {
  if (family_) return family_;
  return topo_.nodes.at(static_cast<size_t>(topo_.find_node(host))).job->has4() ? AF_INET : AF_INET6;
}

int TaskGroups::switch_of(const std::string& host) const {
  const auto& n = topo_.nodes.at(static_cast<size_t>(topo_.find_node(host)));
  return topo_.racks.at(static_cast<size_t>(n.rack)).switch_node;
}

tb::Result<std::map<std::string, uint32_t>> TaskGroups::ids(const std::vector<std::string>& hosts) {
  std::map<std::pair<int, int>, std::map<std::string, uint32_t>> group_of;  // (switch, family) → prefix → group
  std::map<std::string, uint32_t> out;
  for (const auto& h : hosts) {
    auto key = std::make_pair(switch_of(h), family_of(h));
    if (!group_of.count(key)) {
      auto routes = fabric_.routes(key.first, key.second);
      if (!routes) return routes.error();
      auto& of = group_of[key];
      for (const auto& r : routes.value()) of[r.dst] = r.nh_id;
    }
    auto it = group_of[key].find(prefix(h));
    out[h] = it == group_of[key].end() ? 0 : it->second;
  }
  return out;
}

std::map<std::string, std::vector<uint32_t>> TaskGroups::members(const std::vector<std::string>& hosts) {
  std::map<std::string, std::vector<uint32_t>> out;
  for (const auto& h : hosts) out[h] = {};
  auto ids_of = ids(hosts);
  if (!ids_of) return out;  // asked again by whoever waits
  std::map<int, std::map<uint32_t, std::vector<uint32_t>>> groups;  // switch → group → members
  std::map<std::pair<int, int>, std::map<std::string, std::vector<int>>> paths;  // (switch, family) → prefix → devices
  for (const auto& [h, g] : ids_of.value()) {
    int sw = switch_of(h);
    if (!g) {
      // a route without a group (zebra's multipath routes)
      auto key = std::make_pair(sw, family_of(h));
      if (!paths.count(key))
        if (auto routes = fabric_.routes(sw, key.second))
          for (const auto& r : routes.value()) paths[key][r.dst] = r.path_oifs;
      for (int oif : paths[key][prefix(h)]) out[h].push_back(static_cast<uint32_t>(oif));
      continue;
    }
    if (!groups.count(sw)) {
      auto& of = groups[sw];
      if (auto nhs = fabric_.nexthops(sw))
        for (const auto& n : nhs.value())
          for (auto [id, w] : n.members) of[n.id].push_back(id);
    }
    out[h] = groups[sw][g];
  }
  return out;
}

namespace {

// Where traffic for a host of switch SW's rack enters the switch from
// outside the rack's host ports: a server's port, else the uplink, else
// another host's port (not HOST's); the device's name at SW and the
// address the traffic comes from in FAMILY.
std::optional<std::pair<std::string, tb::IpAddr>> entry_of(const tb::Topology& t, int sw, int host, int family) {
  auto addr = [&](const tb::Endpoint& e) {
    return family == AF_INET6 ? tb::IpAddr(e.addr6.addr) : tb::IpAddr(e.addr4.addr);
  };
  for (auto kind : {tb::LinkKind::server, tb::LinkKind::fabric, tb::LinkKind::host_nic})
    for (const auto& l : t.links) {
      if (l.kind != kind) continue;
      if (kind == tb::LinkKind::fabric && l.b.node == sw) return std::make_pair(l.b.ifname, addr(l.a));
      if (kind != tb::LinkKind::fabric && l.a.node == sw && l.b.node != host)
        return std::make_pair(l.a.ifname, addr(l.b));
    }
  return std::nullopt;
}

}  // namespace

tb::Result<std::map<std::string, std::vector<uint32_t>>> TaskGroups::flow_ports(const std::vector<std::string>& hosts,
                                                                               int flows) {
  std::map<std::string, std::vector<uint32_t>> out;
  for (const auto& h : hosts) {
    int sw = switch_of(h), family = family_of(h);
    const auto& job = *topo_.nodes.at(static_cast<size_t>(topo_.find_node(h))).job;
    auto entry = entry_of(topo_, sw, topo_.find_node(h), family);
    if (!entry)
      return tb::os_error(ENOENT, fmt::format("{}'s switch has no port that traffic for it enters by", h));
    std::vector<tb::FlowKey> keys;
    // the same flows every time: a before and an after compare flow by flow
    uint32_t x = 2463534242u;
    for (int i = 0; i < flows; ++i) {
      x ^= x << 13, x ^= x >> 17, x ^= x << 5;
      tb::FlowKey k;
      k.iif = entry->first;
      k.src = entry->second;
      k.dst = family == AF_INET6 ? tb::IpAddr(job.task_ip6) : tb::IpAddr(job.task_ip4);
      k.sport = static_cast<uint16_t>(32768 + x % 28232);
      k.dport = static_cast<uint16_t>(5201 + (x >> 16) % 64);
      keys.push_back(k);
    }
    auto oifs = fabric_.flow_oifs(sw, keys);
    if (!oifs) return oifs.error();
    for (int o : oifs.value()) out[h].push_back(static_cast<uint32_t>(o));
  }
  return out;
}

tb::Result<std::map<std::string, std::vector<uint32_t>>> TaskGroups::buckets(const std::vector<std::string>& hosts) {
  auto ids_of = ids(hosts);
  if (!ids_of) return ids_of.error();
  std::map<int, std::map<uint32_t, std::vector<uint32_t>>> all;
  std::map<std::string, std::vector<uint32_t>> out;
  for (const auto& [h, g] : ids_of.value()) {
    int sw = switch_of(h);
    if (!all.count(sw)) {
      auto b = fabric_.buckets(sw);
      if (!b) return b.error();
      all[sw] = std::move(b).value();
    }
    out[h] = all[sw].count(g) ? all[sw].at(g) : std::vector<uint32_t>{};
  }
  return out;
}

bool TaskGroups::all_have(const std::vector<std::string>& hosts, size_t count) {
  for (const auto& [h, m] : members(hosts))
    if (m.size() != count) return false;
  return true;
}

}  // namespace lanes::scenarios
