#include "lanes/testbed/model.hpp"

namespace lanes::testbed {

const char* to_string(NodeKind k) {
  switch (k) {
    case NodeKind::spine: return "spine";
    case NodeKind::rack_switch: return "switch";
    case NodeKind::host: return "host";
    case NodeKind::server: return "server";
  }
  return "?";
}

const char* to_string(ServerRole r) { return r == ServerRole::storage ? "storage" : "param"; }

const char* to_string(EgressMode m) {
  switch (m) {
    case EgressMode::single: return "single";
    case EgressMode::ecmp: return "ecmp";
    case EgressMode::bpf: return "bpf";
    case EgressMode::bpf_numa: return "bpf-numa";
    case EgressMode::bind: return "bind";
    case EgressMode::active_backup: return "active-backup";
    case EgressMode::mptcp: return "mptcp";
  }
  return "?";
}

std::optional<EgressMode> parse_egress_mode(const std::string& s) {
  for (auto m : {EgressMode::single, EgressMode::ecmp, EgressMode::bpf, EgressMode::bpf_numa, EgressMode::bind,
                 EgressMode::active_backup, EgressMode::mptcp})
    if (s == to_string(m)) return m;
  return std::nullopt;
}

const char* to_string(VipMode m) { return m == VipMode::per_nic ? "per-nic" : "add-path"; }

std::optional<VipMode> parse_vip_mode(const std::string& s) {
  for (auto m : {VipMode::per_nic, VipMode::add_path})
    if (s == to_string(m)) return m;
  return std::nullopt;
}

const char* to_string(SwitchStack s) { return s == SwitchStack::frr ? "frr" : "gobgp"; }

std::optional<SwitchStack> parse_switch_stack(const std::string& s) {
  for (auto m : {SwitchStack::gobgp, SwitchStack::frr})
    if (s == to_string(m)) return m;
  return std::nullopt;
}

const char* to_string(InjectorKind k) {
  switch (k) {
    case InjectorKind::lanes: return "lanes";
    case InjectorKind::exabgp: return "exabgp";
    case InjectorKind::bird: return "bird";
    case InjectorKind::exec: return "exec";
  }
  return "lanes";
}

std::optional<InjectorKind> parse_injector_kind(const std::string& s) {
  for (auto k : {InjectorKind::lanes, InjectorKind::exabgp, InjectorKind::bird, InjectorKind::exec})
    if (s == to_string(k)) return k;
  return std::nullopt;
}

const char* to_string(JobFamily f) {
  switch (f) {
    case JobFamily::ipv4: return "ipv4";
    case JobFamily::ipv6: return "ipv6";
    case JobFamily::dual: break;
  }
  return "dual";
}

std::optional<JobFamily> parse_job_family(const std::string& s) {
  if (s == "dual") return JobFamily::dual;
  if (s == "ipv4") return JobFamily::ipv4;
  if (s == "ipv6") return JobFamily::ipv6;
  return std::nullopt;
}

const char* to_string(LinkKind k) {
  switch (k) {
    case LinkKind::host_nic: return "host-nic";
    case LinkKind::server: return "server";
    case LinkKind::fabric: return "fabric";
  }
  return "?";
}

bool Topology::is_job_host(const std::string& node) const {
  int i = find_node(node);
  return i >= 0 && nodes[static_cast<size_t>(i)].kind == NodeKind::host && nodes[static_cast<size_t>(i)].job.has_value();
}

bool has_injector_session(const Node& host, int nic) {
  if (!host.job) return false;
  return host.job->vip != VipMode::add_path || nic < kAddPathSessions;
}

std::string injector_session_address(const Node& host, int nic) {
  const auto& n = host.nics.at(static_cast<size_t>(nic));
  return host.job && !host.job->has4() ? n.job_addr6.addr.to_string() : n.job_addr4.addr.to_string();
}

std::string injector_session_peer(const Topology& t, const Node& host, int nic) {
  const auto& sw_end = t.links.at(static_cast<size_t>(host.nics.at(static_cast<size_t>(nic)).link)).a;
  return host.job && !host.job->has4() ? sw_end.addr6.addr.to_string() : sw_end.addr4.addr.to_string();
}

int Topology::find_node(const std::string& n) const {
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].name == n) return static_cast<int>(i);
  return -1;
}

std::vector<int> Topology::links_of(int node) const {
  std::vector<int> out;
  for (size_t i = 0; i < links.size(); ++i)
    if (links[i].a.node == node || links[i].b.node == node) out.push_back(static_cast<int>(i));
  return out;
}

size_t Topology::count(NodeKind k) const {
  size_t n = 0;
  for (const auto& node : nodes) n += node.kind == k;
  return n;
}

}  // namespace lanes::testbed
