#pragma once
// SIGINT/SIGTERM during a long operation (bring-up, a scenario) set a flag
// that the operation polls, so it can stop and clean up instead of dying
// with half its objects built.

namespace lanes::testbed {

void install_interrupt_handlers();
bool interrupted();

}  // namespace lanes::testbed
