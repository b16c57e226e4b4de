#pragma once
// `lanes run`, `lanes scenarios`, `lanes report` and `lanes compare`,
// registered with the command line by the lanes executable.

namespace lanes::cli {

void register_scenario_commands();

}  // namespace lanes::cli
