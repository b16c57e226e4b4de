#pragma once
// The result model of `lanes run`: what a scenario measured and concluded.
// The scenario runner fills it; the writers (JUnit XML, JSON, HTML, the
// terminal summary) only read it, and `lanes report` / `lanes compare`
// rebuild it from results.json.

#include <nlohmann/json.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace lanes::reports {

// A stretch of a phase an assertion read (a rate-ratio's base and its
// measured window): the report shades it on HOST's chart with its label.
struct Window {
  std::string host;
  double from_s = 0, to_s = 0;  // since the phase started
  std::string label;            // "base", "measured", ...
};

// A conclusion: one per <assert> and one per bounded wait.
struct Assertion {
  std::string name;      // "throughput-ratio save", "wait members h1 = 4"
  std::string phase;     // "" for assertions across phases
  int line = 0;          // in the scenario file
  bool passed = false;
  std::string expected;  // "≥ 3.80"
  std::string measured;  // "3.93"
  std::string message;   // why it failed, or a note
  std::vector<Window> windows;  // what it read of its phase's NIC samples
};

// Samples at a fixed interval, e.g. Gbit/s through one NIC.
struct Series {
  std::string name;  // "h1 nic0 tx"
  // a NIC's series: its host, NIC index and "tx" or "rx" (empty host: not a NIC's)
  std::string host;
  int nic = -1;
  std::string direction;
  std::string unit;  // "Gbit/s"
  double interval_s = 0.1;
  std::vector<double> values;
};

// Something that happened at a time: a fault, a mark, a workload start.
struct Marker {
  double t_s = 0;  // since the phase started
  std::string label;
  std::string kind;  // "fault", "mark", "workload"
};

// A figure a workload type declares (its plug-in in scenarios/): its unit,
// how the runs of a workload with repeat="N" combine into the one result,
// and whether lanes compare judges its drift. The report, compare and the
// runner read these declarations, never a type's name.
struct FigureDecl {
  enum class Combine {
    median_run,  // the run of median seconds gives it
    sum,         // added over the runs (errors, bytes)
    all,         // true only if true in every run (bytes verified)
  };
  std::string key;   // in WorkloadResult::figures
  std::string unit;  // "Gbit/s", "s", "ms", "%", "" for a count
  Combine combine = Combine::median_run;
  bool compared = true;  // lanes compare shows how far it moved
  bool operator==(const FigureDecl&) const = default;
};

struct WorkloadResult {
  std::string name;
  std::string type;  // its plug-in's type: checkpoint-save, ingest, collective, training, ...
  std::string host;  // the job host it measures ("" for several)
  double start_s = 0, end_s = 0;  // since the phase started
  nlohmann::json figures = nlohmann::json::object();  // gbps, seconds, connection_errors, ...
  std::vector<double> nic_share;  // percent of the host's NIC bytes per NIC during the workload
  std::string summary;                // its plug-in's sentence of what it measured
  std::vector<FigureDecl> declared;   // the figures its plug-in declares
};

struct PhaseResult {
  std::string name;
  std::string run_id;
  nlohmann::json config = nlohmann::json::object();  // egress, nics, rate, ...
  double duration_s = 0;
  std::vector<Series> series;  // per NIC throughput of every job host
  std::vector<Marker> markers;
  std::vector<WorkloadResult> workloads;
  const WorkloadResult* workload(const std::string& name) const;
};

// The topology as drawn in the report.
struct TopologyView {
  struct Node {
    std::string name, kind, rack;
  };
  struct Link {
    std::string a, b, kind;
  };
  std::string name;
  std::vector<Node> nodes;
  std::vector<Link> links;
};

struct ScenarioResult {
  std::string name;
  std::string description;
  std::string file;
  bool passed = false;
  std::string error;  // set when the scenario could not run to the end
  // set when it was not run at all: what this machine lacks for it (the
  // netem qdisc), said before anything was built; neither passed nor failed
  std::string not_run;
  double duration_s = 0;
  TopologyView topology;
  std::vector<PhaseResult> phases;
  std::vector<Assertion> assertions;
  std::string log_tail;
  const PhaseResult* phase(const std::string& name) const;
};

// A scenario's phases side by side (its roads, its NIC counts): a row per
// phase, a cell per workload that runs in two phases or more, each against
// the first phase's same workload. results.json carries it per scenario
// ("by_phase"), the report draws it; it is derived, never read back.
struct PhaseCell {
  std::string figure;  // what the rate is: throughput_gbps, or busbw_gbps of a collective ("": it has none)
  std::optional<double> gbps;
  std::optional<double> ratio;  // against the first phase's (none where it has no such workload)
  double seconds = 0;
  std::optional<double> cpu_s_per_gbit;  // the machine's CPU-seconds per Gbit moved
  std::vector<double> nic_share;
  int connection_errors = 0;
  std::optional<bool> bytes_verified;  // none: the workload checks no bytes (a probe, a command)
};
struct PhaseRow {
  std::string phase, egress;
  std::map<std::string, PhaseCell> cells;  // by workload
};
struct PhaseTable {
  std::string baseline;  // the first phase
  std::vector<std::string> workloads;  // in the order they first run
  std::vector<PhaseRow> rows;
  bool empty() const { return workloads.empty(); }
};
PhaseTable phase_table(const ScenarioResult& s);
void to_json(nlohmann::json& j, const PhaseTable& t);

// Each delayed link end of a scenario, configured against measured: the
// topology's delay lines (a phase's config "delay_lines") and the delays
// impair faults set and cleared (config "fault_LABEL": impairment.tx/rx.delay).
// A figure not measured is negative (percentiles come only when the delay
// line ended; a topology link's ends with the run).
struct DelayRow {
  std::string phase, what, where, engine;  // what: "link A B" or "fault LABEL (tx)"
  double delay_us = 0, jitter_us = 0;      // configured
  uint64_t packets = 0;
  double held_min_us = -1, held_mean_us = -1, held_p50_us = -1, held_p99_us = -1, held_max_us = -1;
  uint64_t drops = 0;  // the delay line's own (tap, queue; not the line's TBF)
  std::string error;
};
std::vector<DelayRow> delay_table(const ScenarioResult& s);
void to_json(nlohmann::json& j, const DelayRow& r);

struct RunResult {
  std::string lanes_version, kernel, gobgpd;
  nlohmann::json features = nlohmann::json::object();
  uint64_t seed = 1;
  std::string started;  // ISO 8601, UTC
  double duration_s = 0;
  std::vector<ScenarioResult> scenarios;
  // every scenario that ran passed, and one ran at least
  bool passed() const;
  // how many were not run on this machine (ScenarioResult::not_run)
  int not_run() const;
  int assertions_failed() const;
  int assertions_total() const;
};

void to_json(nlohmann::json& j, const Window& w);
void from_json(const nlohmann::json& j, Window& w);
void to_json(nlohmann::json& j, const Assertion& a);
void from_json(const nlohmann::json& j, Assertion& a);
void to_json(nlohmann::json& j, const Series& s);
void from_json(const nlohmann::json& j, Series& s);
void to_json(nlohmann::json& j, const Marker& m);
void from_json(const nlohmann::json& j, Marker& m);
void to_json(nlohmann::json& j, const WorkloadResult& w);
void from_json(const nlohmann::json& j, WorkloadResult& w);
void to_json(nlohmann::json& j, const PhaseResult& p);
void from_json(const nlohmann::json& j, PhaseResult& p);
void to_json(nlohmann::json& j, const TopologyView& t);
void from_json(const nlohmann::json& j, TopologyView& t);
void to_json(nlohmann::json& j, const ScenarioResult& s);
void from_json(const nlohmann::json& j, ScenarioResult& s);
void to_json(nlohmann::json& j, const RunResult& r);
void from_json(const nlohmann::json& j, RunResult& r);

// results.json: writing and reading back (throws std::runtime_error with
// the path on a file that is not a lanes result).
void write_results_json(const RunResult& r, const std::string& path);
RunResult read_results_json(const std::string& path);

}  // namespace lanes::reports
