// `lanes validate`.

#include "commands.hpp"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <pugixml.hpp>
#include <iostream>
#include <optional>

#include "lanes/hostnet/datapath.hpp"
#include "lanes/testbed/input_file.hpp"
#include "lanes/testbed/limits.hpp"
#include "lanes/testbed/partition.hpp"
#include "lanes/testbed/topology_loader.hpp"

namespace po = boost::program_options;

namespace lanes::cli::commands {

// The name of the root element of the XML in TEXT, or "" if there is none.
std::string root_element_of(const std::string& text) {
  pugi::xml_document doc;
  doc.load_buffer(text.data(), text.size());
  return doc.document_element().name();
}

int cmd_validate([[maybe_unused]] const CliContext& cli, const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description desc("options");
  std::vector<std::string> files;
  int machines = 0;
  desc.add_options()("file", po::value(&files)->required(), "topology, scenario or suite file(s)")(
      "machines", po::value(&machines),
      "K: also place each topology over K machines (a run over several) and show which machine builds what");
  po::positional_options_description pos;
  pos.add("file", -1);
  po::variables_map vm;
  if (!parse(args, cmd_named("validate"), desc, pos, vm, out,
             "Checks each file as lanes would load it and builds nothing: a topology (its address\n"
             "plan too), a scenario (with its topology and every phase's overrides) or a suite\n"
             "(with every scenario it includes). Problems are printed as file:line: message."))
    return kExitOk;
  if (vm.count("machines") && (machines < 1 || machines > testbed::kMaxMachines))
    throw UsageError(fmt::format("--machines {}: expected 1 to {}", machines, testbed::kMaxMachines));
  int rc = kExitOk;
  for (const auto& f : files) {
    try {
      std::string root = root_element_of(read_input_file(f, "topology, scenario or suite file"));
      auto v = validators().find(root);
      // the summary first: a problem is thrown before anything is printed
      if (v != validators().end()) {
        if (vm.count("machines"))
          throw InputError({f + ": --machines places a topology; give the topology file of this " + root});
        std::string summary = v->second(f);
        out << f << ": ok, " << summary << "\n";
        continue;
      }
      Topology t = load_topology(f);
      // a user's egress program is read (not loaded) against lanes' ABI
      std::string bad_program;
      for (const auto& n : t.nodes)
        if (n.job && !n.job->egress_program.empty() && bad_program.empty())
          if (auto st = hostnet::check_egress_program(n.job->egress_program); !st)
            bad_program = f + ": " + n.name + "'s egress program: " + testbed::message_of(st.error());
      if (!bad_program.empty()) {
        err << bad_program << "\n";
        rc = kExitBadInput;
        continue;
      }
      // placed before anything is printed, as every other problem
      std::optional<testbed::Placement> placement;
      if (vm.count("machines")) placement = testbed::place(t, machines);
      out << f << ": ok, " << summary_of(t) << "\n";
      if (placement) out << testbed::describe(t, *placement);
      const MachineLimits limits = read_machine_limits();
      for (const auto& w : footprint_warnings(estimate_footprint(t), limits))
        err << f << ": warning: on this machine " << w << "\n";
      if (auto note = adapt_bfd_default(t, limits.cpus); !note.empty()) out << f << ": " << note << "\n";
      for (const auto& w : bfd_warnings(t, limits.cpus)) err << f << ": warning: " << w << "\n";
    } catch (const InputError& e) {
      err << e.what() << "\n";
      rc = kExitBadInput;
    }
  }
  return rc;
}

}  // namespace lanes::cli::commands
