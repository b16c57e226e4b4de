#include "lanes/testbed/interrupt.hpp"

#include <signal.h>

#include <atomic>

namespace lanes::testbed {
namespace {
std::atomic<bool> g_interrupted{false};
// steady_clock ticks; 0: none
std::atomic<std::chrono::steady_clock::rep> g_deadline{0};
extern "C" void on_signal(int) { g_interrupted.store(true); }
}  // namespace

void install_interrupt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGHUP, &sa, nullptr);
}

bool deadline_passed() {
  auto d = g_deadline.load();
  return d != 0 && std::chrono::steady_clock::now().time_since_epoch().count() >= d;
}

bool signalled() { return g_interrupted.load(); }

bool interrupted() { return signalled() || deadline_passed(); }

void interrupt_at(std::chrono::steady_clock::time_point when) { g_deadline.store(when.time_since_epoch().count()); }

}  // namespace lanes::testbed
