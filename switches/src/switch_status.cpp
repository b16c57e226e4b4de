#include "lanes/switches/switches.hpp"

#include <fmt/format.h>

#include <sys/socket.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <ostream>
#include <tuple>

#include "lanes/bfd/bfdd.hpp"
#include "lanes/testbed/supervisor.hpp"
#include "lanes/switches/frr.hpp"
#include "lanes/switches/gobgp_client.hpp"

namespace lanes::switches {

using namespace lanes::testbed;

namespace {

void sort_sessions(std::vector<SessionPaths>& out) {
  // the speakers list their neighbors in no fixed order
  std::sort(out.begin(), out.end(), [](const SessionPaths& a, const SessionPaths& b) {
    return std::tie(a.session.description, a.session.neighbor) < std::tie(b.session.description, b.session.neighbor);
  });
}

// COUNT_RIB: the received (pre-policy) counts too, one vty question per
// established session and family
Result<std::vector<SessionPaths>> frr_session_paths(const SpeakerRef& sp, bool count_rib) {
  auto vty = FrrVty::connect(sp.vty);
  if (!vty) return vty.error();
  auto sessions = frr_sessions(vty.value(), count_rib);
  if (!sessions) return sessions.error();
  std::vector<SessionPaths> out;
  for (auto& s : sessions.value()) {
    uint64_t acc = count_rib ? std::min(s.session.received, s.accepted) : 0;
    uint64_t rej = count_rib ? s.session.received - acc : 0;
    out.push_back({std::move(s.session), acc, rej});
  }
  sort_sessions(out);
  return out;
}

}  // namespace

Result<std::vector<SessionPaths>> session_paths(const SpeakerRef& sp, bool count_rib) {
  if (sp.stack == SwitchStack::frr) return frr_session_paths(sp, count_rib);
  auto client = GobgpClient::connect(sp.ns_fd);
  if (!client) return client.error();
  auto peers = client.value().sessions();
  if (!peers) return peers.error();
  // paths in the RIB per source neighbor: what got past import policy.
  // GoBGP's own per-neighbor "accepted" ignores global import policy, so
  // rejected = received (its Adj-RIB-In count) - paths in the RIB from it;
  // one RIB dump per family, no call per neighbor.
  std::map<std::string, uint64_t> in_rib;
  if (count_rib)
    for (int fam : {AF_INET, AF_INET6})
      if (auto rib = client.value().routes(fam))
        for (const auto& r : rib.value()) ++in_rib[r.neighbor];
  std::vector<SessionPaths> out;
  for (auto& p : peers.value()) {
    uint64_t acc = count_rib ? std::min(p.received, in_rib[p.neighbor]) : 0;
    uint64_t rej = count_rib ? p.received - acc : 0;
    out.push_back({std::move(p), acc, rej});
  }
  sort_sessions(out);
  return out;
}

Result<std::vector<BgpRoute>> speaker_routes(const SpeakerRef& sp, int family, const std::string& prefix) {
  if (sp.stack == SwitchStack::frr) {
    auto vty = FrrVty::connect(sp.vty);
    if (!vty) return vty.error();
    return frr_routes(vty.value(), family, prefix);
  }
  auto client = GobgpClient::connect(sp.ns_fd);
  if (!client) return client.error();
  return client.value().routes(family, prefix);
}

// A switch's BGP sessions (from gobgpd), its groups (from its FIB agent) and
// its daemons (from the supervisor).
nlohmann::json switch_status_json(const RunRegistry& reg, const std::string& id, const Node& n, int ns_fd,
                                  bool with_rib) {
  nlohmann::json j;
  nlohmann::json sessions = nlohmann::json::array();
  uint64_t rejected_total = 0;
  SpeakerRef speaker = speaker_of(reg, id, n, ns_fd);
  if (auto peers = session_paths(speaker, with_rib)) {
    for (const auto& p : peers.value()) {
      nlohmann::json s = {{"neighbor", p.session.neighbor},
                          {"description", p.session.description},
                          {"peer_as", p.session.peer_as},
                          {"state", session_state_name(p.session.state)},
                          {"received", p.session.received}};
      if (with_rib) {
        rejected_total += p.rejected;
        s["accepted"] = p.accepted;
        s["rejected"] = p.rejected;
      }
      sessions.push_back(std::move(s));
    }
  } else {
    j["error"] = fmt::format("{} does not answer: {}", speaker.name(), peers.error().what());
  }
  j["sessions"] = sessions;
  j["stack"] = to_string(n.stack);
  if (with_rib) j["rejected"] = rejected_total;
  auto f = switch_files(reg, id, n.name);
  try {
    std::ifstream in(f.agent_state);
    if (in) {
      auto st = nlohmann::json::parse(in);
      j["routes"] = st.value("routes", nlohmann::json::object());
      j["stale"] = st.value("stale", false);
      j["agent_connected"] = st.value("connected", false);
    }
    j["bfd"] = bfd::bfd_status(f.dir, with_rib);
    std::ifstream cfg(f.agent_config);
    if (cfg) j["announced"] = AgentConfig::from_json(nlohmann::json::parse(cfg)).originate;
  } catch (const std::exception&) {
  }
  nlohmann::json daemons = nlohmann::json::array();
  for (const auto& d : supervised_daemons(reg, id))
    if (d.node == n.name) daemons.push_back(d.to_json());
  j["daemons"] = daemons;
  int crashes = 0;
  for (const auto& e : read_events(reg, id))
    if (e.value("node", "") == n.name && e.value("event", "") == "exited") ++crashes;
  j["daemon_exits"] = crashes;
  return j;
}

nlohmann::json SwitchRole::status(const RunRegistry& reg, const std::string& run_id, const Node& node, int netns_fd,
                                  bool detailed) const {
  if ((node.kind != NodeKind::rack_switch && node.kind != NodeKind::spine) || netns_fd < 0) return nullptr;
  return switch_status_json(reg, run_id, node, netns_fd, /*with_rib=*/detailed);
}

void SwitchRole::print_status(const nlohmann::json& b, const nlohmann::json&, std::ostream& out) const {
  size_t est = 0;
  for (const auto& ss : b["sessions"]) est += ss["state"] == "established";
  out << fmt::format("  bgp: {} sessions, {} established, {} announcements rejected{}{}\n", b["sessions"].size(), est,
                     b.value("rejected", uint64_t{0}), b.value("stale", false) ? ", routes STALE (gobgpd lost)" : "",
                     b.contains("error") ? ", " + b["error"].get<std::string>() : "");
  for (const auto& ss : b["sessions"])
    out << fmt::format("    {:<16} {:<16} AS {:<10} {:<11} received {} accepted {} rejected {}\n",
                       ss["neighbor"].get<std::string>(), ss["description"].get<std::string>(),
                       ss["peer_as"].get<uint32_t>(), ss["state"].get<std::string>(), ss["received"].get<uint64_t>(),
                       ss["accepted"].get<uint64_t>(), ss["rejected"].get<uint64_t>());
  if (b.contains("announced")) {
    std::string a;
    for (const auto& p : b["announced"]) a += " " + p.get<std::string>();
    out << "  announced:" << (a.empty() ? " -" : a) << "\n";
  }
  if (b.contains("routes"))
    for (const auto& [prefix, r] : b["routes"].items()) {
      std::string m;
      for (const auto& x : r["members"]) m += " " + x["ifname"].get<std::string>() + "(" + x["peer"].get<std::string>() + ")";
      out << fmt::format("  group {:<22} ->{}\n", prefix, m);
    }
  std::string d;
  for (const auto& x : b["daemons"])
    d += fmt::format(" {} pid {} ({} restarts)", x["name"].get<std::string>(), x["pid"].get<int>(), x["restarts"].get<int>());
  out << "  daemons:" << (d.empty() ? " none" : d) << fmt::format("; exits recorded: {}\n", b.value("daemon_exits", 0));
}

}  // namespace lanes::switches
