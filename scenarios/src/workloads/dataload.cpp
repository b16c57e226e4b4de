#include <fmt/format.h>

#include "lanes/scenarios/arrivals.hpp"
#include "workloads.hpp"

namespace lanes::scenarios {

using nlohmann::json;
using std::chrono::milliseconds;

const char* Dataload::type() const { return "dataload"; }

const Attrs& Dataload::attrs() const {
  static const Attrs a = {{"host", Kind::host, true},        {"server", Kind::server, true}, {"rate", Kind::positive, true},
                          {"size", Kind::size},              {"conns", Kind::count},         {"duration", Kind::duration},
                          {"arrival", Kind::choice, false, "poisson|constant"},               {"wait", Kind::boolean},
                          {"timeout", Kind::duration},       kFamilyAttr};
  return a;
}

void Dataload::start(WorkloadRun& w, StepContext& ctx) const {
  const Step& st = w.step;
  FetchPlan plan;
  plan.servers = {st.str("server")};
  plan.hosts = {st.str("host")};
  plan.conns = {st.integer("conns", 32)};
  plan.bytes = st.bytes("size", 1 << 20);
  plan.rate = st.num("rate");
  plan.duration_s = static_cast<double>(st.duration("duration", milliseconds(10'000)).count()) / 1000.0;
  plan.arrival = st.str("arrival", "poisson");
  start_fetchers(w, ctx, plan);
}

json dataload_figures(const std::optional<traffic::FetchResult>& r, double duration_s) {
  json f = fetch_figures({r});
  f["duration_s"] = duration_s;
  if (!r) return f;
  auto trend = latency_trend(r->issue_s, r->latency_samples_ms, duration_s);
  f["issued"] = r->issued;
  f["outstanding"] = r->outstanding;
  f["p99_per_s_ms"] = trend.p99_per_s;
  f["p99_slope_ms_per_s"] = trend.slope_ms_per_s;
  f["p99_first_ms"] = trend.p99_first_ms;
  f["p99_final_ms"] = trend.p99_final_ms;
  f["p99_typical_ms"] = trend.p99_typical_ms;
  // a request left unanswered makes the run incomplete, not fast
  if (r->outstanding) f["connection_errors"] = f.value("connection_errors", 0) + 1;
  return f;
}

json Dataload::figures(const WorkloadRun& w, double, StepContext&) const {
  auto results = fetch_results(w);
  double d = static_cast<double>(w.step.duration("duration", milliseconds(10'000)).count()) / 1000.0;
  return dataload_figures(results.empty() ? std::nullopt : results[0], d);
}

std::string Dataload::summary(const json& f) const {
  return fmt::format("{} requests · p99 {:.0f} ms in the first quarter, {:.0f} ms in the last · slope {:.1f} ms/s · "
                     "{} unanswered · {} errors",
                     f.value("requests", uint64_t{0}), f.value("p99_first_ms", 0.0), f.value("p99_final_ms", 0.0),
                     f.value("p99_slope_ms_per_s", 0.0), f.value("outstanding", uint64_t{0}),
                     f.value("connection_errors", 0));
}

std::vector<reports::FigureDecl> Dataload::declared_figures() const {
  using C = reports::FigureDecl::Combine;
  // its figures are a fetch's (fetch_figures) and the latency trend
  auto d = fetch_declared();
  for (reports::FigureDecl x : {reports::FigureDecl{"requests", "", C::median_run, false},
                                reports::FigureDecl{"p99_first_ms", "ms", C::median_run, false},
                                reports::FigureDecl{"p99_final_ms", "ms"},
                                reports::FigureDecl{"p99_typical_ms", "ms"},
                                reports::FigureDecl{"p99_slope_ms_per_s", "ms/s"},
                                reports::FigureDecl{"outstanding", "", C::median_run, false}})
    d.push_back(std::move(x));
  return d;
}

std::string Dataload::matrix_steps() const {
  return R"(<workload name="w" type="dataload" host="h1" server="storage" rate="40" size="64K" conns="4" duration="2s"/>)";
}

}  // namespace lanes::scenarios
