#include "lanes/bfd/bfdd.hpp"

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "lanes/testbed/fabric.hpp"
#include "lanes/testbed/overrides.hpp"

namespace lanes::bfd {

BfddConfig BfddConfig::from_json(const nlohmann::json& j) {
  BfddConfig c;
  c.node = j.value("node", "");
  c.socket = j.value("socket", "");
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
  return {{"node", node}, {"socket", socket}, {"links", out}};
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
