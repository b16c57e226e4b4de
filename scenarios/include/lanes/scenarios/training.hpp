#pragma once
// A training job as lanes runs it (the training workload): each of its
// ranks, one per host, repeats a step — compute (a pause: the GPU's work),
// then a ring all-reduce of the gradient with the other ranks — and after
// every K-th step saves its checkpoint to a storage server. When the job
// fails (fault job-fail: every rank killed), it is started again: each rank
// restores the latest checkpoint every rank saved whole, and the job
// resumes at the step after it; the steps since are done again (lost).
//
// Pure: lanes-traffic's training and store modes run it, the workload
// computes the figures from the events the ranks print, the unit tests
// check both.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace lanes::scenarios::training {

// A checkpoint is saved after step S (from 0) when S+1 is a multiple of EVERY (0: never).
bool checkpoint_due(int step, int every);
// The step a job resumes at: the one after the latest checkpoint that all
// RANKS saved whole (SAVED: step → the ranks that saved it); 0 if none.
int resume_step(const std::map<int, std::set<int>>& saved, int ranks);
// The pattern flow of rank RANK's checkpoint after step STEP.
uint32_t checkpoint_flow(int step, int rank);

// What a rank prints, one JSON line per event, flushed as it happens (a
// killed rank leaves the events up to its death). Times are the monotonic
// clock, shared by every namespace of the machine.
//   start:   the rank (incarnation I) began; it resumes at STEP
//   restore: it read the checkpoint of STEP (-1: none saved) from START_S to END_S, VERIFIED
//   step:    step STEP: compute from START_S to MID_S, the all-reduce until END_S
//   save:    its checkpoint after STEP, from START_S until the store's ack at END_S
//   end:     every step done; the last all-reduce's output VERIFIED
//   spare:   its checkpoint of STEP pushed to the hot spare from START_S until the spare's ack at END_S
struct Event {
  std::string event;
  int rank = 0, incarnation = 0, step = -1;
  double start_s = 0, mid_s = 0, end_s = 0;
  uint64_t bytes = 0;
  bool verified = false;
  std::string error;
};
nlohmann::json to_json_line(const Event& e);
// The events of a rank's output (lines that are not events are skipped).
std::vector<Event> read_events(const std::string& path);

// The job's figures from every rank's events of every incarnation:
//   jct_s                 first start to the last rank's end (the job's completion time)
//   steps, steps_done     asked, and done by every rank (a lost step counts each time)
//   steps_lost            done again after a failure
//   step_s                per step of the job as it counted (the final run of each), start to the last rank's end
//   compute_s, comm_s     sums over those steps: the pauses, and the all-reduces (the last rank's end)
//   save_s, restore_s     checkpoint saves (every one, the slowest rank's) and restores
//   recovery_s            from the last event before each failure to the first step after it
//   lost_s                the work each failure threw away: its run's last whole checkpoint to its last event
//   verified_bytes        checked by the ranks: the last all-reduce's output and the restores
//   wait_fraction         1 - steps · compute / JCT: the share of the job the GPUs idled
//   completed             every rank ended and no checkpoint failed; verified: and every output, save and
//                         restore checked
//   checkpoint_failures   saves and restores that failed (each a connection to the store that did not do its work)
//   failed_steps          the steps whose checkpoint a rank failed to save
//   verify_note           when not verified: which rank's transfer failed and why
//   timeline              per step of each incarnation: start, compute end, all-reduce end, save end
nlohmann::json figures(const std::vector<Event>& events, int ranks, int steps, double compute_s);

// A store's record as it happened: each step the moment every rank had saved it whole there.
struct Progress {
  int step = -1;
  double complete_s = 0;
};
std::vector<Progress> read_progress(const std::string& path);

// How far a store's state (HELD: a hot spare's, or the storage server's) is
// behind the job at time T: the job's latest step every rank of the run
// going at T ended by T, the latest step whole in the store by T, the steps
// between (a store that holds nothing is behind by every step done, plus
// one), and the age of what it holds: T minus when the job ended that step
// (T minus the job's start when it holds nothing).
struct Staleness {
  int job_step = -1, held_step = -1, steps = 0;
  double seconds = 0;
};
Staleness staleness_at(double t, const std::vector<Event>& events, const std::vector<Progress>& held, int ranks);
// The latest step whole in HELD by T (-1: none).
int held_at(double t, const std::vector<Progress>& held);

// The hot spare's figures: its pushes (acked, failed, mean time), its
// staleness at each step's end of the job (mean and max, steps and
// seconds), and at each failure (FAILED_AT_S) against the storage
// server's (STORAGE).
//   spare_pushes, spare_push_failures, spare_push_mean_s
//   spare_lag_steps_mean, spare_lag_steps_max, spare_lag_s_mean
//   spare_staleness_steps, spare_staleness_s     at the first failure
//   storage_staleness_steps                      the storage server's then
nlohmann::json spare_figures(const std::vector<Event>& events, const std::vector<Progress>& spare,
                             const std::vector<Progress>& storage, const std::vector<double>& failed_at_s, int ranks);

}  // namespace lanes::scenarios::training
