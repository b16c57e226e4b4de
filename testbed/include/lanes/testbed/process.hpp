#pragma once
// Process supervision (Boost.Process): start a program inside a node's
// network namespace (setns in the child before exec), log its output to a
// file in the run directory, notice when it exits, stop it with SIGTERM
// then SIGKILL.

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lanes/testbed/result.hpp"

namespace lanes::testbed {

struct ProcessSpec {
  std::string name;                 // for messages: "gobgpd on r1-tor"
  std::vector<std::string> argv;    // argv[0] is looked up in PATH if it has no '/'
  int netns_fd = -1;                // -1: stay in lanes' namespace
  std::string log_path;             // stdout and stderr are appended here; "" = inherit stdio
  std::vector<std::pair<std::string, std::string>> env;  // added to lanes' environment
  bool new_session = true;          // setsid(), so a terminal's ^C reaches lanes only
  bool die_with_parent = false;     // SIGTERM when the starting thread's process dies (PR_SET_PDEATHSIG)
  bool hold_sigusr1 = false;        // starts with SIGUSR1 blocked, so a go signal sent at any moment waits
                                    // for the program (lanes-traffic fetch --wait-go)
};

class Daemon {
 public:
  Daemon();
  ~Daemon();  // stops a still-running, attached daemon
  Daemon(Daemon&&) noexcept;
  Daemon& operator=(Daemon&&) noexcept;

  static Result<Daemon> start(const ProcessSpec& spec);
  // SIG to it while it runs: to its whole process group when it leads a
  // session of its own (ProcessSpec::new_session), so what it started ends too
  void signal(int sig);

  pid_t pid() const;
  const std::string& name() const;
  // false once the process has exited (reaps it).
  bool running();
  // Exit status once exited: the exit code, or 128 + signal number.
  std::optional<int> exit_status();
  // Blocks until the process exits; returns its exit status.
  int wait();
  // Waits until the process has exited (true; reaped) or DEADLINE passes
  // (false), asleep on its pidfd, not on a clock.
  bool wait_until(std::chrono::steady_clock::time_point deadline);
  // SIGTERM, wait up to GRACE, then SIGKILL. Returns the exit status.
  Result<int> stop(std::chrono::milliseconds grace = std::chrono::milliseconds(3000));
  // Leaves the process running when this object goes (lanes up).
  void detach();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct Captured {
  int status = -1;  // exit status, or 128 + signal; 124 when the timeout killed it
  std::string out;  // stdout (stderr goes to the spec's log, or is dropped)
};

// Runs SPEC to completion and returns its stdout; kills it after TIMEOUT.
Result<Captured> run_capture(const ProcessSpec& spec, std::chrono::milliseconds timeout);

// Stops DAEMONS together: SIGTERM to each, GRACE for them all, then
// SIGKILL to what is left (a thousand daemons stop in one grace period,
// not one after another).
void stop_all(const std::vector<Daemon*>& daemons, std::chrono::milliseconds grace);

// SIGKILL to PID, to its process group when it leads one (a daemon lanes
// started: nothing of it lives on); false when PID does not run.
bool kill_process_group(pid_t pid);

// Every process id in /proc right now.
std::vector<pid_t> list_pids();
// The directory of the running executable (lanes' other programs live beside it).
std::string self_dir();

// Stops a process lanes started earlier (not necessarily its child), by pid,
// only if its start time (never 0) still matches: SIGTERM, wait up to GRACE,
// SIGKILL. Returns true if the process was running. The caller proves what
// the process is (its namespace, its command line) before calling.
bool stop_pid(pid_t pid, uint64_t start_time, std::chrono::milliseconds grace);

}  // namespace lanes::testbed
