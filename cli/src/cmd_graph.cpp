// `lanes graph`.

#include "commands.hpp"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <iostream>
#include <optional>

#include "lanes/cli/graph.hpp"
#include "lanes/testbed/topology_loader.hpp"

namespace po = boost::program_options;

namespace lanes::cli::commands {

int cmd_graph([[maybe_unused]] const CliContext& cli, const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  po::options_description desc("options");
  std::string file, format = "dot";
  int machines = 0;
  desc.add_options()("file", po::value(&file)->required(), "topology file")(
      "format,f", po::value(&format)->default_value("dot"), "dot (Graphviz) or mermaid")(
      "machines", po::value(&machines),
      "K: draw the topology as split over K machines (each a box; links between them dashed, VXLAN)");
  po::positional_options_description pos;
  pos.add("file", 1);
  po::variables_map vm;
  if (!parse(args, cmd_named("graph"), desc, pos, vm, out)) return kExitOk;
  if (format != "dot" && format != "mermaid")
    throw UsageError(fmt::format("--format {}: expected dot or mermaid", format));
  if (vm.count("machines") && (machines < 1 || machines > testbed::kMaxMachines))
    throw UsageError(fmt::format("--machines {}: expected 1 to {}", machines, testbed::kMaxMachines));
  auto t = load_topology(file);
  std::optional<testbed::Placement> p;
  if (vm.count("machines")) p = testbed::place(t, machines);
  out << (format == "dot" ? to_dot(t, p ? &*p : nullptr) : to_mermaid(t, p ? &*p : nullptr));
  return kExitOk;
}

}  // namespace lanes::cli::commands
