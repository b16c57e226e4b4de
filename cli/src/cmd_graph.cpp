// `lanes graph`.

#include "commands.hpp"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <iostream>

#include "lanes/cli/graph.hpp"
#include "lanes/testbed/topology_loader.hpp"

namespace po = boost::program_options;

namespace lanes::cli::commands {

int cmd_graph([[maybe_unused]] const CliContext& cli, const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  po::options_description desc("options");
  std::string file, format = "dot";
  desc.add_options()("file", po::value(&file)->required(), "topology file")(
      "format,f", po::value(&format)->default_value("dot"), "dot (Graphviz) or mermaid");
  po::positional_options_description pos;
  pos.add("file", 1);
  po::variables_map vm;
  if (!parse(args, cmd_named("graph"), desc, pos, vm, out)) return kExitOk;
  if (format != "dot" && format != "mermaid")
    throw UsageError(fmt::format("--format {}: expected dot or mermaid", format));
  auto t = load_topology(file);
  out << (format == "dot" ? to_dot(t) : to_mermaid(t));
  return kExitOk;
}

}  // namespace lanes::cli::commands
