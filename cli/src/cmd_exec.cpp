// `lanes exec`.

#include "commands.hpp"

#include <signal.h>

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <algorithm>
#include <iostream>

#include "lanes/testbed/netns.hpp"
#include "lanes/testbed/process.hpp"
#include "lanes/testbed/run_registry.hpp"

namespace po = boost::program_options;

namespace lanes::cli::commands {

int cmd_exec([[maybe_unused]] const CliContext& cli, const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto dd = std::find(args.begin(), args.end(), "--");
  std::vector<std::string> before(args.begin(), dd);
  std::vector<std::string> command;
  if (dd != args.end()) command.assign(dd + 1, args.end());
  po::options_description desc("options");
  std::string run, node;
  desc.add_options()("run", po::value(&run)->required(), "run id")("node", po::value(&node)->required(),
                                                                    "node name")(
      "in-step", "run as the task of a Slurm job step (a run over several machines): a signal to the step "
                 "reaches every process of it, CMD's included, so lanes exec takes none (TERM, INT, HUP, USR1, "
                 "USR2) and waits for CMD")(
      "hold-go", "start CMD with SIGUSR1 blocked (lanes-traffic --wait-go: a burst's go signal)");
  po::positional_options_description pos;
  pos.add("run", 1).add("node", 1);
  po::variables_map vm;
  if (!parse(before, cmd_named("exec"), desc, pos, vm, out,
             "Runs CMD inside NODE's network namespace with lanes' stdin, stdout and stderr;\n"
             "exits with CMD's exit status."))
    return kExitOk;
  if (command.empty()) throw UsageError("missing the command after '--'\nusage: " + usage_line(cmd_named("exec")));
  if (!RunRegistry::valid_id(run)) throw UsageError(fmt::format("'{}' is not a run id (1-8 of a-z, 0-9)", run));
  if (node.empty() || node.size() > 40 || node.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != std::string::npos || node[0] == '.')
    throw UsageError(fmt::format("'{}' is not a node name", node));
  if (!have_privileges(err, "exec")) return kExitFailure;
  std::string nsname = RunRegistry::netns_name(run, node);
  auto ns = Netns::open(nsname);
  if (!ns) {
    err << "lanes exec: no node '" << node << "' in run '" << run << "' (" << ns.error().what() << ")\n";
    return kExitBadInput;
  }
  ProcessSpec spec;
  spec.name = command[0] + " on " + node;
  spec.argv = command;
  spec.netns_fd = ns.value().fd();
  spec.new_session = false;
  spec.hold_sigusr1 = vm.count("hold-go") > 0;
  spec.env = {{"LANES_RUN", run}, {"LANES_NODE", node}};
  // ^C goes to the command (and in a step, every signal does); lanes
  // waits for it. A handler, not SIG_IGN: the command starts with the
  // default actions (a handler is reset at exec, an ignored signal is not)
  std::vector<int> taken = {SIGINT, SIGQUIT};
  if (vm.count("in-step")) taken.insert(taken.end(), {SIGTERM, SIGHUP, SIGUSR1, SIGUSR2});
  struct sigaction none {};
  none.sa_handler = [](int) {};
  none.sa_flags = SA_RESTART;
  std::vector<struct sigaction> old(taken.size());
  for (size_t i = 0; i < taken.size(); ++i) ::sigaction(taken[i], &none, &old[i]);
  auto restore = [&] {
    for (size_t i = 0; i < taken.size(); ++i) ::sigaction(taken[i], &old[i], nullptr);
  };
  auto d = Daemon::start(spec);
  if (!d) {
    restore();
    err << "lanes exec: " << d.error().what() << "\n";
    return 127;
  }
  // the go may come now: srun and this process have their handlers, the
  // command has SIGUSR1 blocked (the first rank waits for this line)
  if (vm.count("hold-go")) err << "lanes exec: holding " << command[0] << " for the go" << std::endl;
  int rc = d.value().wait();
  restore();
  return rc;
}

}  // namespace lanes::cli::commands
