// `lanes validate`.

#include "commands.hpp"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <pugixml.hpp>
#include <iostream>

#include "lanes/hostnet/datapath.hpp"
#include "lanes/testbed/input_file.hpp"
#include "lanes/testbed/limits.hpp"
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
  desc.add_options()("file", po::value(&files)->required(), "topology, scenario or suite file(s)");
  po::positional_options_description pos;
  pos.add("file", -1);
  po::variables_map vm;
  if (!parse(args, cmd_named("validate"), desc, pos, vm, out,
             "Checks each file as lanes would load it and builds nothing: a topology (its address\n"
             "plan too), a scenario (with its topology and every phase's overrides) or a suite\n"
             "(with every scenario it includes). Problems are printed as file:line: message."))
    return kExitOk;
  int rc = kExitOk;
  for (const auto& f : files) {
    try {
      std::string root = root_element_of(read_input_file(f, "topology, scenario or suite file"));
      auto v = validators().find(root);
      // the summary first: a problem is thrown before anything is printed
      if (v != validators().end()) {
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
      out << f << ": ok, " << summary_of(t) << "\n";
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
