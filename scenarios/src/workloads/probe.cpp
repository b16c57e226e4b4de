#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "workloads.hpp"

namespace lanes::scenarios {

using nlohmann::json;

const char* Probe::type() const { return "probe"; }

const Attrs& Probe::attrs() const {
  static const Attrs a = {{"from", Kind::node, true}, {"to", Kind::node, true}, {"paths", Kind::count},
                          {"rate", Kind::positive},   {"per-nic", Kind::boolean}, kFamilyAttr};
  return a;
}

std::string Probe::check(const Step& st, const testbed::Topology& topo) const {
  int from = topo.find_node(st.str("from"));
  if (st.flag("per-nic", false) && from >= 0 && topo.nodes[static_cast<size_t>(from)].kind != testbed::NodeKind::host)
    return "per-nic=\"true\" needs from=\"...\" to be a job host";
  std::vector<std::string> jobs;
  for (const char* end : {"from", "to"})
    if (topo.is_job_host(st.str(end))) jobs.push_back(st.str(end));
  return job_family_problem(st, topo, jobs);
}

namespace {
const testbed::Node& node_of(const testbed::Topology& topo, const std::string& name) {
  return topo.nodes.at(static_cast<size_t>(topo.find_node(name)));
}
}  // namespace

// from= sends rate= probes a second on each of paths= paths (per-nic: one
// path per NIC, bound to its address) to to= (a job host's task IP, or a
// node's address), until stopped.
void Probe::start(WorkloadRun& w, StepContext& ctx) const {
  const Step& st = w.step;
  const auto& topo = ctx.topo();
  std::string base = ctx.out_base(st.str("name"));
  const auto &from = node_of(topo, st.str("from")), &to = node_of(topo, st.str("to"));
  w.port = ctx.take_ports(1);
  int rns = topo.is_job_host(to.name) ? ctx.job_ns(to.name) : ctx.node_ns(to.name);
  int sns = topo.is_job_host(from.name) ? ctx.job_ns(from.name) : ctx.node_ns(from.name);
  // the family both ends have: IPv6 when either job is IPv6-only
  bool v6 = wants_v6(st, topo.is_job_host(to.name) ? &to : nullptr) ||
            wants_v6(st, topo.is_job_host(from.name) ? &from : nullptr);
  std::string dst = topo.is_job_host(to.name) ? (v6 ? to.job->task_ip6.to_string() : to.job->task_ip4.to_string())
                                              : ctx.server_addr(to.name, v6);
  traffic::ProbeSendArgs send;
  send.to = dst;
  send.port = w.port;
  send.rate = st.num("rate", 1000);
  send.paths = st.integer("paths", 8);
  if (st.flag("per-nic", false)) {
    for (const auto& nic : from.nics)
      send.bind.push_back(v6 ? nic.job_addr6.addr.to_string() : nic.job_addr4.addr.to_string());
    send.paths = static_cast<int>(from.nics.size());
  }
  traffic::ProbeRecvArgs recv;
  recv.port = w.port;
  w.servers.push_back(ctx.start_traffic("probe-recv", rns, recv, base + ".probe-recv.json"));
  ctx.wait_listening(rns, w.port, true, to.name);
  w.start_s = ctx.now_s();
  w.clients.push_back(ctx.start_traffic("probe-send", sns, send, base + ".probe-send.json"));
}

json Probe::figures(const WorkloadRun& w, double end_s, StepContext& ctx) const {
  const Step& st = w.step;
  bool per_nic = st.flag("per-nic", false);
  int paths = per_nic ? static_cast<int>(node_of(ctx.topo(), st.str("from")).nics.size()) : st.integer("paths", 8);
  json f = probe_figures(traffic::read_result<traffic::ProbeSendResult>(w.clients.at(0).out),
                         traffic::read_result<traffic::ProbeRecvResult>(w.servers.at(0).out), paths, per_nic,
                         end_s - w.start_s, st.num("rate", 1000));
  f["rate_hz"] = st.num("rate", 1000);
  return f;
}

std::string Probe::summary(const json& f) const {
  return fmt::format("longest blackout {:.0f} ms ({}) · {} probes lost", f.value("blackout_ms", 0.0),
                     f.value("worst_path", std::string("-")), f.value("lost", uint64_t{0}));
}

std::vector<reports::FigureDecl> Probe::declared_figures() const {
  return {{"blackout_ms", "ms"}, {"lost", "", reports::FigureDecl::Combine::median_run, false}};
}

std::string Probe::matrix_steps() const {
  return R"(<workload name="w" type="probe" from="storage" to="h1" paths="8" rate="200"/>
    <sleep duration="2s"/>
    <stop workload="w"/>)";
}

json probe_figures(const std::optional<traffic::ProbeSendResult>& s, const std::optional<traffic::ProbeRecvResult>& rv,
                   int want_paths, bool per_nic, double duration_s, double rate_hz) {
  uint64_t sent = s ? s->sent_per_path : 0, lost = 0;
  double worst = 0;
  std::string worst_path = "-";
  json paths = json::array();
  std::set<uint64_t> seen;
  auto name = [&](uint64_t id) { return per_nic ? fmt::format("nic{}", id) : fmt::format("flow{}", id); };
  if (rv)
    for (const auto& p : rv->paths) {
      seen.insert(p.path);
      uint64_t l = sent > p.received ? sent - p.received : 0;
      lost += l;
      // probes sent after the last that arrived (receiver's view: the
      // highest sequence number seen is received + lost below it): a path
      // that went dark and never came back was blacked out to the end
      uint64_t seen_upto = p.received + p.lost;
      double trailing_ms = sent > seen_upto && rate_hz > 0 ? static_cast<double>(sent - seen_upto) * 1000.0 / rate_hz : 0;
      double gap = std::max(p.longest_gap_ms, trailing_ms);
      if (gap > worst) worst = gap, worst_path = name(p.path);
      paths.push_back({{"path", name(p.path)}, {"received", p.received}, {"lost", l}, {"longest_gap_ms", gap},
                       {"gap_started_s", p.gap_started_s}, {"dark_at_end_ms", trailing_ms}});
    }
  for (int id = 0; id < want_paths; ++id)
    if (!seen.count(static_cast<uint64_t>(id))) {  // nothing arrived on it at all: blacked out throughout
      double all_ms = duration_s * 1000;
      paths.push_back({{"path", name(static_cast<uint64_t>(id))}, {"received", 0}, {"lost", sent},
                       {"longest_gap_ms", all_ms}});
      lost += sent;
      if (all_ms > worst) worst = all_ms, worst_path = name(static_cast<uint64_t>(id));
    }
  json f;
  f["paths"] = paths;
  f["sent_per_path"] = sent;
  if (s && !s->to.empty()) {
    f["to"] = s->to;
    f["family"] = s->to.find(':') != std::string::npos ? "ipv6" : "ipv4";
  }
  f["lost"] = lost;
  f["blackout_ms"] = worst;
  f["worst_path"] = worst_path;
  return f;
}

}  // namespace lanes::scenarios
