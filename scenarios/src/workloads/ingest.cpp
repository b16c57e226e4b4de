#include "workloads.hpp"

namespace lanes::scenarios {

using nlohmann::json;

const char* Ingest::type() const { return "ingest"; }

const Attrs& Ingest::attrs() const {
  static const Attrs a = {{"host", Kind::host, true}, {"server", Kind::server, true}, {"conns", Kind::count},
                          {"requests", Kind::count},  {"size", Kind::size},           {"wait", Kind::boolean},
                          {"timeout", Kind::duration}, {"repeat", Kind::integer}, kFamilyAttr};
  return a;
}

// one host's job: conns= connections, each requests= requests of size= in turn
void Ingest::start(WorkloadRun& w, StepContext& ctx) const {
  const Step& st = w.step;
  FetchPlan plan;
  plan.servers = {st.str("server")};
  plan.hosts = {st.str("host")};
  plan.conns = {st.integer("conns", 32)};
  plan.requests = st.integer("requests", 20);
  plan.bytes = st.bytes("size", 65536);
  start_fetchers(w, ctx, plan);
}

json Ingest::figures(const WorkloadRun& w, double, StepContext&) const { return fetch_figures(fetch_results(w)); }

std::string Ingest::summary(const json& f) const { return fetch_summary(f); }
std::vector<reports::FigureDecl> Ingest::declared_figures() const { return fetch_declared(); }
std::string Ingest::matrix_steps() const {
  return R"(<workload name="w" type="ingest" host="h1" server="storage" conns="8" requests="4" size="256K"/>)";
}

}  // namespace lanes::scenarios
