// `lanes switch-config`.

#include "commands.hpp"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <iostream>

#include "lanes/testbed/topology_loader.hpp"
#include "lanes/switches/frr.hpp"
#include "lanes/switches/switch_config.hpp"

namespace po = boost::program_options;

namespace lanes::cli::commands {

using namespace lanes::switches;

int cmd_switch_config([[maybe_unused]] const CliContext& cli, const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description desc("options");
  std::string file, node;
  desc.add_options()("file", po::value(&file)->required(), "topology file")(
      "node", po::value(&node)->required(), "a rack switch or spine")("agent", "print the FIB agent's JSON instead");
  po::positional_options_description pos;
  pos.add("file", 1).add("node", 1);
  po::variables_map vm;
  if (!parse(args, cmd_named("switch-config"), desc, pos, vm, out,
             "Prints the configuration lanes renders for NODE: gobgpd's TOML (with --agent, the\n"
             "FIB agent's JSON), or, on a switch whose stack is frr, zebra's, staticd's and bgpd's\n"
             "configurations one after another. Nothing is started."))
    return kExitOk;
  auto t = load_topology(file);
  int n = t.find_node(node);
  if (n < 0 || (t.nodes[n].kind != NodeKind::rack_switch && t.nodes[n].kind != NodeKind::spine)) {
    err << "lanes switch-config: '" << node << "' is not a rack switch or spine of " << file << "\n";
    return kExitBadInput;
  }
  if (t.nodes[n].stack == testbed::SwitchStack::frr) {
    if (vm.count("agent")) {
      err << "lanes switch-config: " << node << " runs FRR (switch-stack=\"frr\"): zebra programs its kernel, "
          << "there is no FIB agent\n";
      return kExitBadInput;
    }
    auto c = render_frr_config(t, n);
    out << "! ---- zebra.conf\n" << c.zebra << "! ---- staticd.conf\n" << c.staticd << "! ---- bgpd.conf\n" << c.bgpd;
  } else if (vm.count("agent")) {
    out << render_agent_config(t, n).to_json().dump(2) << "\n";
  }
  else
    out << render_gobgp_config(t, n);
  return kExitOk;
}

}  // namespace lanes::cli::commands
