#pragma once
// `lanes run`, `lanes scenarios`, `lanes report` and `lanes compare`,
// registered with the testbed's command line by the lanes executable.

namespace lanes::scenarios {

void register_commands();

}  // namespace lanes::scenarios
