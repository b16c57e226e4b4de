#include "lanes/vip/deploy.hpp"

#include <filesystem>
#include <fstream>

namespace lanes::vip {

using namespace lanes::testbed;

nlohmann::json injector_config(const Topology& t, int host) {
  const Node& h = t.nodes.at(static_cast<size_t>(host));
  const Rack& rack = t.racks.at(static_cast<size_t>(h.rack));
  const Node& sw = t.nodes.at(static_cast<size_t>(rack.switch_node));
  bool add_path = h.job->vip == VipMode::add_path;
  nlohmann::json nics = nlohmann::json::array(), sessions = nlohmann::json::array();
  std::vector<int> all;
  for (const auto& nic : h.nics) {
    nics.push_back({{"index", nic.index},
                    {"eth", "eth" + std::to_string(nic.index)},
                    {"nh4", nic.job_addr4.addr.to_string()},
                    {"nh6", nic.job_addr6.addr.to_string()}});
    all.push_back(nic.index);
    if (!add_path)
      sessions.push_back({{"local", nic.job_addr4.addr.to_string()},
                          {"peer", t.links[nic.link].a.addr4.addr.to_string()},
                          {"nics", {nic.index}}});
  }
  if (add_path)
    sessions.push_back({{"local", h.nics[0].job_addr4.addr.to_string()},
                        {"peer", t.links[h.nics[0].link].a.addr4.addr.to_string()},
                        {"nics", all}});
  return {{"host", h.name},
          {"mode", to_string(h.job->vip)},
          {"task4", h.job->task_ip4.to_string()},
          {"task6", h.job->task_ip6.to_string()},
          {"local_as", h.asn},
          {"peer_as", sw.asn},
          {"hold_time", rack.sw.hold_time_s},
          {"nics", nics},
          {"sessions", sessions}};
}

Status deploy_injectors(DeployContext& ctx) {
  const Topology& t = ctx.tb.topology();
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    const Node& h = t.nodes[i];
    if (h.kind != NodeKind::host || !h.job) continue;
    std::string dir = ctx.reg.dir(ctx.run_id) + "/hosts/" + h.name;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    std::string cfg = dir + "/injector.json", state = dir + "/injector-state.json";
    {
      std::ofstream o(cfg, std::ios::trunc);
      o << injector_config(t, static_cast<int>(i)).dump(2) << "\n";
      if (!o) return errno_error("writing " + cfg);
    }
    ctx.daemons.push_back({h.name, "vip-injector",
                           {ctx.bin_dir + "/lanes-vip-injector", "--config", cfg, "--state", state},
                           RunRegistry::netns_name(ctx.run_id, h.name + ".job"), state});
  }
  return {};
}

}  // namespace lanes::vip
