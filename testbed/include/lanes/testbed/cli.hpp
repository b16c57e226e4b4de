#pragma once
// The `lanes` command line. main() only calls run_cli.

#include <iosfwd>

namespace lanes::testbed {

// Exit codes: 0 ok, 1 failure, 2 bad input (topology, scenario, arguments).
int run_cli(int argc, char** argv, std::ostream& out, std::ostream& err);

}  // namespace lanes::testbed
