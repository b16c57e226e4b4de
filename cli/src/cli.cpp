#include "lanes/cli/cli.hpp"

#include "commands.hpp"
#include "over_slurm.hpp"

#include <unistd.h>

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <sstream>

#include "lanes/testbed/log.hpp"
#include "lanes/testbed/process.hpp"
#include "lanes/testbed/rootless.hpp"
#include "lanes/testbed/topology_loader.hpp"
#include "lanes/testbed/version.hpp"

namespace po = boost::program_options;

namespace lanes::cli {

using namespace lanes::testbed;
namespace commands {

extern const std::vector<Command> kBuiltins;

// The built-in commands, then those other modules registered.
std::vector<Command>& registered() {
  static std::vector<Command> r;
  return r;
}
std::vector<Command> all_commands() {
  std::vector<Command> all = kBuiltins;
  for (const auto& c : registered()) all.push_back(c);
  return all;
}

std::string usage_line(const Command& c) { return fmt::format("lanes {} {}", c.name, c.args); }

void print_main_help(std::ostream& out) {
  out << "lanes " << kVersion
      << " — network emulation testbed for multi-NIC AI training hosts\n\n"
         "usage: lanes [--log-level debug|info|warn|error] COMMAND [ARGS]\n\ncommands:\n";
  for (const auto& c : all_commands()) out << fmt::format("  {:<44} {}\n", fmt::format("{} {}", c.name, c.args), c.summary);
  out << "\n'lanes COMMAND --help' describes a command. Exit codes: 0 ok, 1 failure, 2 bad input\n"
         "(lanes run: 3 when a scenario was not run because this machine lacks what it needs).\n"
         "Runs keep their state in $LANES_STATE_DIR (default /run/lanes). Without root, lanes runs\n"
         "in a user namespace of the user's own and keeps its state under $XDG_RUNTIME_DIR/lanes\n"
         "(or ~/.local/state/lanes); BPF is not available there (the bpf egress modes fall back to\n"
         "ecmp, loss and duplication on links are refused).\n";
}

bool parse(const std::vector<std::string>& args, const Command& cmd, po::options_description& desc,
           const po::positional_options_description& pos, po::variables_map& vm, std::ostream& out,
           const char* details) {
  return parse_command_line(args, cmd.name, cmd.args, cmd.summary, desc, pos, vm, out, details);
}

const Command& cmd_named(const char* name) {
  for (const auto& c : kBuiltins)
    if (std::string_view(c.name) == name) return c;
  throw std::logic_error("no command");
}

std::string fmt_ms(std::chrono::microseconds us) { return fmt::format("{:.1f} ms", us.count() / 1000.0); }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Topology load_run_topology(const RunRegistry& reg, const std::string& run) {
  auto state = reg.load(run);
  return load_topology_text(read_file(reg.layout(run).topology()), reg.layout(run).topology(),
                            state ? state.value().overrides : Overrides{});
}

std::string summary_of(const Topology& t) {
  size_t nics = 0;
  for (const auto& n : t.nodes) nics += n.nics.size();
  return fmt::format("topology '{}': {} rack{}, {} spine{}, {} host{} ({} NICs), {} server{}, {} links",
                     t.name, t.racks.size(), t.racks.size() == 1 ? "" : "s", t.count(NodeKind::spine),
                     t.count(NodeKind::spine) == 1 ? "" : "s", t.count(NodeKind::host),
                     t.count(NodeKind::host) == 1 ? "" : "s", nics, t.count(NodeKind::server),
                     t.count(NodeKind::server) == 1 ? "" : "s", t.links.size());
}

std::map<std::string, ValidatorFn>& validators() {
  static std::map<std::string, ValidatorFn> v;
  return v;
}

const std::vector<Command> kBuiltins = {
    {"validate", "FILE...", "check topology, scenario and suite files (nothing is built)", cmd_validate},
    {"up", "FILE [--run-id ID] [--wait [T]] [--over-slurm] [--json]",
     "build a topology and leave it running; --wait: until BGP converged, T in all", cmd_up},
    {"status", "[RUN [NODE...]] [--full] [--json]", "list runs, or show one run's nodes and interfaces", cmd_status},
    {"exec", "RUN NODE -- CMD...", "run a command inside a node's namespace", cmd_exec},
    {"down", "[RUN | --all]", "take a run down and remove everything it made", cmd_down},
    {"clean", "[--all] [--dry-run]", "remove what dead runs left behind", cmd_clean},
    {"graph", "FILE [--format dot|mermaid]", "draw a topology as Graphviz DOT or Mermaid", cmd_graph},
    {"features", "[--json]", "show the kernel features lanes detected", cmd_features},
    {"switch-config", "FILE NODE [--agent]", "print the config lanes renders for a switch (gobgpd, FIB agent, or FRR)", cmd_switch_config},
    {"supervise", "RUN --state-dir DIR [--owner PID:START]", "(internal) keep a run's daemons alive",
     cmd_supervise},
    {"shard", "FILE --run-id ID --machines LIST", "(internal, run by srun) one machine's part of a run over several",
     cmd_shard},
    {"nic-counters", "RUN --nic NODE:IF... --t0-unix-ns T", "(internal, run by srun) a machine's NIC counters per tick",
     cmd_nic_counters},
    {"fabric-query", "RUN QUERY", "(internal, run by srun) a question about this machine's part of a run",
     cmd_fabric_query},
    {"keep-world", "--ready-fd FD", "(internal) hold an ordinary user's namespaces while runs live in them",
     cmd_keep_world},
};

}  // namespace commands

using namespace commands;

bool have_privileges(std::ostream& err, const char* what) {
  if (::geteuid() == 0) return true;  // root, or already in the user's rootless world
  // an ordinary user: into the world of the user's own namespaces
  if (auto st = rootless::enter_world(self_dir() + "/lanes"); !st) {
    err << "lanes " << what << ": without root: " << st.error().what() << "\n";
    return false;
  }
  return true;
}

bool parse_command_line(const std::vector<std::string>& args, const std::string& name, const std::string& usage_args,
                        const std::string& summary, po::options_description& desc,
                        const po::positional_options_description& pos, po::variables_map& vm, std::ostream& out,
                        const char* details) {
  std::string usage = fmt::format("lanes {} {}", name, usage_args);
  desc.add_options()("help,h", "show this help");
  try {
    po::store(po::command_line_parser(args).options(desc).positional(pos).run(), vm);
    if (vm.count("help")) {
      out << "usage: " << usage << "\n\n" << summary << "\n";
      if (details) out << "\n" << details << "\n";
      out << "\n" << desc << "\n";
      return false;
    }
    po::notify(vm);  // required arguments are checked only when help was not asked for
  } catch (const po::error& e) {
    throw UsageError(fmt::format("{}\nusage: {}", e.what(), usage));
  }
  return true;
}

void register_validator(const char* root, ValidatorFn fn) { validators()[root] = fn; }

void register_command(const char* name, const char* args, const char* summary, CommandFn fn) {
  registered().push_back({name, args, summary, fn});
}

int run_cli(const CliContext& cli, int argc, char** argv, std::ostream& out, std::ostream& err) {
  std::vector<std::string> args(argv + 1, argv + argc);
  // global options come before the command
  size_t i = 0;
  for (; i < args.size() && args[i].rfind("-", 0) == 0; ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      print_main_help(out);
      return kExitOk;
    }
    if (args[i] == "--version") {
      out << "lanes " << kVersion << "\n";
      return kExitOk;
    }
    if (args[i] == "--log-level" && i + 1 < args.size()) {
      log::Level l;
      if (!log::parse_level(args[i + 1], l)) {
        err << "lanes: --log-level " << args[i + 1] << ": expected debug, info, warn or error\n";
        return kExitBadInput;
      }
      log::set_level(l);
      ++i;
      continue;
    }
    err << "lanes: unknown option " << args[i] << " (lanes --help)\n";
    return kExitBadInput;
  }
  if (i == args.size()) {
    print_main_help(err);
    return kExitBadInput;
  }
  std::string name = args[i];
  if (name == "help") {
    if (i + 1 < args.size()) {
      args = {args[i + 1], "--help"};
      i = 0;
      name = args[0];
    } else {
      print_main_help(out);
      return kExitOk;
    }
  }
  std::vector<std::string> rest(args.begin() + static_cast<long>(i) + 1, args.end());
  for (const auto& c : all_commands()) {
    if (name != c.name) continue;
    try {
      return c.fn(cli, rest, out, err);
    } catch (const InputError& e) {
      err << e.what() << "\n";
      return kExitBadInput;
    } catch (const UsageError& e) {
      err << "lanes " << c.name << ": " << e.what() << "\n";
      return kExitBadInput;
    } catch (const std::exception& e) {
      err << "lanes " << c.name << ": " << e.what() << "\n";
      return kExitFailure;
    }
  }
  err << "lanes: unknown command '" << name << "' (lanes --help lists them)\n";
  return kExitBadInput;
}

}  // namespace lanes::cli
