#include "lanes/scenarios/training.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <set>

namespace lanes::scenarios::training {

using nlohmann::json;

bool checkpoint_due(int step, int every) { return every > 0 && step >= 0 && (step + 1) % every == 0; }

int resume_step(const std::map<int, std::set<int>>& saved, int ranks) {
  for (auto it = saved.rbegin(); it != saved.rend(); ++it)
    if (static_cast<int>(it->second.size()) >= ranks) return it->first + 1;
  return 0;
}

uint32_t checkpoint_flow(int step, int rank) {
  // a flow of its own per (step, rank), apart from the collectives' and transfers' low numbers
  return 0x80000000u | (static_cast<uint32_t>(step & 0x7fff) << 16) | (static_cast<uint32_t>(rank) & 0xffff);
}

json to_json_line(const Event& e) {
  json j = {{"role", "training"}, {"event", e.event},     {"rank", e.rank},   {"incarnation", e.incarnation},
            {"step", e.step},     {"start_s", e.start_s}, {"mid_s", e.mid_s}, {"end_s", e.end_s},
            {"bytes", e.bytes},   {"verified", e.verified}};
  if (!e.error.empty()) j["error"] = e.error;
  return j;
}

std::vector<Event> read_events(const std::string& path) {
  std::vector<Event> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] != '{') continue;
    try {
      auto j = json::parse(line);
      if (j.value("role", "") != "training" || !j.contains("event")) continue;
      Event e;
      e.event = j.value("event", "");
      e.rank = j.value("rank", 0);
      e.incarnation = j.value("incarnation", 0);
      e.step = j.value("step", -1);
      e.start_s = j.value("start_s", 0.0);
      e.mid_s = j.value("mid_s", 0.0);
      e.end_s = j.value("end_s", 0.0);
      e.bytes = j.value("bytes", uint64_t{0});
      e.verified = j.value("verified", false);
      e.error = j.value("error", "");
      out.push_back(std::move(e));
    } catch (const json::exception&) {
      // a line cut by the rank's death: the events before it stand
    }
  }
  return out;
}

namespace {

// One step of one incarnation, over the ranks that did it.
struct StepTimes {
  double start = std::numeric_limits<double>::max(), mid = 0, end = 0, save_end = 0;
  int ranks = 0, saved = 0;
  double save_start = std::numeric_limits<double>::max();
};

}  // namespace

json figures(const std::vector<Event>& events, int ranks, int steps, double compute_s) {
  json f;
  f["ranks"] = ranks;
  f["steps"] = steps;
  f["compute_per_step_s"] = compute_s;
  // (incarnation, step) → the ranks' times
  std::map<std::pair<int, int>, StepTimes> by;
  std::map<int, double> inc_first, inc_last;  // an incarnation's first and last event
  std::map<int, int> inc_ends;                // ranks that ended it
  std::vector<double> restores;
  double first = std::numeric_limits<double>::max(), last = 0;
  bool verified = true;
  std::vector<std::string> errors;
  // saves and restores that failed: each a connection to the store that
  // did not do its work, and each save's step a failed step of the job
  int ckpt_failures = 0;
  std::set<int> failed_steps;
  json notes = json::array();
  for (const auto& e : events) {
    double t0 = e.start_s > 0 ? e.start_s : e.end_s;
    if (t0 > 0) {
      first = std::min(first, t0);
      auto [it, fresh] = inc_first.emplace(e.incarnation, t0);
      if (!fresh) it->second = std::min(it->second, t0);
    }
    inc_last[e.incarnation] = std::max(inc_last[e.incarnation], std::max(e.end_s, t0));
    if (!e.error.empty() && errors.size() < 5) errors.push_back(e.error);
    if (e.event == "step") {
      auto& s = by[{e.incarnation, e.step}];
      s.start = std::min(s.start, e.start_s);
      s.mid = std::max(s.mid, e.mid_s);
      s.end = std::max(s.end, e.end_s);
      ++s.ranks;
    } else if (e.event == "save") {
      auto& s = by[{e.incarnation, e.step}];
      s.save_start = std::min(s.save_start, e.start_s);
      s.save_end = std::max(s.save_end, e.end_s);
      if (e.verified) ++s.saved;
      verified = verified && e.verified;
      if (!e.verified) {
        ++ckpt_failures;
        failed_steps.insert(e.step);
        if (notes.size() < 5)
          notes.push_back(fmt::format("rank {}'s checkpoint of step {}: {}", e.rank, e.step,
                                      e.error.empty() ? "not acked" : e.error));
      }
    } else if (e.event == "restore") {
      if (e.step >= 0) {
        restores.push_back(e.end_s - e.start_s);
        verified = verified && e.verified;
      }
      if (!e.error.empty() || (e.step >= 0 && !e.verified)) {
        ++ckpt_failures;
        verified = false;
        if (notes.size() < 5)
          notes.push_back(fmt::format("rank {}'s restore (run {}): {}", e.rank, e.incarnation,
                                      e.error.empty() ? "the checkpoint read back wrong" : e.error));
      }
    } else if (e.event == "end") {
      ++inc_ends[e.incarnation];
      last = std::max(last, e.end_s);
      verified = verified && e.verified;
    }
  }
  int final_inc = inc_first.empty() ? 0 : inc_first.rbegin()->first;
  // a step whose checkpoint failed is a failed step: the job did not
  // complete, whatever its ranks did after it
  bool completed = !inc_first.empty() && inc_ends[final_inc] == ranks && failed_steps.empty();
  f["completed"] = completed;
  f["checkpoint_failures"] = ckpt_failures;
  f["failed_steps"] = failed_steps;
  f["incarnations"] = static_cast<int>(inc_first.size());
  f["failures"] = std::max(0, static_cast<int>(inc_first.size()) - 1);
  double jct = completed && first < last ? last - first : 0;
  f["jct_s"] = jct;
  // steps every rank did, each time; the job's step s is its last run.
  // Per run: its first step's start, and the end of its last checkpoint
  // every rank saved (what a failure of it kept)
  double origin = first < last ? first : 0;  // the timeline's 0: the job's start
  int done = 0;
  std::map<int, const StepTimes*> job;
  std::map<int, double> run_resumed, run_kept;
  json timeline = json::array();
  for (const auto& [key, s] : by) {
    if (s.ranks > 0) {
      auto [it, fresh] = run_resumed.emplace(key.first, s.start);
      if (!fresh) it->second = std::min(it->second, s.start);
    }
    if (s.saved >= ranks) run_kept[key.first] = std::max(run_kept[key.first], s.save_end);
    if (s.ranks < ranks) continue;
    ++done;
    job[key.second] = &s;
    json t = {{"incarnation", key.first}, {"step", key.second}, {"start_s", s.start - origin},
              {"compute_end_s", s.mid - origin}, {"end_s", s.end - origin}};
    if (s.saved > 0) t["save_end_s"] = s.save_end - origin;
    timeline.push_back(t);
  }
  f["steps_done"] = done;
  f["steps_lost"] = std::max(0, done - static_cast<int>(job.size()));
  double comm = 0, comp = 0, saves = 0;
  std::vector<double> step_s;
  for (const auto& [step, s] : job) {
    step_s.push_back(s->end - s->start);
    comp += s->mid - s->start;
    comm += s->end - s->mid;
  }
  int n_saves = 0;
  for (const auto& [key, s] : by)
    if (s.saved > 0) {
      saves += s.save_end - s.save_start;
      ++n_saves;
    }
  f["step_s"] = step_s;
  std::vector<double> sorted = step_s;
  std::sort(sorted.begin(), sorted.end());
  f["step_p50_s"] = sorted.empty() ? 0.0 : sorted[sorted.size() / 2];
  f["compute_s"] = comp;
  f["comm_s"] = comm;
  f["saves"] = n_saves;
  f["save_s"] = saves;
  f["save_mean_s"] = n_saves ? saves / n_saves : 0.0;
  double restore = 0;
  for (double r : restores) restore = std::max(restore, r);
  f["restore_s"] = restore;  // the slowest rank's restore, over every restart
  // each failed run: from its last event to the next run's first step
  // (recovery), and from its last whole checkpoint (its first step if
  // none) to its last event (the work thrown away)
  double recovery = 0, lost = 0;
  for (auto it = inc_first.begin(); it != inc_first.end() && std::next(it) != inc_first.end(); ++it) {
    int run = it->first, next = std::next(it)->first;
    if (run_resumed.count(next)) recovery += run_resumed[next] - inc_last[run];
    if (run_resumed.count(run)) {
      double kept = run_kept.count(run) ? run_kept[run] : run_resumed[run];
      lost += std::max(0.0, inc_last[run] - kept);
    }
  }
  f["recovery_s"] = recovery;
  f["lost_s"] = lost;
  f["wait_fraction"] = jct > 0 ? std::clamp(1.0 - static_cast<double>(steps) * compute_s / jct, 0.0, 1.0) : 0.0;
  f["bytes_verified"] = completed && verified && static_cast<int>(job.size()) == steps;
  if (!errors.empty()) f["errors"] = errors;
  if (!notes.empty()) f["verify_note"] = notes;
  else if (!f["bytes_verified"].get<bool>())
    f["verify_note"] = !errors.empty() ? json(errors)
                       : !completed    ? json(fmt::format("{} of {} ranks ended their last run", inc_ends[final_inc], ranks))
                                       : json(fmt::format("{} of {} steps done by every rank", job.size(), steps));
  uint64_t checked = 0;  // the last all-reduce's output and the restores, every rank
  for (const auto& e : events)
    if ((e.event == "end" || e.event == "restore") && e.verified) checked += e.bytes;
  f["verified_bytes"] = checked;
  f["timeline"] = timeline;
  return f;
}

std::vector<Progress> read_progress(const std::string& path) {
  std::vector<Progress> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] != '{') continue;
    try {
      auto j = json::parse(line);
      if (j.value("role", "") != "store-progress") continue;
      out.push_back({j.value("step", -1), j.value("complete_s", 0.0)});
    } catch (const json::exception&) {
    }
  }
  return out;
}

int held_at(double t, const std::vector<Progress>& held) {
  int best = -1;
  for (const auto& p : held)
    if (p.complete_s <= t) best = std::max(best, p.step);
  return best;
}

Staleness staleness_at(double t, const std::vector<Event>& events, const std::vector<Progress>& held, int ranks) {
  Staleness s;
  // the run going at T: the latest incarnation that started by then
  int run = 0;
  double job_start = std::numeric_limits<double>::max();
  for (const auto& e : events) {
    if (e.event == "start" && e.start_s <= t) run = std::max(run, e.incarnation);
    if (e.event == "start") job_start = std::min(job_start, e.start_s);
  }
  std::map<int, std::pair<int, double>> done;  // step → ranks that ended it by T, the last end
  std::map<int, double> ended;                 // step → when the job last ended it by T (any run)
  for (const auto& e : events) {
    if (e.event != "step" || e.end_s > t) continue;
    if (e.incarnation == run) {
      auto& d = done[e.step];
      ++d.first;
      d.second = std::max(d.second, e.end_s);
    }
  }
  for (const auto& [step, d] : done)
    if (d.first >= ranks) s.job_step = std::max(s.job_step, step);
  for (const auto& e : events)
    if (e.event == "step" && e.end_s <= t) ended[e.step] = std::max(ended[e.step], e.end_s);
  s.held_step = held_at(t, held);
  s.steps = std::max(0, s.job_step - s.held_step);
  if (s.held_step >= 0 && ended.count(s.held_step)) s.seconds = std::max(0.0, t - ended[s.held_step]);
  else s.seconds = job_start <= t ? t - job_start : 0.0;
  return s;
}

json spare_figures(const std::vector<Event>& events, const std::vector<Progress>& spare,
                   const std::vector<Progress>& storage, const std::vector<double>& failed_at_s, int ranks) {
  json f;
  int pushes = 0, failures = 0;
  double push_s = 0;
  for (const auto& e : events) {
    if (e.event != "spare") continue;
    if (e.verified) {
      ++pushes;
      push_s += e.end_s - e.start_s;
    } else {
      ++failures;
    }
  }
  f["spare_pushes"] = pushes;
  f["spare_push_failures"] = failures;
  f["spare_push_mean_s"] = pushes ? push_s / pushes : 0.0;
  // sampled at each step's end, every run's (by the last rank to end it)
  std::map<std::pair<int, int>, double> step_end;
  std::map<std::pair<int, int>, int> step_ranks;
  for (const auto& e : events)
    if (e.event == "step") {
      auto k = std::make_pair(e.incarnation, e.step);
      step_end[k] = std::max(step_end[k], e.end_s);
      ++step_ranks[k];
    }
  double lag_steps = 0, lag_s = 0;
  int lag_max = 0, samples = 0;
  for (const auto& [k, t] : step_end) {
    if (step_ranks[k] < ranks) continue;
    auto st = staleness_at(t, events, spare, ranks);
    lag_steps += st.steps;
    lag_s += st.seconds;
    lag_max = std::max(lag_max, st.steps);
    ++samples;
  }
  f["spare_lag_steps_mean"] = samples ? lag_steps / samples : 0.0;
  f["spare_lag_steps_max"] = lag_max;
  f["spare_lag_s_mean"] = samples ? lag_s / samples : 0.0;
  if (!failed_at_s.empty()) {
    auto sp = staleness_at(failed_at_s.front(), events, spare, ranks);
    auto so = staleness_at(failed_at_s.front(), events, storage, ranks);
    f["spare_staleness_steps"] = sp.steps;
    f["spare_staleness_s"] = sp.seconds;
    f["spare_held_step"] = sp.held_step;
    f["failed_at_step"] = sp.job_step;
    f["storage_staleness_steps"] = so.steps;
  }
  return f;
}

}  // namespace lanes::scenarios::training
