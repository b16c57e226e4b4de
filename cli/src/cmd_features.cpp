// `lanes features`.

#include "commands.hpp"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <iostream>

#include "lanes/testbed/features.hpp"
#include "lanes/testbed/limits.hpp"

namespace po = boost::program_options;

namespace lanes::cli::commands {

int cmd_features([[maybe_unused]] const CliContext& cli, const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description desc("options");
  desc.add_options()("json", "print JSON");
  po::positional_options_description pos;
  po::variables_map vm;
  if (!parse(args, cmd_named("features"), desc, pos, vm, out,
             "Probes the kernel in a scratch network namespace (nothing else is touched)."))
    return kExitOk;
  if (!have_privileges(err, "features")) return kExitFailure;
  auto f = probe_kernel_features();
  auto lim = read_machine_limits();
  if (vm.count("json")) {
    auto j = f.to_json();
    j["limits"] = lim.to_json();
    out << j.dump(2) << "\n";
    return kExitOk;
  }
  auto yn = [](bool b) { return b ? "yes" : "no"; };
  out << fmt::format("kernel            {}\nnetkit            {}\ndummy             {}\nnetem             {}\n"
                     "tbf               {}\nnexthop objects   {}\nresilient groups  {}\nbpf               {}\n",
                     f.kernel, yn(f.netkit), yn(f.dummy), yn(f.netem), yn(f.tbf), yn(f.nexthop_objects),
                     yn(f.resilient_groups), f.bpf ? "yes" : "no (" + f.bpf_error + ")");
  out << "impairments       " << f.impairments() << "\n";
  out << "privileges        " << f.privileges() << "\n";
  if (!f.notes.empty()) out << "notes: " << f.notes << "\n";
  out << fmt::format("limits that bound a run's size (lanes validate warns when a topology nears one):\n"
                     "  cpus              {}\n  memory available  {:.1f} GiB (daemons: about 10 MiB per job host, 61 "
                     "MiB per switch)\n  kernel.pid_max    {}\n  threads-max       {}\n  open files        {} "
                     "(per daemon; gobgpd holds one per BGP session)\n  neighbour limit   {} (gc_thresh3; lanes' "
                     "permanent entries do not count)\n  receive backlog   {} packets per CPU (netdev_max_backlog, "
                     "shared by every namespace: a burst beyond it drops, e.g. SYNs connected 1 s late)\n",
                     lim.cpus, static_cast<double>(lim.mem_available) / (1u << 30), lim.pid_max, lim.threads_max,
                     lim.nofile, lim.gc_thresh3, lim.netdev_max_backlog);
  return kExitOk;
}

}  // namespace lanes::cli::commands
