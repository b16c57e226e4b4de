#include <fmt/format.h>

#include <algorithm>

#include "workloads.hpp"

namespace lanes::scenarios {

std::vector<std::string> Workload::sampled_hosts(const Step& st, const testbed::Topology& topo) const {
  std::vector<std::string> out;
  for (const char* k : {"host", "from", "to"})
    if (st.has(k)) out.push_back(st.str(k));
  if (st.has("rack"))
    for (const auto& h : hosts_of(st, topo)) out.push_back(h);
  return out;
}

std::vector<reports::FigureDecl> verified_figures(std::vector<reports::FigureDecl> own) {
  using C = reports::FigureDecl::Combine;
  own.push_back({"connection_errors", "", C::sum, true});
  own.push_back({"bytes_verified", "", C::all, false});
  own.push_back({"verified_bytes", "bytes", C::sum, false});
  return own;
}

std::string verified_words(const nlohmann::json& f) {
  return f.value("bytes_verified", false) ? "all bytes verified" : "NOT verified";
}

reports::WorkloadResult combine_runs(const std::vector<reports::WorkloadResult>& runs, const Workload& plugin) {
  using nlohmann::json;
  if (runs.empty()) return {};
  std::vector<size_t> order(runs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return runs[a].figures.value("seconds", 0.0) < runs[b].figures.value("seconds", 0.0);
  });
  reports::WorkloadResult r = runs[order[order.size() / 2]];
  r.declared = plugin.declared_figures();
  r.start_s = runs.front().start_s;
  r.end_s = runs.back().end_s;
  // the figures its plug-in declares combined as it declares them: the
  // median run's, or over every run
  for (const auto& d : r.declared) {
    if (d.combine == reports::FigureDecl::Combine::sum) {
      bool integral = true;
      int64_t whole = 0;
      double any = 0;
      for (const auto& x : runs) {
        auto v = x.figures.value(d.key, json(0));
        if (!v.is_number()) continue;
        if (v.is_number_integer()) whole += v.get<int64_t>();
        else integral = false;
        any += v.get<double>();
      }
      r.figures[d.key] = integral ? json(whole) : json(any);
    } else if (d.combine == reports::FigureDecl::Combine::all) {
      bool all = true;
      for (const auto& x : runs) all = all && x.figures.value(d.key, false);
      r.figures[d.key] = all;
    }
  }
  json secs = json::array();
  json notes = json::array();  // each failed run's own reason
  for (size_t k = 0; k < runs.size(); ++k) {
    const auto& x = runs[k];
    secs.push_back(x.figures.value("seconds", 0.0));
    if (!x.figures.value("bytes_verified", false))
      notes.push_back(fmt::format("run {}: {}", k + 1,
                                  x.figures.contains("verify_note") ? x.figures["verify_note"].dump() : "no reason recorded"));
  }
  if (notes.empty()) r.figures.erase("verify_note");
  else r.figures["verify_note"] = notes;
  r.figures["runs"] = runs.size();
  r.figures["seconds_runs"] = secs;
  r.summary = plugin.summary(r.figures);
  return r;
}

const std::vector<const Workload*>& workloads() {
  static const Checkpoint save(true), restore(false);
  static const Ingest ingest;
  static const Dataload dataload;
  static const Bootstrap bootstrap;
  static const Probe probe;
  static const Collective collective;
  static const Training training;
  static const Exec exec;
  static const Trace trace;
  // (the combination matrix's order of workload types, so its seeded
  // covering array stays as it was; exec has no matrix run)
  static const std::vector<const Workload*> all = {&save,      &restore, &ingest, &dataload, &collective,
                                                   &training,  &bootstrap, &probe, &exec,   &trace};
  return all;
}

const Workload* find_workload(const std::string& type) {
  for (const auto* w : workloads())
    if (type == w->type()) return w;
  return nullptr;
}

}  // namespace lanes::scenarios
