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

const std::vector<const Workload*>& workloads() {
  static const Checkpoint save(true), restore(false);
  static const Ingest ingest;
  static const Dataload dataload;
  static const Bootstrap bootstrap;
  static const Probe probe;
  static const Collective collective;
  static const Training training;
  static const std::vector<const Workload*> all = {&save,  &restore,    &ingest,  &dataload,
                                                   &bootstrap, &probe, &collective, &training};
  return all;
}

const Workload* find_workload(const std::string& type) {
  for (const auto* w : workloads())
    if (type == w->type()) return w;
  return nullptr;
}

}  // namespace lanes::scenarios
