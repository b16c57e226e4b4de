#include "lanes/core/interrupt.hpp"

#include <signal.h>

#include <atomic>

namespace lanes::testbed {
namespace {
std::atomic<bool> g_interrupted{false};
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

bool interrupted() { return g_interrupted.load(); }

}  // namespace lanes::testbed
