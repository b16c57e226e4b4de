#pragma once
// SIGINT/SIGTERM during a long operation (bring-up, a scenario) set a flag
// that the operation polls, so it can stop and clean up instead of dying
// with half its objects built.

#include <chrono>

namespace lanes::testbed {

void install_interrupt_handlers();
// a signal came, or the deadline set below passed
bool interrupted();
// From WHEN on, interrupted() is true as after a signal: a long operation
// stops at its next look and cleans up (lanes run --deadline).
void interrupt_at(std::chrono::steady_clock::time_point when);
// the deadline set, and passed: it, not a signal, interrupted
bool deadline_passed();
// a signal came (SIGINT, SIGTERM, SIGHUP)
bool signalled();

}  // namespace lanes::testbed
