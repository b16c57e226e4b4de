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

const std::vector<const Workload*>& workloads() {
  static const Checkpoint save(true), restore(false);
  static const Ingest ingest;
  static const Dataload dataload;
  static const Bootstrap bootstrap;
  static const Probe probe;
  static const Collective collective;
  static const Training training;
  // (the combination matrix's order of workload types, so its seeded
  // covering array stays as it was)
  static const std::vector<const Workload*> all = {&save,       &restore,  &ingest,    &dataload,
                                                   &collective, &training, &bootstrap, &probe};
  return all;
}

const Workload* find_workload(const std::string& type) {
  for (const auto* w : workloads())
    if (type == w->type()) return w;
  return nullptr;
}

}  // namespace lanes::scenarios
