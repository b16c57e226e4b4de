#include "workload_runs.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include "lanes/testbed/interrupt.hpp"

namespace lanes::scenarios {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A workload with repeat="N" runs N times back to back; it is reported
// once, its runs combined as its plug-in declares (a completion time by the
// median run: completion times have a tail, a flow that loses its last
// segments waits for a retransmission timeout), every run's time beside it.
void WorkloadRuns::start(const Step& st) {
  int repeat = st.integer("repeat", 1);
  if (repeat <= 1) return start_once(st);
  std::string name = st.str("name");
  std::vector<reports::WorkloadResult> runs;
  for (int i = 0; i < repeat; ++i) {
    Step one = st;
    one.attrs["name"] = fmt::format("{}#{}", name, i + 1);
    one.attrs.erase("repeat");
    start_once(one);
    runs.push_back(pr_.workloads.back());
    pr_.workloads.pop_back();
  }
  reports::WorkloadResult r = combine_runs(runs, *find_workload(st.type));
  r.name = name;
  nlohmann::json secs = r.figures["seconds_runs"];
  marks_[name + ".start"] = r.start_s;
  marks_[name + ".end"] = r.end_s;
  ctx_.say(fmt::format("workload {}: median of {} runs {:.2f} s (runs: {})", name, repeat,
                       r.figures.value("seconds", 0.0), secs.dump()));
  pr_.workloads.push_back(std::move(r));
}

void WorkloadRuns::start_once(const Step& st) {
  const Workload* plugin = find_workload(st.type);
  if (!plugin) throw StepError("no workload type " + st.type);  // the loader knows every type
  WorkloadRun w;
  w.step = st;
  std::string name = st.str("name");
  plugin->start(w, ctx_);
  w.cpu_at_start = testbed::read_cpu_times();
  marks_[name + ".start"] = w.start_s;
  pr_.markers.push_back({w.start_s, name, "workload"});
  ctx_.say(fmt::format("workload {} ({}) started", name, st.type));
  auto& ref = running_.emplace(name, std::move(w)).first->second;
  if (!plugin->open_ended() && st.flag("wait", true)) finish(ref, false);
}

void WorkloadRuns::end_all() {
  for (auto& [name, w] : running_)
    if (!w.finished) finish(w, true);
}

WorkloadRun* WorkloadRuns::find(const std::string& name) {
  auto it = running_.find(name);
  return it == running_.end() ? nullptr : &it->second;
}

void WorkloadRuns::finish_if_running(const std::string& name, bool stop) {
  auto& w = running_.at(name);  // the loader checked that the phase starts it before
  if (!w.finished) finish(w, stop);
}

void add_cpu_figures(nlohmann::json& f, const std::optional<testbed::CpuTimes>& before,
                     const std::optional<testbed::CpuTimes>& after) {
  if (!before || !after || after->busy < before->busy) return;
  static const double hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
  double cpu_s = static_cast<double>(after->busy - before->busy) / (hz > 0 ? hz : 100.0);
  f["machine_cpu_s"] = cpu_s;
  uint64_t bytes = f.value("verified_bytes", uint64_t{0});
  if (bytes > 0) f["machine_cpu_s_per_gbit"] = cpu_s / (static_cast<double>(bytes) * 8 / 1e9);
}

// Waits for (or, with STOP, ends) workload W and records its figures.
void WorkloadRuns::finish(WorkloadRun& w, bool stop) {
  const Step& st = w.step;
  const Workload& plugin = *find_workload(st.type);
  auto deadline = Clock::now() + st.duration("timeout", milliseconds(300'000));
  bool timed_out = false;
  for (auto& c : w.clients) {
    if (stop) (void)c.d.stop(milliseconds(2000));
    // on its pidfd, waking every 100 ms to see whether lanes is interrupted
    while (!c.d.wait_until(std::min(deadline, Clock::now() + milliseconds(100)))) {
      if (Clock::now() >= deadline || testbed::interrupted()) {
        timed_out = true;
        (void)c.d.stop(milliseconds(1000));
        break;
      }
    }
    c.status = c.d.exit_status();
    // whatever it left in its process group (lanes made it the leader of a
    // session of its own) ends with it; a process that made a session of
    // its own (a daemon) is the run's namespaces' to end
    if (c.d.pid() > 0) ::kill(-c.d.pid(), SIGKILL);
  }
  double end = ctx_.now_s();
  for (auto& s : w.servers) {
    if (plugin.servers_end()) (void)s.d.wait_until(Clock::now() + milliseconds(5000));
    // a server that still runs is told to end (a probe's receiver counts
    // the probes still in flight first)
    if (s.d.running()) (void)s.d.stop(milliseconds(2000));
  }
  w.finished = true;
  marks_[st.str("name") + ".end"] = end;
  reports::WorkloadResult r;
  r.name = st.str("name");
  r.type = st.type;
  r.host = st.str("host", st.str("from"));
  r.start_s = w.start_s;
  r.end_s = end;
  r.figures = plugin.figures(w, end, ctx_);
  add_cpu_figures(r.figures, w.cpu_at_start, testbed::read_cpu_times());
  if (timed_out) r.figures[testbed::interrupted() ? "interrupted" : "timed_out"] = true;
  else if (stop) r.figures["stopped"] = true;  // lanes ended it (<stop>, or the phase's end)
  r.declared = plugin.declared_figures();
  pr_.markers.push_back({end, r.name + " done", "workload"});
  if (nic_) nic_(r, end);
  r.summary = plugin.summary(r.figures);  // after the NIC figures, which it may name
  ctx_.say(fmt::format("workload {} done in {:.2f} s: {}", r.name, end - w.start_s, r.summary));
  if (auto v = plugin.verdict(r); v && report_) {
    v->line = st.line;
    report_(std::move(*v));
  }
  pr_.workloads.push_back(std::move(r));
  if (timed_out && testbed::interrupted()) throw StepError("interrupted");
  if (timed_out) throw StepError("workload " + st.str("name") + " did not finish within its timeout");
}

}  // namespace lanes::scenarios
