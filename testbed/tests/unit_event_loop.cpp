// unit tier: the daemons' event loop — fds, timers, a child's exit, a stop
// signal — driven for real, with no clock assumptions beyond ordering.

#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "lanes/testbed/event_loop.hpp"

using namespace lanes::testbed;
using Clock = EventLoop::Clock;

TEST_CASE("event loop: timers run in order, a cancelled one never", "[unit]") {
  EventLoop loop;
  REQUIRE(loop.ok());
  std::vector<int> order;
  auto now = Clock::now();
  loop.at(now + std::chrono::milliseconds(30), [&] {
    order.push_back(3);
    loop.stop();
  });
  loop.at(now + std::chrono::milliseconds(10), [&] { order.push_back(1); });
  auto gone = loop.at(now + std::chrono::milliseconds(20), [&] { order.push_back(99); });
  loop.at(now + std::chrono::milliseconds(20), [&] { order.push_back(2); });
  loop.cancel(gone);
  loop.run();
  CHECK(order == std::vector<int>{1, 2, 3});
}

TEST_CASE("event loop: a ready fd calls its handler, an unwatched one does not", "[unit]") {
  EventLoop loop;
  Fd a(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)), b(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  int calls_a = 0, calls_b = 0, turns = 0;
  REQUIRE(loop.watch(a.get(), EPOLLIN, [&](uint32_t ev) {
    CHECK((ev & EPOLLIN) != 0);
    uint64_t v;
    (void)!::read(a.get(), &v, sizeof v);
    ++calls_a;
    loop.stop();
  }).ok());
  REQUIRE(loop.watch(b.get(), EPOLLIN, [&](uint32_t) { ++calls_b; }).ok());
  loop.unwatch(b.get());
  uint64_t one = 1;
  (void)!::write(b.get(), &one, sizeof one);
  (void)!::write(a.get(), &one, sizeof one);
  loop.run([&] {
    ++turns;
    return std::optional<Clock::time_point>();  // nothing of its own to wait for
  });
  CHECK(calls_a == 1);
  CHECK(calls_b == 0);
  CHECK(turns >= 1);
}

TEST_CASE("event loop: a child's exit is seen through its pidfd", "[unit]") {
  EventLoop loop;
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) ::_exit(7);
  bool exited = false;
  REQUIRE(loop.on_exit(pid, [&] {
    exited = true;
    loop.stop();
  }).ok());
  loop.run();
  CHECK(exited);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WEXITSTATUS(status) == 7);
}

TEST_CASE("event loop: a stop signal ends it through its signalfd", "[unit]") {
  // on a thread of its own, so the test process's other threads keep their mask
  bool stopped = false;
  std::thread t([&] {
    EventLoop loop;
    REQUIRE(loop.stop_on_signals({SIGUSR2}).ok());
    loop.at(Clock::now(), [] { ::raise(SIGUSR2); });  // raise() targets this thread
    loop.run();
    stopped = loop.stopped();
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR2);
    ::pthread_sigmask(SIG_UNBLOCK, &s, nullptr);
  });
  t.join();
  CHECK(stopped);
}
