#include "lanes/reports/result.hpp"

#include <fmt/format.h>

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
  for (size_t i = 0; i < r.scenarios.size(); ++i) {
    if (auto t = phase_table(r.scenarios[i]); !t.empty()) j["scenarios"][i]["by_phase"] = t;
    if (auto d = delay_table(r.scenarios[i]); !d.empty()) j["scenarios"][i]["delays"] = d;
  }
}

PhaseTable phase_table(const ScenarioResult& s) {
  PhaseTable t;
  if (s.phases.size() < 2) return t;
  std::map<std::string, int> in_phases;
  for (const auto& p : s.phases)
    for (const auto& w : p.workloads)
      if (++in_phases[w.name] == 2) t.workloads.push_back(w.name);
  if (t.workloads.empty()) return t;
  // in the order the workloads first ran
  std::vector<std::string> order;
  for (const auto& p : s.phases)
    for (const auto& w : p.workloads)
      if (in_phases[w.name] >= 2 && std::find(order.begin(), order.end(), w.name) == order.end()) order.push_back(w.name);
  t.workloads = order;
  t.baseline = s.phases.front().name;
  auto cell_of = [](const WorkloadResult& w) {
    PhaseCell c;
    const json& f = w.figures;
    c.figure = f.contains("throughput_gbps") ? "throughput_gbps" : f.contains("busbw_gbps") ? "busbw_gbps" : "";
    if (!c.figure.empty() && f[c.figure].is_number()) c.gbps = f[c.figure].get<double>();
    else c.figure.clear();
    if (f.contains("seconds") && f["seconds"].is_number()) c.seconds = f["seconds"].get<double>();
    if (f.contains("machine_cpu_s_per_gbit") && f["machine_cpu_s_per_gbit"].is_number())
      c.cpu_s_per_gbit = f["machine_cpu_s_per_gbit"].get<double>();
    if (f.contains("connection_errors") && f["connection_errors"].is_number_integer())
      c.connection_errors = f["connection_errors"].get<int>();
    if (f.contains("bytes_verified") && f["bytes_verified"].is_boolean()) c.bytes_verified = f["bytes_verified"].get<bool>();
    c.nic_share = w.nic_share;
    return c;
  };
  const PhaseResult& base = s.phases.front();
  for (const auto& p : s.phases) {
    PhaseRow row;
    row.phase = p.name;
    row.egress = p.config.value("egress", std::string());
    for (const auto& w : p.workloads) {
      if (in_phases[w.name] < 2) continue;
      PhaseCell c = cell_of(w);
      const WorkloadResult* b = base.workload(w.name);
      if (b && c.gbps) {
        PhaseCell bc = cell_of(*b);
        if (bc.figure == c.figure && bc.gbps && *bc.gbps > 0) c.ratio = *c.gbps / *bc.gbps;
      }
      row.cells[w.name] = c;
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

void to_json(json& j, const PhaseTable& t) {
  j = json{{"baseline", t.baseline}, {"workloads", t.workloads}, {"rows", json::array()}};
  for (const auto& r : t.rows) {
    json cells = json::object();
    for (const auto& [name, c] : r.cells) {
      json x = {{"figure", c.figure},
                {"seconds", c.seconds},
                {"nic_share", c.nic_share},
                {"connection_errors", c.connection_errors}};
      x["gbps"] = c.gbps ? json(*c.gbps) : json(nullptr);
      x["bytes_verified"] = c.bytes_verified ? json(*c.bytes_verified) : json(nullptr);
      x["ratio"] = c.ratio ? json(*c.ratio) : json(nullptr);
      x["cpu_s_per_gbit"] = c.cpu_s_per_gbit ? json(*c.cpu_s_per_gbit) : json(nullptr);
      cells[name] = x;
    }
    j["rows"].push_back({{"phase", r.phase}, {"egress", r.egress}, {"workloads", cells}});
  }
}

namespace {
// a delay line's figures (lanes-delay's state, as the topology's lines and
// the impair faults record them) into ROW
DelayRow delay_row(const std::string& phase, const std::string& what, const json& d) {
  DelayRow r;
  r.phase = phase;
  r.what = what;
  r.where = d.value("where", std::string());
  r.engine = d.value("engine", std::string("lanes-delay"));
  r.error = d.value("error", std::string());
  r.delay_us = d.value("configured_delay_us", 0.0);
  r.jitter_us = d.value("configured_jitter_us", 0.0);
  r.packets = d.value("packets", uint64_t{0});
  r.drops = d.value("tap_drops", uint64_t{0}) + d.value("queue_drops", uint64_t{0});
  auto fig = [&](const char* k, double& out) {
    // a figure of a line that held nothing, or not computed yet (0), is not measured
    if (r.packets && d.contains(k) && d[k].is_number() && d[k].get<double>() > 0) out = d[k].get<double>();
  };
  fig("held_min_us", r.held_min_us);
  fig("held_mean_us", r.held_mean_us);
  fig("held_p50_us", r.held_p50_us);
  fig("held_p99_us", r.held_p99_us);
  fig("held_max_us", r.held_max_us);
  return r;
}
}  // namespace

std::vector<DelayRow> delay_table(const ScenarioResult& s) {
  std::vector<DelayRow> out;
  for (const auto& p : s.phases) {
    if (!p.config.is_object()) continue;
    if (auto it = p.config.find("delay_lines"); it != p.config.end() && it->is_array())
      for (const auto& d : *it) out.push_back(delay_row(p.name, "link " + d.value("link", std::string()), d));
    for (const auto& [k, v] : p.config.items()) {
      if (k.rfind("fault_", 0) != 0 || !v.is_object() || !v.contains("impairment")) continue;
      for (const char* side : {"tx", "rx"}) {
        const json& imp = v["impairment"];
        if (!imp.contains(side) || !imp[side].is_object() || !imp[side].contains("delay")) continue;
        out.push_back(delay_row(p.name, fmt::format("fault {} ({})", k.substr(6), side), imp[side]["delay"]));
      }
    }
  }
  return out;
}

void to_json(json& j, const DelayRow& r) {
  auto num = [](double v) { return v < 0 ? json(nullptr) : json(v); };
  j = json{{"phase", r.phase},
           {"what", r.what},
           {"where", r.where},
           {"engine", r.engine},
           {"configured_delay_us", r.delay_us},
           {"configured_jitter_us", r.jitter_us},
           {"packets", r.packets},
           {"held_min_us", num(r.held_min_us)},
           {"held_mean_us", num(r.held_mean_us)},
           {"held_p50_us", num(r.held_p50_us)},
           {"held_p99_us", num(r.held_p99_us)},
           {"held_max_us", num(r.held_max_us)},
           {"drops", r.drops}};
  if (!r.error.empty()) j["error"] = r.error;
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
