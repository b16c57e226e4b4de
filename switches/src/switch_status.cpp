#include "lanes/switches/switches.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <fstream>
#include <map>

#include "lanes/bfd/bfdd.hpp"
#include "lanes/testbed/supervisor.hpp"
#include "lanes/switches/gobgp_client.hpp"

namespace lanes::switches {

using namespace lanes::testbed;

// A switch's BGP sessions (from gobgpd), its groups (from its FIB agent) and
// its daemons (from the supervisor).
nlohmann::json switch_status_json(const RunRegistry& reg, const std::string& id, const Node& n, int ns_fd,
                                  bool with_rib) {
  nlohmann::json j;
  nlohmann::json sessions = nlohmann::json::array();
  uint64_t rejected_total = 0;
  auto client = GobgpClient::connect(ns_fd);
  auto peers = client ? client.value().sessions() : Result<std::vector<BgpSession>>(client.error());
  // paths in the RIB per source neighbor: what got past import policy.
  // GoBGP's own per-neighbor "accepted" ignores global import policy, so
  // rejected = received (its Adj-RIB-In count) - paths in the RIB from it;
  // one RIB dump per family, no call per neighbor.
  std::map<std::string, uint64_t> in_rib;
  if (peers && with_rib)
    for (int fam : {AF_INET, AF_INET6})
      if (auto rib = client.value().routes(fam))
        for (const auto& r : rib.value()) ++in_rib[r.neighbor];
  if (peers) {
    for (const auto& p : peers.value()) {
      nlohmann::json s = {{"neighbor", p.neighbor},
                          {"description", p.description},
                          {"peer_as", p.peer_as},
                          {"state", session_state_name(p.state)},
                          {"received", p.received}};
      if (with_rib) {
        uint64_t acc = std::min(p.received, in_rib[p.neighbor]);
        uint64_t rej = p.received - acc;
        rejected_total += rej;
        s["accepted"] = acc;
        s["rejected"] = rej;
      }
      sessions.push_back(std::move(s));
    }
    // gobgpd lists its neighbors in no fixed order
    std::sort(sessions.begin(), sessions.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
      return std::make_pair(a["description"].get<std::string>(), a["neighbor"].get<std::string>()) <
             std::make_pair(b["description"].get<std::string>(), b["neighbor"].get<std::string>());
    });
  } else {
    j["error"] = std::string("gobgpd does not answer: ") + peers.error().what();
  }
  j["sessions"] = sessions;
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
    if (cfg) j["announced"] = nlohmann::json::parse(cfg).value("originate", nlohmann::json::array());
  } catch (const std::exception&) {
  }
  nlohmann::json daemons = nlohmann::json::array();
  try {
    std::ifstream in(supervisor_state_path(reg, id));
    if (in)
      for (const auto& d : nlohmann::json::parse(in).value("daemons", nlohmann::json::array()))
        if (d.value("node", "") == n.name) daemons.push_back(d);
  } catch (const std::exception&) {
  }
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

}  // namespace lanes::switches
