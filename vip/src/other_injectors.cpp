#include "lanes/vip/other_injectors.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <stdexcept>

namespace lanes::vip {

namespace {

bool is_v6(const std::string& a) { return a.find(':') != std::string::npos; }

const SpeakerConfig::Nic* nic_of(const SpeakerConfig& c, int index) {
  for (const auto& n : c.nics)
    if (n.index == index) return &n;
  return nullptr;
}

// A BGP identifier for the whole injector: its first session's IPv4
// address, or for an IPv6-only job its AS number written as an address
// (each host has an AS of its own; RFC 6286 asks no more)
std::string router_id(const SpeakerConfig& c) {
  for (const auto& s : c.sessions)
    if (!is_v6(s.local)) return s.local;
  uint32_t a = c.local_as ? c.local_as : 1;
  return fmt::format("{}.{}.{}.{}", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
}

}  // namespace

std::string render_bird_config(const SpeakerConfig& c) {
  if (c.add_path)
    throw std::invalid_argument(c.host + ": lanes renders BIRD with one session per NIC only (vip=\"per-nic\")");
  std::string s = fmt::format("# BIRD 2 as {}'s VIP injector, rendered by lanes\nrouter id {};\nlog stderr all;\n",
                              c.host, router_id(c));
  s += "protocol device { }\n";
  if (!c.task4.empty()) s += fmt::format("protocol static task4 {{\n  ipv4;\n  route {}/32 blackhole;\n}}\n", c.task4);
  if (!c.task6.empty())
    s += fmt::format("protocol static task6 {{\n  ipv6;\n  route {}/128 blackhole;\n}}\n", c.task6);
  int k = 0;
  for (const auto& ss : c.sessions) {
    const auto* n = ss.nics.empty() ? nullptr : nic_of(c, ss.nics.front());
    if (!n) continue;
    s += fmt::format("protocol bgp {} {{\n", ss.eth.empty() ? fmt::format("s{}", k) : ss.eth);
    s += fmt::format("  description \"{} {}\";\n", c.host, ss.eth);
    s += fmt::format("  local {} as {};\n  neighbor {} as {};\n", ss.local, c.local_as, ss.peer, c.peer_as);
    // the switch listens (passive); its port is one hop past the host
    s += "  multihop 3;\n";
    s += fmt::format("  hold time {};\n  keepalive time {};\n", c.hold_time, std::max(1, c.hold_time / 3));
    // back within a second of a NIC's return, not BIRD's two minutes
    s += "  connect retry time 1;\n  connect delay time 1;\n  error wait time 1, 5;\n";
    if (!c.task4.empty() && !n->nh4.empty())
      s += fmt::format("  ipv4 {{\n    import none;\n    export where net = {}/32;\n    next hop self;\n"
                       "    next hop address {};\n  }};\n",
                       c.task4, n->nh4);
    if (!c.task6.empty() && !n->nh6.empty())
      s += fmt::format("  ipv6 {{\n    import none;\n    export where net = {}/128;\n    next hop self;\n"
                       "    next hop address {};\n  }};\n",
                       c.task6, n->nh6);
    s += "}\n";
    ++k;
  }
  return s;
}

std::string render_exabgp_config(const SpeakerConfig& c) {
  std::string s = fmt::format("# ExaBGP as {}'s VIP injector, rendered by lanes\n", c.host);
  for (const auto& ss : c.sessions) {
    s += fmt::format("neighbor {} {{\n", ss.peer);
    s += fmt::format("  description \"{} {}\";\n", c.host, ss.eth);
    s += fmt::format("  router-id {};\n  local-address {};\n", router_id(c), ss.local);
    s += fmt::format("  local-as {};\n  peer-as {};\n  hold-time {};\n", c.local_as, c.peer_as, c.hold_time);
    s += "  family {\n";
    if (!c.task4.empty()) s += "    ipv4 unicast;\n";
    if (!c.task6.empty()) s += "    ipv6 unicast;\n";
    s += "  }\n";
    if (c.add_path) s += "  capability {\n    add-path send;\n  }\n";
    s += "  static {\n";
    for (int idx : ss.nics) {
      const auto* n = nic_of(c, idx);
      if (!n) continue;
      // ADD-PATH: path identifier NIC+1 (0 is no identifier at all)
      std::string pid = c.add_path ? fmt::format(" path-information 0.0.0.{}", idx + 1) : "";
      if (!c.task4.empty() && !n->nh4.empty())
        s += fmt::format("    route {}/32 next-hop {}{};\n", c.task4, n->nh4, pid);
      if (!c.task6.empty() && !n->nh6.empty())
        s += fmt::format("    route {}/128 next-hop {}{};\n", c.task6, n->nh6, pid);
    }
    s += "  }\n}\n";
  }
  return s;
}

std::vector<std::pair<std::string, std::string>> exabgp_environment() {
  return {{"exabgp.daemon.daemonize", "false"}, {"exabgp.daemon.user", "root"},
          {"exabgp.log.destination", "stdout"}, {"exabgp.api.cli", "false"},
          {"exabgp.daemon.drop", "false"}};
}

}  // namespace lanes::vip
