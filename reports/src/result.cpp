#include "lanes/reports/result.hpp"

#include <algorithm>

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace lanes::reports {

using nlohmann::json;

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Window, host, from_s, to_s, label)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Assertion, name, phase, line, passed, expected, measured, message,
                                                windows)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Series, name, host, nic, direction, unit, interval_s, values)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Marker, t_s, label, kind)
NLOHMANN_JSON_SERIALIZE_ENUM(FigureDecl::Combine, {{FigureDecl::Combine::median_run, "median-run"},
                                                   {FigureDecl::Combine::sum, "sum"},
                                                   {FigureDecl::Combine::all, "all"}})
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(FigureDecl, key, unit, combine, compared)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(WorkloadResult, name, type, host, start_s, end_s, figures, nic_share,
                                                summary, declared)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(PhaseResult, name, run_id, config, duration_s, series, markers,
                                                workloads)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(TopologyView::Node, name, kind, rack)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(TopologyView::Link, a, b, kind)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(TopologyView, name, nodes, links)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ScenarioResult, name, description, file, passed, error, not_run,
                                                duration_s, topology, phases, assertions, log_tail)

void to_json(json& j, const RunResult& r) {
  j = json{{"format", "lanes-results/1"},
           {"lanes_version", r.lanes_version},
           {"kernel", r.kernel},
           {"gobgpd", r.gobgpd},
           {"features", r.features},
           {"seed", r.seed},
           {"started", r.started},
           {"duration_s", r.duration_s},
           {"passed", r.passed()},
           {"assertions", {{"total", r.assertions_total()}, {"failed", r.assertions_failed()}}},
           {"scenarios", r.scenarios}};
}

void from_json(const json& j, RunResult& r) {
  r.lanes_version = j.value("lanes_version", "");
  r.kernel = j.value("kernel", "");
  r.gobgpd = j.value("gobgpd", "");
  r.features = j.value("features", json::object());
  r.seed = j.value("seed", uint64_t{1});
  r.started = j.value("started", "");
  r.duration_s = j.value("duration_s", 0.0);
  r.scenarios = j.value("scenarios", std::vector<ScenarioResult>{});
}

const WorkloadResult* PhaseResult::workload(const std::string& n) const {
  for (const auto& w : workloads)
    if (w.name == n) return &w;
  return nullptr;
}

const PhaseResult* ScenarioResult::phase(const std::string& n) const {
  for (const auto& p : phases)
    if (p.name == n) return &p;
  return nullptr;
}

bool RunResult::passed() const {
  bool ran = false;
  for (const auto& s : scenarios) {
    if (!s.not_run.empty()) continue;
    if (!s.passed) return false;
    ran = true;
  }
  return ran;
}

int RunResult::not_run() const {
  return static_cast<int>(std::count_if(scenarios.begin(), scenarios.end(),
                                        [](const ScenarioResult& s) { return !s.not_run.empty(); }));
}

int RunResult::assertions_failed() const {
  int n = 0;
  for (const auto& s : scenarios)
    for (const auto& a : s.assertions) n += !a.passed;
  return n;
}

int RunResult::assertions_total() const {
  int n = 0;
  for (const auto& s : scenarios) n += static_cast<int>(s.assertions.size());
  return n;
}

void write_results_json(const RunResult& r, const std::string& path) {
  std::ofstream out(path, std::ios::trunc);
  out << json(r).dump(1) << "\n";
  if (!out) throw std::runtime_error("writing " + path + " failed");
}

namespace {

// nlohmann's message without its "[json.exception.type_error.302] " tag
std::string in_words(const json::exception& e) {
  std::string w = e.what();
  if (!w.empty() && w[0] == '[') {
    auto close = w.find("] ");
    if (close != std::string::npos) w = w.substr(close + 2);
  }
  return w;
}

}  // namespace

RunResult read_results_json(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw std::runtime_error(path + ": is a directory, not a results file");
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open (lanes run --out DIR writes DIR/results.json)");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    throw std::runtime_error(path + ": not JSON: " + in_words(e));
  }
  if (!j.is_object() || !j.contains("format") || !j["format"].is_string() || j["format"] != "lanes-results/1")
    throw std::runtime_error(path + ": not a lanes results file (no \"format\": \"lanes-results/1\")");
  try {
    return j.get<RunResult>();
  } catch (const json::exception& e) {
    throw std::runtime_error(path + ": a lanes results file this lanes cannot read: a field is missing or has the "
                             "wrong type (" + in_words(e) + ")");
  }
}

}  // namespace lanes::reports
