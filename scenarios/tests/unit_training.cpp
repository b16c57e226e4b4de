// The training job's pure parts: when it checkpoints, where it resumes, and
// its figures from the events its ranks print (a failure and a resume
// included).

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <unistd.h>

#include "lanes/scenarios/training.hpp"

using namespace lanes::scenarios::training;

TEST_CASE("a training job checkpoints after every K-th step, never with K = 0", "[unit]") {
  std::vector<int> due;
  for (int s = 0; s < 10; ++s)
    if (checkpoint_due(s, 3)) due.push_back(s);
  CHECK(due == std::vector<int>{2, 5, 8});
  for (int s = 0; s < 10; ++s) CHECK_FALSE(checkpoint_due(s, 0));
  CHECK(checkpoint_due(0, 1));
  CHECK_FALSE(checkpoint_due(-1, 1));
}

TEST_CASE("a job resumes after the latest checkpoint every rank saved whole", "[unit]") {
  CHECK(resume_step({}, 3) == 0);
  CHECK(resume_step({{2, {0, 1, 2}}}, 3) == 3);
  // step 5's checkpoint misses rank 2 (the job died while saving it): step 2's is the latest whole one
  CHECK(resume_step({{2, {0, 1, 2}}, {5, {0, 1}}}, 3) == 3);
  CHECK(resume_step({{2, {0, 1, 2}}, {5, {0, 1, 2}}}, 3) == 6);
  CHECK(resume_step({{5, {0, 1}}}, 3) == 0);
}

TEST_CASE("every rank's checkpoint of every step is a pattern flow of its own", "[unit]") {
  std::set<uint32_t> flows;
  for (int step = 0; step < 200; ++step)
    for (int rank = 0; rank < 64; ++rank) {
      uint32_t f = checkpoint_flow(step, rank);
      CHECK(flows.insert(f).second);
      CHECK(f >= 0x80000000u);  // apart from the transfers' flows 0, 1, 2, ...
    }
}

namespace {

Event ev(const char* kind, int rank, int inc, int step, double start, double mid, double end, bool verified = true) {
  Event e;
  e.event = kind;
  e.rank = rank;
  e.incarnation = inc;
  e.step = step;
  e.start_s = start;
  e.mid_s = mid;
  e.end_s = end;
  e.verified = verified;
  return e;
}

// Two ranks, 6 steps of 0.1 s compute and a 0.4 s all-reduce, a checkpoint
// (0.5 s) after steps 1 and 3. The first run does steps 0-4 and dies in
// step 5; the second restores step 3's checkpoint and does steps 4 and 5.
std::vector<Event> failed_and_resumed() {
  std::vector<Event> out;
  for (int r = 0; r < 2; ++r) out.push_back(ev("start", r, 0, 0, 100, 0, 0));
  double t = 100;
  for (int s = 0; s <= 4; ++s) {
    for (int r = 0; r < 2; ++r) out.push_back(ev("step", r, 0, s, t, t + 0.1, t + 0.5));
    t += 0.5;
    if (s == 1 || s == 3) {
      for (int r = 0; r < 2; ++r) out.push_back(ev("save", r, 0, s, t, 0, t + 0.5));
      t += 0.5;
    }
  }
  // step 5 begun by rank 0 only: killed (no end event)
  double died = t;  // 103.5: the last event of the first run ends here
  t += 2.0;         // the restart
  for (int r = 0; r < 2; ++r) {
    out.push_back(ev("restore", r, 1, 3, t, 0, t + 0.75));
    out.push_back(ev("start", r, 1, 4, t, 0, 0));
  }
  t += 0.75;
  for (int s = 4; s <= 5; ++s) {
    for (int r = 0; r < 2; ++r) out.push_back(ev("step", r, 1, s, t, t + 0.1, t + 0.5));
    t += 0.5;
    if (s == 5) {
      for (int r = 0; r < 2; ++r) out.push_back(ev("save", r, 1, s, t, 0, t + 0.5));
      t += 0.5;
    }
  }
  for (int r = 0; r < 2; ++r) out.push_back(ev("end", r, 1, 5, 0, 0, t));
  (void)died;
  return out;
}

}  // namespace

TEST_CASE("a training job's figures: completion time, steps lost, recovery and the GPUs' idle share", "[unit]") {
  auto f = figures(failed_and_resumed(), 2, 6, 0.1);
  CHECK(f["completed"] == true);
  CHECK(f["bytes_verified"] == true);
  CHECK(f["incarnations"] == 2);
  CHECK(f["failures"] == 1);
  // first run: 0-4 whole (4 done by both), second: 4 and 5 → 7 done, step 4 twice
  CHECK(f["steps_done"] == 7);
  CHECK(f["steps_lost"] == 1);
  // 100 → 103.5 (5 steps, 2 saves), 2 s restart, 0.75 s restore, 2 steps, 1 save: ends at 107.75
  CHECK(f["jct_s"].get<double>() == Approx(7.75));
  CHECK(f["restore_s"].get<double>() == Approx(0.75));
  // the last event of the first run (step 4 ended at 103.5) to the resumed step 4's start (106.25)
  CHECK(f["recovery_s"].get<double>() == Approx(2.75));
  // the first run's last whole checkpoint ended at 103.0 (after step 3); it ran on to 103.5
  CHECK(f["lost_s"].get<double>() == Approx(0.5));
  CHECK(f["saves"] == 3);
  CHECK(f["save_mean_s"].get<double>() == Approx(0.5));
  // the job's 6 steps as counted (4 and 5 from the second run): 0.1 compute, 0.4 all-reduce each
  CHECK(f["step_s"].size() == 6);
  CHECK(f["compute_s"].get<double>() == Approx(0.6));
  CHECK(f["comm_s"].get<double>() == Approx(2.4));
  CHECK(f["wait_fraction"].get<double>() == Approx(1 - 0.6 / 7.75));
  // the timeline: every step of every run, from the job's start
  REQUIRE(f["timeline"].size() == 7);
  CHECK(f["timeline"][0]["start_s"].get<double>() == Approx(0));
  CHECK(f["timeline"][1]["save_end_s"].get<double>() == Approx(1.5));
  CHECK(f["timeline"][5]["incarnation"] == 1);
}

TEST_CASE("a job whose ranks did not all end is not complete and has no completion time", "[unit]") {
  auto events = failed_and_resumed();
  events.pop_back();  // rank 1 never said end
  auto f = figures(events, 2, 6, 0.1);
  CHECK(f["completed"] == false);
  CHECK(f["bytes_verified"] == false);
  CHECK(f["jct_s"].get<double>() == 0);
  // a failed checkpoint save makes the job unverified
  events = failed_and_resumed();
  for (auto& e : events)
    if (e.event == "save" && e.step == 5 && e.rank == 1) e.verified = false;
  CHECK(figures(events, 2, 6, 0.1)["bytes_verified"] == false);
}

TEST_CASE("a checkpoint that fails is a failed step: counted, named with its reason, and the job not complete", "[unit]") {
  // an IPv6-only job whose store was dialled over IPv4: every save failed
  // at connect, the ranks went on and ended their ring
  auto events = failed_and_resumed();
  for (auto& e : events)
    if (e.event == "save" && e.incarnation == 1) {
      e.verified = false;
      e.error = "connecting to the store: Network is unreachable";
    }
  auto f = figures(events, 2, 6, 0.1);
  CHECK(f["checkpoint_failures"] == 2);
  CHECK(f["failed_steps"] == nlohmann::json::array({5}));
  CHECK(f["completed"] == false);
  CHECK(f["jct_s"].get<double>() == 0);
  CHECK(f["bytes_verified"] == false);
  REQUIRE(f["verify_note"].size() == 2);
  CHECK(f["verify_note"][0] == "rank 0's checkpoint of step 5: connecting to the store: Network is unreachable");
  // a restore that could not reach the store is one too
  events = failed_and_resumed();
  for (auto& e : events)
    if (e.event == "restore" && e.rank == 1) {
      e.step = -1;
      e.verified = false;
      e.error = "connecting to the store: Connection refused";
    }
  f = figures(events, 2, 6, 0.1);
  CHECK(f["checkpoint_failures"] == 1);
  CHECK(f["verify_note"][0] == "rank 1's restore (run 1): connecting to the store: Connection refused");
  // and a job with none has none
  CHECK(figures(failed_and_resumed(), 2, 6, 0.1)["checkpoint_failures"] == 0);
}

TEST_CASE("a rank's event lines are read back, a line cut by its death skipped", "[unit]") {
  auto p = std::filesystem::temp_directory_path() / ("lanes-unit-training-" + std::to_string(::getpid()));
  {
    std::ofstream out(p);
    out << to_json_line(ev("start", 1, 0, 0, 5, 0, 0)).dump() << "\n";
    out << to_json_line(ev("step", 1, 0, 0, 5, 5.1, 5.5)).dump() << "\n";
    out << "{\"role\":\"training\",\"event\":\"st";  // killed mid-line
  }
  auto e = read_events(p.string());
  std::filesystem::remove(p);
  REQUIRE(e.size() == 2);
  CHECK(e[1].event == "step");
  CHECK(e[1].rank == 1);
  CHECK(e[1].mid_s == Approx(5.1));
}


namespace {

// two ranks; step s of run 0 ends at 10 + s (each rank), a step's checkpoint
// saved 0.2 s after it and pushed to the spare from 0.3 s after it
std::vector<Event> spare_timeline(int steps, double push_s) {
  std::vector<Event> ev;
  for (int r = 0; r < 2; ++r) {
    Event start{"start", r, 0, 0};
    start.start_s = 9.0;
    ev.push_back(start);
    for (int s = 0; s < steps; ++s) {
      Event e{"step", r, 0, s};
      e.start_s = 9.0 + s;
      e.mid_s = e.start_s + 0.5;
      e.end_s = 10.0 + s;
      ev.push_back(e);
      Event p{"spare", r, 0, s};
      p.start_s = e.end_s + 0.3;
      p.end_s = p.start_s + push_s;
      p.verified = true;
      ev.push_back(p);
    }
  }
  return ev;
}

}  // namespace

TEST_CASE("hot spare: how many steps and seconds its state is behind the job, on a fake timeline", "[unit]") {
  auto ev = spare_timeline(6, 0.5);
  // the spare holds a step once both ranks' pushes landed: 0.8 s after its end
  std::vector<Progress> spare, storage;
  for (int s = 0; s < 6; ++s) {
    spare.push_back({s, 10.0 + s + 0.8});
    storage.push_back({s, 10.0 + s + 0.2});
  }
  // at 13.5: the job ended step 3 (at 13.0); the spare holds step 2 (whole at 12.8), ended by the job at 12.0
  auto st = staleness_at(13.5, ev, spare, 2);
  CHECK(st.job_step == 3);
  CHECK(st.held_step == 2);
  CHECK(st.steps == 1);
  CHECK(st.seconds == Approx(1.5));
  // the storage server holds step 3 by then (13.2)
  CHECK(staleness_at(13.5, ev, storage, 2).steps == 0);
  // nothing held: behind by every step done, and as old as the job
  auto none = staleness_at(11.5, ev, {}, 2);
  CHECK(none.held_step == -1);
  CHECK(none.steps == 2);  // steps 0 and 1 done
  CHECK(none.seconds == Approx(2.5));
  CHECK(held_at(12.79, spare) == 1);
  CHECK(held_at(12.8, spare) == 2);
  // a spare whose pushes take longer than a step falls further behind
  auto f = spare_figures(ev, spare, storage, {13.5}, 2);
  CHECK(f["spare_staleness_steps"].get<int>() == 1);
  CHECK(f["storage_staleness_steps"].get<int>() == 0);
  CHECK(f["spare_pushes"].get<int>() == 12);
  CHECK(f["spare_push_mean_s"].get<double>() == Approx(0.5));
  // sampled at each step's end (10, 11, ... 15): the spare holds the one before, or nothing at the first
  CHECK(f["spare_lag_steps_mean"].get<double>() == Approx(1.0));
  CHECK(f["spare_lag_steps_max"].get<int>() == 1);
  std::vector<Progress> slow;
  for (int s = 0; s < 6; s += 3) slow.push_back({s, 10.0 + s + 2.5});  // every third step, 2.5 s late
  auto g = spare_figures(ev, slow, storage, {14.2}, 2);
  CHECK(g["spare_held_step"].get<int>() == 0);
  CHECK(g["failed_at_step"].get<int>() == 4);
  CHECK(g["spare_staleness_steps"].get<int>() == 4);
  CHECK(g["spare_staleness_s"].get<double>() == Approx(4.2));
}

TEST_CASE("hot spare: a store's progress lines are read back, other lines skipped", "[unit]") {
  auto path = std::filesystem::temp_directory_path() / ("lanes-progress-" + std::to_string(::getpid()));
  {
    std::ofstream o(path);
    o << R"({"role":"store-progress","step":1,"complete_s":12.5})" << "\n"
      << "not json\n"
      << R"({"role":"store","puts":4})" << "\n"
      << R"({"role":"store-progress","step":3,"complete_s":14.)";  // cut by a kill
  }
  auto p = read_progress(path.string());
  std::filesystem::remove(path);
  REQUIRE(p.size() == 1);
  CHECK(p[0].step == 1);
  CHECK(p[0].complete_s == 12.5);
}
