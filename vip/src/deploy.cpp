#include "lanes/vip/deploy.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <ostream>

#include "lanes/testbed/result.hpp"
#include "lanes/vip/other_injectors.hpp"

namespace lanes::vip {

using namespace lanes::testbed;

InjectorFiles injector_files(const RunLayout& run, const std::string& host) {
  std::string dir = run.node_dir("hosts", host);
  return {dir + "/injector.json", dir + "/injector-state.json", dir + "/exabgp.conf", dir + "/bird.conf",
          dir + "/bird.sock"};
}

SpeakerConfig injector_config(const Topology& t, int host) {
  const Node& h = t.nodes.at(static_cast<size_t>(host));
  const Rack& rack = t.racks.at(static_cast<size_t>(h.rack));
  const Node& sw = t.nodes.at(static_cast<size_t>(rack.switch_node));
  SpeakerConfig c;
  c.host = h.name;
  c.injector = to_string(h.job->injector);
  c.add_path = h.job->vip == VipMode::add_path;
  c.active_backup = h.job->egress == testbed::EgressMode::active_backup;
  // the job's families only; an IPv6-only job's sessions run over IPv6
  c.task4 = h.job->has4() ? h.job->task_ip4.to_string() : "";
  c.task6 = h.job->has6() ? h.job->task_ip6.to_string() : "";
  c.local_as = h.asn;
  c.peer_as = sw.asn;
  c.hold_time = rack.sw.hold_time_s;
  std::vector<int> all;
  for (const auto& nic : h.nics) {
    c.nics.push_back({nic.index, "eth" + std::to_string(nic.index), nic.job_addr4.addr.to_string(),
                      nic.job_addr6.addr.to_string()});
    all.push_back(nic.index);
  }
  // per NIC: its own next hop; ADD-PATH: every NIC's, on two sessions
  for (const auto& nic : h.nics)
    if (has_injector_session(h, nic.index))
      c.sessions.push_back({injector_session_address(h, nic.index), injector_session_peer(t, h, nic.index),
                            c.add_path ? all : std::vector<int>{nic.index}, "eth" + std::to_string(nic.index)});
  return c;
}

namespace {
Status write_text(const std::string& path, const std::string& text) {
  std::ofstream o(path, std::ios::trunc);
  o << text;
  o.close();
  if (!o) return errno_error("writing " + path);
  return {};
}

// injector.json, and for ExaBGP and BIRD their own configuration made from it
Status write_config(const InjectorFiles& f, const SpeakerConfig& c) {
  if (auto st = write_text(f.config, c.to_json().dump(2) + "\n"); !st) return st;
  try {
    if (c.injector == "exabgp") return write_text(f.exabgp, render_exabgp_config(c));
    if (c.injector == "bird") return write_text(f.bird, render_bird_config(c));
  } catch (const std::invalid_argument& e) {
    return os_error(EINVAL, e.what());
  }
  return {};
}
}  // namespace

Status deploy_injectors(DeployContext& ctx) {
  const Topology& t = ctx.tb.topology();
  RunLayout run = ctx.reg.layout(ctx.run_id);
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    const Node& h = t.nodes[i];
    if (h.kind != NodeKind::host || !h.job || !ctx.local(static_cast<int>(i))) continue;
    auto f = injector_files(run, h.name);
    std::error_code ec;
    std::filesystem::create_directories(run.node_dir("hosts", h.name), ec);
    auto c = injector_config(t, static_cast<int>(i));
    if (auto st = write_config(f, c); !st) return st;
    DaemonRequest d;
    d.node = h.name;
    d.name = "vip-injector";
    d.netns = RunRegistry::netns_name(ctx.run_id, h.name + ".job");
    switch (h.job->injector) {
      case InjectorKind::lanes:
        d.argv = {ctx.bin_dir + "/lanes-vip-injector", "--config", f.config, "--state", f.state};
        d.ready_file = f.state;
        break;
      case InjectorKind::exabgp:
        // ready once started: ExaBGP says nothing lanes could wait on
        d.argv = {"exabgp", f.exabgp};
        d.env = exabgp_environment();
        break;
      case InjectorKind::bird:
        d.argv = {"bird", "-f", "-c", f.bird, "-s", f.bird_socket};
        d.ready_file = f.bird_socket;  // BIRD opens it once its configuration is read
        break;
      case InjectorKind::exec:
        // the user's own: the same configuration, named in its environment;
        // lanes expects nothing back but BGP on the wire (ready once started)
        d.argv = {"/bin/sh", "-c", h.job->injector_cmd};
        d.env = {{"LANES_INJECTOR_CONFIG", f.config}, {"LANES_NODE", h.name}};
        break;
    }
    ctx.daemons.push_back(std::move(d));
  }
  return {};
}

Status claim_task_ips(const RunLayout& run, const std::string& host, const std::string& task4,
                      const std::string& task6) {
  auto f = injector_files(run, host);
  SpeakerConfig c;
  try {
    std::ifstream in(f.config);
    if (!in) return errno_error("reading " + f.config);
    c = SpeakerConfig::from_json(nlohmann::json::parse(in));
  } catch (const std::exception& e) {
    return os_error(EINVAL, f.config + ": " + e.what());
  }
  c.task4 = task4;
  c.task6 = task6;
  return write_config(f, c);
}

nlohmann::json InjectorRole::status(const RunRegistry& reg, const std::string& run_id, const Node& node, int,
                                    bool) const {
  if (node.kind != NodeKind::host || !node.job) return nullptr;
  try {
    std::ifstream in(injector_files(reg.layout(run_id), node.name).state);
    if (!in) return nullptr;
    return nlohmann::json::parse(in);
  } catch (const std::exception&) {
    return nullptr;
  }
}

void InjectorRole::print_status(const nlohmann::json& v, const nlohmann::json&, std::ostream& out) const {
  out << fmt::format("  VIP injector ({}): {} {}\n", v.value("mode", "?"), v.value("task4", ""), v.value("task6", ""));
  for (const auto& ss : v.value("sessions", nlohmann::json::array())) {
    std::string ann;
    for (const auto& k : ss["announced_nics"]) ann += " nic" + std::to_string(k.get<int>());
    out << fmt::format("    {} -> {} {:<11} announcing:{}{}\n", ss.value("local", "?"), ss.value("peer", "?"),
                       ss.value("state", "?"), ann.empty() ? " nothing" : ann,
                       ss.value("last_error", "").empty() ? "" : "  last error: " + ss["last_error"].get<std::string>());
  }
}

}  // namespace lanes::vip
