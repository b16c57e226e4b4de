#pragma once
// The lanes command line's own parts, shared by the command files
// (cmd_*.cpp, one per command) and the dispatcher (cli.cpp).

#include <boost/program_options.hpp>
#include <chrono>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "lanes/cli/cli.hpp"
#include "lanes/testbed/model.hpp"
#include "lanes/testbed/run_registry.hpp"

namespace lanes::cli::commands {

using namespace lanes::testbed;

struct Command {
  const char* name;
  const char* args;
  const char* summary;
  CommandFn fn;
};

// The built-in command named NAME (for its usage line and summary).
const Command& cmd_named(const char* name);
// parse_command_line with CMD's usage line and summary.
bool parse(const std::vector<std::string>& args, const Command& cmd, boost::program_options::options_description& desc,
           const boost::program_options::positional_options_description& pos,
           boost::program_options::variables_map& vm, std::ostream& out, const char* details = nullptr);

// "lanes NAME ARGS"
std::string usage_line(const Command& c);
std::string fmt_ms(std::chrono::microseconds us);
std::string read_file(const std::string& path);
// The topology of run RUN as it was loaded (with its scenario phase's
// overrides), from the run's directory. Throws as load_topology does.
Topology load_run_topology(const RunRegistry& reg, const std::string& run);
// "topology 'NAME': 1 rack, 0 spines, 2 hosts (8 NICs), 1 server, 9 links"
std::string summary_of(const Topology& t);
// root element → the validator other modules registered for it
std::map<std::string, ValidatorFn>& validators();

int cmd_validate([[maybe_unused]] const CliContext& cli, const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int cmd_graph([[maybe_unused]] const CliContext& cli, const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int cmd_up([[maybe_unused]] const CliContext& cli, const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int cmd_status([[maybe_unused]] const CliContext& cli, const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int cmd_exec([[maybe_unused]] const CliContext& cli, const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int cmd_down([[maybe_unused]] const CliContext& cli, const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int cmd_clean([[maybe_unused]] const CliContext& cli, const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int cmd_switch_config([[maybe_unused]] const CliContext& cli, const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int cmd_features([[maybe_unused]] const CliContext& cli, const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int cmd_supervise([[maybe_unused]] const CliContext& cli, const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int cmd_keep_world([[maybe_unused]] const CliContext& cli, const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace lanes::cli::commands
