#pragma once
// The `lanes` command line. main() makes the node roles, registers the
// scenario commands and calls run_cli with them.

#include <boost/program_options.hpp>
#include <iosfwd>
#include <stdexcept>
#include <string>
#include <vector>

#include "lanes/testbed/role.hpp"

namespace lanes::cli {

using testbed::Roles;

// Exit codes: 0 ok, 1 failure, 2 bad input (topology, scenario, arguments).
constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitBadInput = 2;
// lanes run: nothing failed, but a scenario was not run on this machine (it says why)
constexpr int kExitNotRun = 3;

// What the composition root gives every command: the node roles a run is
// made of, in deploy order.
struct CliContext {
  Roles roles;
};

int run_cli(const CliContext& cli, int argc, char** argv, std::ostream& out, std::ostream& err);

using CommandFn = int (*)(const CliContext& cli, const std::vector<std::string>& args, std::ostream& out,
                          std::ostream& err);
// Adds a command to `lanes --help` and the dispatcher (call before run_cli).
void register_command(const char* name, const char* args, const char* summary, CommandFn fn);

// `lanes validate` of a file whose root element is ROOT (e.g. "scenario"):
// returns a one-line summary or throws InputError. Modules testbed cannot
// depend on register theirs; topologies are testbed's own.
using ValidatorFn = std::string (*)(const std::string& path);
void register_validator(const char* root, ValidatorFn fn);

// A usage problem on the command line: printed with the command's usage, exit 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Parses a command's ARGS the way every lanes command does: --help prints
// usage, summary, DETAILS and the options and returns false; a bad
// argument throws UsageError.
bool parse_command_line(const std::vector<std::string>& args, const std::string& name, const std::string& usage_args,
                        const std::string& summary, boost::program_options::options_description& desc,
                        const boost::program_options::positional_options_description& pos,
                        boost::program_options::variables_map& vm, std::ostream& out, const char* details = nullptr);

// true when running as root; otherwise says what WHAT needs and returns false.
bool have_privileges(std::ostream& err, const char* what);

}  // namespace lanes::cli
