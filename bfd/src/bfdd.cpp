#include "lanes/bfd/bfdd.hpp"

#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>

#include "lanes/testbed/fabric.hpp"
#include "lanes/testbed/overrides.hpp"

namespace lanes::bfd {

BfddConfig BfddConfig::from_json(const nlohmann::json& j) {
  BfddConfig c;
  c.node = j.value("node", "");
  c.netns = j.value("netns", "");
  c.socket = j.value("socket", "");
  c.state = j.value("state", "");
  if (c.socket.empty()) throw std::invalid_argument("no \"socket\"");
  uint32_t disc = 0;
  for (const auto& l : j.value("links", nlohmann::json::array())) {
    LinkConfig lc;
    lc.ifname = l.value("ifname", "");
    lc.local = l.value("local", "");
    lc.remote = l.value("remote", "");
    if (lc.ifname.empty() || lc.local.empty() || lc.remote.empty())
      throw std::invalid_argument("a link without \"ifname\", \"local\" or \"remote\"");
    uint32_t interval_ms = l.value("interval_ms", 100u);
    unsigned mult = l.value("multiplier", 3u);
    // a link with BFD has an interval (0, no BFD, gives it no link here)
    constexpr auto hi = static_cast<uint32_t>(testbed::kBfdIntervalBounds.hi);
    if (interval_ms < 1 || interval_ms > hi)
      throw std::invalid_argument(lc.ifname + ": interval_ms " + std::to_string(interval_ms) + " is not 1-" +
                                  std::to_string(hi));
    if (mult < 1 || mult > 255)
      throw std::invalid_argument(lc.ifname + ": multiplier " + std::to_string(mult) + " is not 1-255");
    lc.session.local_disc = ++disc;
    lc.session.desired_min_tx_us = interval_ms * 1000;
    lc.session.required_min_rx_us = interval_ms * 1000;
    lc.session.detect_mult = static_cast<uint8_t>(mult);
    c.links.push_back(std::move(lc));
  }
  return c;
}

nlohmann::json BfddConfig::to_json() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& l : links)
    out.push_back({{"ifname", l.ifname},
                     {"local", l.local},
                     {"remote", l.remote},
                     {"interval_ms", l.session.desired_min_tx_us / 1000},
                     {"multiplier", l.session.detect_mult}});
  nlohmann::json j = {{"node", node}, {"socket", socket}, {"links", out}};
  if (!netns.empty()) j["netns"] = netns;
  if (!state.empty()) j["state"] = state;
  return j;
}

BfddPlan BfddPlan::from_json(const nlohmann::json& j) {
  BfddPlan p;
  if (!j.is_object()) throw std::invalid_argument("not a JSON object");
  if (!j.contains("nodes")) {
    p.nodes.push_back(BfddConfig::from_json(j));
    return p;
  }
  std::set<std::string> sockets;
  for (const auto& n : j.at("nodes")) {
    std::string name = n.is_object() ? n.value("node", "") : "";
    try {
      p.nodes.push_back(BfddConfig::from_json(n));
    } catch (const std::exception& e) {
      throw std::invalid_argument("node \"" + name + "\": " + e.what());
    }
    const auto& c = p.nodes.back();
    // each node's sessions live in its namespace and report to its file
    if (c.netns.empty() || c.state.empty())
      throw std::invalid_argument("node \"" + name + "\": a node of \"nodes\" needs its \"netns\" and \"state\"");
    if (!sockets.insert(c.socket).second)
      throw std::invalid_argument("node \"" + name + "\": socket " + c.socket + " is another node's");
  }
  if (p.nodes.empty()) throw std::invalid_argument("\"nodes\" is empty");
  return p;
}

nlohmann::json BfddPlan::to_json() const {
  if (nodes.size() == 1 && nodes[0].netns.empty()) return nodes[0].to_json();
  nlohmann::json out = nlohmann::json::array();
  for (const auto& n : nodes) out.push_back(n.to_json());
  return {{"nodes", out}};
}

std::vector<LinkConfig> bfd_links(const testbed::Topology& t, int node) {
  using testbed::NodeKind;
  std::vector<LinkConfig> out;
  const auto& n = t.nodes.at(static_cast<size_t>(node));
  if (n.kind != NodeKind::rack_switch && !(n.kind == NodeKind::host && n.job)) return out;
  uint32_t disc = 0;
  for (const auto& l : t.links) {
    if (l.kind != testbed::LinkKind::host_nic || (l.a.node != node && l.b.node != node)) continue;
    const auto& host = t.nodes.at(static_cast<size_t>(l.b.node));
    if (!host.job) continue;
    const auto& sw = t.racks.at(static_cast<size_t>(host.rack)).sw;
    if (sw.bfd_interval_ms == 0) continue;
    bool here_a = l.a.node == node;
    const auto& me = here_a ? l.a : l.b;
    const auto& peer = here_a ? l.b : l.a;
    LinkConfig c;
    c.ifname = me.ifname;
    // over IPv6 for an IPv6-only job: its fabric has no IPv4 to lean on
    bool v6 = !host.job->has4();
    c.local = v6 ? me.addr6.addr.to_string() : me.addr4.addr.to_string();
    c.remote = v6 ? peer.addr6.addr.to_string() : peer.addr4.addr.to_string();
    c.session.local_disc = ++disc;
    c.session.desired_min_tx_us = sw.bfd_interval_ms * 1000;
    c.session.required_min_rx_us = sw.bfd_interval_ms * 1000;
    c.session.detect_mult = static_cast<uint8_t>(sw.bfd_multiplier);
    out.push_back(std::move(c));
  }
  return out;
}

BfddFiles bfdd_files(const std::string& node_dir) {
  return {node_dir + "/bfdd.json", node_dir + "/bfdd-state.json", node_dir + "/bfdd.sock"};
}

nlohmann::json bfd_status(const std::string& node_dir, bool detailed) {
  std::ifstream in(bfdd_files(node_dir).state);
  if (!in) return nullptr;
  auto st = nlohmann::json::parse(in, nullptr, false);
  if (!st.is_object()) return nullptr;
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : st.value("sessions", nlohmann::json::array())) {
    if (detailed) {
      out.push_back(s);
      continue;
    }
    out.push_back({{"ifname", s.value("ifname", "")}, {"state", s.value("state", "")}, {"usable", s.value("usable", true)}});
  }
  return out;
}

std::string bfdd_socket(const testbed::Topology& t, int node, const std::string& node_dir) {
  return bfd_links(t, node).empty() ? std::string() : bfdd_files(node_dir).socket;
}

testbed::Status deploy_rack_bfdd(testbed::DeployContext& ctx, const std::vector<int>& nodes,
                                 const std::vector<std::string>& node_dirs, const std::string& dir, int wave) {
  const auto& t = ctx.tb.topology();
  BfddPlan plan;
  for (size_t i = 0; i < nodes.size(); ++i) {
    BfddConfig c;
    c.node = t.nodes.at(static_cast<size_t>(nodes[i])).name;
    c.links = bfd_links(t, nodes[i]);
    if (c.links.empty()) continue;
    auto f = bfdd_files(node_dirs[i]);
    c.netns = ctx.tb.netns_name(nodes[i]);
    c.socket = f.socket;
    c.state = f.state;
    plan.nodes.push_back(std::move(c));
  }
  if (plan.nodes.empty()) return {};
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string config = dir + "/bfdd.json", state = dir + "/bfdd-state.json";
  {
    std::ofstream o(config, std::ios::trunc);
    o << plan.to_json().dump(2) << "\n";
    if (!o) return testbed::errno_error("writing " + config);
  }
  testbed::DaemonRequest d;
  d.node = plan.nodes.front().node;
  for (size_t i = 1; i < plan.nodes.size(); ++i) d.serves.push_back(plan.nodes[i].node);
  d.name = "bfdd";
  d.argv = {ctx.bin_dir + "/lanes-bfdd", "--config", config, "--state", state};
  d.netns = plan.nodes.front().netns;
  d.wave = wave;
  d.ready_file = state;
  ctx.daemons.push_back(std::move(d));
  return {};
}

testbed::Result<std::string> deploy_bfdd(testbed::DeployContext& ctx, int node, const std::string& node_dir, int wave) {
  const auto& t = ctx.tb.topology();
  BfddConfig c;
  c.node = t.nodes.at(static_cast<size_t>(node)).name;
  c.links = bfd_links(t, node);
  if (c.links.empty()) return std::string();
  auto f = bfdd_files(node_dir);
  c.socket = f.socket;
  std::error_code ec;
  std::filesystem::create_directories(node_dir, ec);
  {
    std::ofstream o(f.config, std::ios::trunc);
    o << c.to_json().dump(2) << "\n";
    if (!o) return testbed::errno_error("writing " + f.config);
  }
  testbed::DaemonRequest d;
  d.node = c.node;
  d.name = "bfdd";
  d.argv = {ctx.bin_dir + "/lanes-bfdd", "--config", f.config, "--state", f.state};
  d.netns = ctx.tb.netns_name(node);
  d.wave = wave;
  d.ready_file = f.state;
  ctx.daemons.push_back(std::move(d));
  return f.socket;
}

}  // namespace lanes::bfd
