#include "lanes/testbed/event_loop.hpp"

#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <ctime>
#include <vector>

namespace lanes::testbed {

EventLoop::EventLoop() : ep_(::epoll_create1(EPOLL_CLOEXEC)) {}

Status EventLoop::watch(int fd, uint32_t events, std::function<void(uint32_t)> fn) {
  epoll_event e{};
  e.events = events;
  e.data.fd = fd;
  bool known = fds_.count(fd) > 0;
  if (::epoll_ctl(ep_.get(), known ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &e) != 0)
    return errno_error("watching fd " + std::to_string(fd));
  fds_[fd] = std::move(fn);
  return {};
}

Status EventLoop::rewatch(int fd, uint32_t events) {
  epoll_event e{};
  e.events = events;
  e.data.fd = fd;
  if (::epoll_ctl(ep_.get(), EPOLL_CTL_MOD, fd, &e) != 0) return errno_error("watching fd " + std::to_string(fd));
  return {};
}

void EventLoop::unwatch(int fd) {
  if (fds_.erase(fd)) ::epoll_ctl(ep_.get(), EPOLL_CTL_DEL, fd, nullptr);
  exit_fds_.erase(fd);
}

Status EventLoop::on_exit(pid_t pid, std::function<void()> fn) {
  Fd pfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (!pfd) return errno_error("watching pid " + std::to_string(pid));
  int fd = pfd.get();
  auto st = watch(fd, EPOLLIN, [this, fd, fn = std::move(fn)](uint32_t) {
    unwatch(fd);  // closes the pidfd; FN is a copy held by this call
    fn();
  });
  if (!st) return st;
  exit_fds_.emplace(fd, std::move(pfd));
  return {};
}

Status EventLoop::stop_on_signals(std::initializer_list<int> signals) {
  sigset_t set;
  sigemptyset(&set);
  for (int s : signals) sigaddset(&set, s);
  if (::pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) return errno_error("blocking the stop signals");
  signal_fd_ = Fd(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!signal_fd_) return errno_error("signalfd");
  return watch(signal_fd_.get(), EPOLLIN, [this](uint32_t) {
    signalfd_siginfo si;
    while (::read(signal_fd_.get(), &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
    }
    stop();
  });
}

EventLoop::TimerId EventLoop::at(Clock::time_point t, std::function<void()> fn) {
  TimerId id = next_timer_++;
  timers_.emplace(t, std::make_pair(id, std::move(fn)));
  return id;
}

void EventLoop::cancel(TimerId id) {
  for (auto it = timers_.begin(); it != timers_.end(); ++it)
    if (it->second.first == id) {
      timers_.erase(it);
      return;
    }
}

void EventLoop::dispatch_timers(Clock::time_point now) {
  while (!timers_.empty() && timers_.begin()->first <= now) {
    auto fn = std::move(timers_.begin()->second.second);
    timers_.erase(timers_.begin());
    fn();
  }
}

void EventLoop::wait_and_dispatch(std::optional<Clock::time_point> wake) {
  if (!timers_.empty()) wake = wake ? std::min(*wake, timers_.begin()->first) : timers_.begin()->first;
  epoll_event evs[32];
  int n = 0;
  // to the nanosecond where the kernel has epoll_pwait2 (5.11): a timer of
  // 100 µs (a replayed GPU kernel) must not wait a whole millisecond
  static std::atomic<bool> no_pwait2{false};
  if (wake && !no_pwait2) {
    auto ns = std::clamp<int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(*wake - Clock::now()).count(), 0,
                                  int64_t{24} * 3600 * 1'000'000'000);
    timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    n = ::epoll_pwait2(ep_.get(), evs, 32, &ts, nullptr);
    if (n < 0 && errno == ENOSYS) no_pwait2 = true;
  }
  if (!wake || no_pwait2) {
    int timeout = -1;
    if (wake) {
      auto ms = std::chrono::ceil<std::chrono::milliseconds>(*wake - Clock::now()).count();
      timeout = static_cast<int>(std::clamp<int64_t>(ms, 0, 24 * 3600 * 1000));
    }
    n = ::epoll_wait(ep_.get(), evs, 32, timeout);
  }
  for (int i = 0; i < n && !stopped_; ++i) {
    auto it = fds_.find(evs[i].data.fd);
    if (it == fds_.end()) continue;  // unwatched by an earlier handler of this wake
    auto fn = it->second;            // a handler may unwatch its own fd
    fn(evs[i].events);
  }
  dispatch_timers(Clock::now());
}

void EventLoop::run_once(std::chrono::milliseconds max) {
  if (!stopped_) wait_and_dispatch(Clock::now() + max);
}

void EventLoop::run(const std::function<std::optional<Clock::time_point>()>& turn) {
  while (!stopped_) {
    std::optional<Clock::time_point> wake = turn ? turn() : std::nullopt;
    if (stopped_) break;
    wait_and_dispatch(wake);
  }
}

}  // namespace lanes::testbed
