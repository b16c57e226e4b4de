// `lanes supervise`.

#include "commands.hpp"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <iostream>

#include "lanes/testbed/process.hpp"
#include "lanes/testbed/rootless.hpp"
#include "lanes/testbed/run_registry.hpp"
#include "lanes/testbed/supervisor.hpp"

namespace po = boost::program_options;

namespace lanes::cli::commands {

int cmd_supervise([[maybe_unused]] const CliContext& cli, const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  po::options_description desc("options");
  std::string run, state_dir = RunRegistry::default_base(), owner;
  desc.add_options()("run", po::value(&run)->required(), "run id")(
      "state-dir", po::value(&state_dir), "the run's state dir")(
      "owner", po::value(&owner), "PID:START_TIME of the lanes process the run belongs to while it is held");
  po::positional_options_description pos;
  pos.add("run", 1);
  po::variables_map vm;
  if (!parse(args, cmd_named("supervise"), desc, pos, vm, out,
             "Internal: started by 'lanes up'. Runs gobgpd and the FIB agent on every switch of RUN,\n"
             "restarts them when they exit and records it in the run's events.jsonl."))
    return kExitOk;
  if (!RunRegistry::valid_id(run)) throw UsageError(fmt::format("'{}' is not a run id", run));
  SupervisorOwner o;
  if (!owner.empty()) {
    auto colon = owner.find(':');
    try {
      if (colon == std::string::npos) throw std::invalid_argument(owner);
      o.pid = static_cast<pid_t>(std::stol(owner.substr(0, colon)));
      o.start_time = std::stoull(owner.substr(colon + 1));
    } catch (const std::exception&) {
      throw UsageError(fmt::format("--owner {}: expected PID:START_TIME", owner));
    }
  }
  return run_supervisor(RunRegistry(state_dir), run, o);
}

}  // namespace lanes::cli::commands

namespace lanes::cli::commands {

int cmd_keep_world([[maybe_unused]] const CliContext& cli, const std::vector<std::string>& args, std::ostream& out,
                   std::ostream&) {
  po::options_description desc("options");
  int fd = -1;
  desc.add_options()("ready-fd", po::value(&fd)->required(), "where to say the world stands (or why not)");
  po::positional_options_description pos;
  po::variables_map vm;
  if (!parse(args, cmd_named("keep-world"), desc, pos, vm, out,
             "Internal: started by a lanes command of an ordinary user when the user has no world.\n"
             "Makes a user, mount and network namespace, holds them while any process is in them,\n"
             "and leaves when it is alone there."))
    return kExitOk;
  if (fd < 0) throw UsageError("--ready-fd: expected a file descriptor");
  return rootless::keep_world(fd);
}

}  // namespace lanes::cli::commands
