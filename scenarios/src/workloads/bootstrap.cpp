#include <sstream>

#include "workloads.hpp"

namespace lanes::scenarios {

using nlohmann::json;

const char* Bootstrap::type() const { return "bootstrap"; }

const Attrs& Bootstrap::attrs() const {
  static const Attrs a = {{"server", Kind::servers, true}, {"hosts", Kind::hosts}, {"workers", Kind::count},
                          {"bytes", Kind::size},           {"wait", Kind::boolean}, {"timeout", Kind::duration},
                          kFamilyAttr};
  return a;
}

// A burst's figures come from its fetchers, not the NIC counters: they are
// sampled for the report's charts up to 32 hosts, not a fleet's thousand
// namespaces ten times a second.
std::vector<std::string> Bootstrap::sampled_hosts(const Step& st, const testbed::Topology& topo) const {
  auto hosts = job_hosts(st, topo);
  if (hosts.size() > 32) hosts.clear();
  return hosts;
}

// workers= fetchers spread over the hosts, one request of bytes= each; a
// server="ps1,ps2" list: the hosts take the servers in turn. The fetchers
// start held and get their go together once all run (starting a thousand
// processes takes seconds).
void Bootstrap::start(WorkloadRun& w, StepContext& ctx) const {
  const Step& st = w.step;
  FetchPlan plan;
  std::stringstream sl(st.str("server"));
  for (std::string s; std::getline(sl, s, ',');) plan.servers.push_back(s);
  plan.hosts = job_hosts(st, ctx.topo());
  if (plan.hosts.empty()) throw StepError("bootstrap hosts=\"" + st.str("hosts") + "\" names no job host");
  int workers = st.integer("workers", 256), n = static_cast<int>(plan.hosts.size());
  for (int i = 0; i < n; ++i) plan.conns.push_back(workers / n + (i < workers % n ? 1 : 0));
  plan.requests = 1;
  plan.bytes = st.bytes("bytes", 4'000'000);
  plan.burst = true;
  start_fetchers(w, ctx, plan);
}

json Bootstrap::figures(const WorkloadRun& w, double, StepContext&) const {
  json f = fetch_figures(fetch_results(w));
  f["workers"] = f["connections"];
  f["fetching_hosts"] = w.clients.size();
  f["started_in_s"] = w.started_in_s;
  return f;
}

std::string Bootstrap::summary(const json& f) const { return fetch_summary(f); }
std::vector<reports::FigureDecl> Bootstrap::declared_figures() const { return fetch_declared(); }
std::string Bootstrap::matrix_steps() const {
  return R"(<workload name="w" type="bootstrap" server="storage" workers="4" bytes="1M"/>)";
}

}  // namespace lanes::scenarios
