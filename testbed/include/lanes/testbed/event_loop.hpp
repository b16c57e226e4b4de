#pragma once
// The one event loop of lanes' daemons (supervisor, FIB agent, host agent,
// VIP injector): epoll over file descriptors, one-shot timers, process exits
// through pidfds, and SIGTERM/SIGINT through a signalfd, all on the calling
// thread. A daemon registers what it waits for and runs the loop; nothing
// polls.

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>

#include "lanes/testbed/handle.hpp"
#include "lanes/testbed/result.hpp"

namespace lanes::testbed {

class EventLoop {
 public:
  using Clock = std::chrono::steady_clock;
  using TimerId = uint64_t;

  EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;
  bool ok() const { return static_cast<bool>(ep_); }

  // FN(events) whenever FD is ready for EVENTS (EPOLLIN, EPOLLOUT, ...).
  Status watch(int fd, uint32_t events, std::function<void(uint32_t)> fn);
  Status rewatch(int fd, uint32_t events);
  void unwatch(int fd);

  // FN once, when process PID has exited (it is not reaped here).
  Status on_exit(pid_t pid, std::function<void()> fn);

  // The signals (SIGTERM and SIGINT by default) stop the loop. Blocks them
  // in the calling thread, so call this before any other thread starts.
  Status stop_on_signals(std::initializer_list<int> signals = {SIGTERM, SIGINT});

  // FN once at T (or as soon after as the loop gets to it).
  TimerId at(Clock::time_point t, std::function<void()> fn);
  void cancel(TimerId id);

  // Runs until stop(). After each wake TURN runs (if given) and returns the
  // latest time the loop should wake again for it (nullopt: no need).
  void run(const std::function<std::optional<Clock::time_point>()>& turn = nullptr);
  // One wake: waits at most MAX for events or a timer and handles them.
  void run_once(std::chrono::milliseconds max);
  void stop() { stopped_ = true; }
  bool stopped() const { return stopped_; }

 private:
  void dispatch_timers(Clock::time_point now);
  void wait_and_dispatch(std::optional<Clock::time_point> wake);

  Fd ep_;
  Fd signal_fd_;
  std::map<int, std::function<void(uint32_t)>> fds_;
  std::map<int, Fd> exit_fds_;  // pidfds the loop owns
  std::multimap<Clock::time_point, std::pair<TimerId, std::function<void()>>> timers_;
  TimerId next_timer_ = 1;
  bool stopped_ = false;
};

}  // namespace lanes::testbed
