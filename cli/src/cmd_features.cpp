// `lanes features`.

#include "commands.hpp"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>

#include "lanes/testbed/features.hpp"
#include "lanes/testbed/limits.hpp"
#include "lanes/testbed/process.hpp"

namespace po = boost::program_options;

namespace lanes::cli::commands {

namespace {

// NAME's path in PATH or one of DIRS (FRR keeps its daemons in /usr/lib/frr); "" if none
std::string program_path(const std::string& name, const std::vector<std::string>& dirs = {}) {
  std::vector<std::string> where = dirs;
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";
  for (size_t at = 0; at <= p.size();) {
    size_t colon = p.find(':', at);
    if (colon == std::string::npos) colon = p.size();
    if (colon > at) where.push_back(p.substr(at, colon - at));
    at = colon + 1;
  }
  for (const auto& d : where) {
    std::string f = d + "/" + name;
    if (::access(f.c_str(), X_OK) == 0) return f;
  }
  return "";
}

// What of a user's own components this machine has, and which of them lanes deploys today
nlohmann::json components() {
  auto c = [](const std::string& path, bool deploys, const char* note = "") {
    return nlohmann::json{{"installed", !path.empty()}, {"path", path}, {"lanes_deploys", deploys}, {"note", note}};
  };
  std::string bgpd = program_path("bgpd", {"/usr/lib/frr"}), zebra = program_path("zebra", {"/usr/lib/frr"}),
              staticd = program_path("staticd", {"/usr/lib/frr"});
  bool frr = !bgpd.empty() && !zebra.empty() && !staticd.empty();
  return {{"switch_stacks",
           {{"gobgp", c(program_path("gobgpd"), true)},
            {"frr", c(frr ? bgpd : "", true,
                      "zebra, staticd, bgpd: <rack switch-stack=\"frr\">, or lanes run --set switch-stack=frr")}}},
          {"injectors",
           {{"lanes", c(program_path("lanes-vip-injector", {self_dir()}), true)},
            {"exabgp", c(program_path("exabgp"), true, "<job injector=\"exabgp\">: per NIC or ADD-PATH")},
            {"bird", c(program_path("bird"), true, "<job injector=\"bird\">: per NIC")},
            {"exec", c(program_path("sh"), true, "your own program: <job injector=\"exec\" injector-cmd=...>")}}},
          {"egress_programs",
           {{"lanes", c(program_path("lanes-host-agent", {self_dir()}), true)},  // its skeleton is built in
            {"yours", {{"installed", true},
                       {"path", ""},
                       {"lanes_deploys", true},
                       {"note", "<job egress=\"bpf\" program=\"FILE.bpf.o\">, built against hostnet_abi.h"}}}}},
          {"workloads_and_faults",
           {{"exec", c(program_path("sh"), true, "your own command: <workload type=\"exec\">, <fault type=\"exec\">")}}}};
}

}  // namespace

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
    j["components"] = components();
    out << j.dump(2) << "\n";
    return kExitOk;
  }
  auto yn = [](bool b) { return b ? "yes" : "no"; };
  out << fmt::format("kernel            {}\nnetkit            {}\ndummy             {}\nnetem             {}\n"
                     "tbf               {}\nnexthop objects   {}\nresilient groups  {}\nmptcp             {}\n"
                     "bpf               {}\n",
                     f.kernel, yn(f.netkit), yn(f.dummy), yn(f.netem), yn(f.tbf), yn(f.nexthop_objects),
                     yn(f.resilient_groups), yn(f.mptcp), f.bpf ? "yes" : "no (" + f.bpf_error + ")");
  out << "impairments       " << f.impairments() << "\n";
  out << "privileges        " << f.privileges() << "\n";
  if (!f.notes.empty()) out << "notes: " << f.notes << "\n";
  out << "components (bring your own: README):\n";
  const auto comp = components();
  for (const char* group : {"switch_stacks", "injectors", "egress_programs", "workloads_and_faults"}) {
    std::string line;
    for (const auto& [name, c] : comp.at(group).items()) {
      bool deploys = c.at("lanes_deploys").get<bool>(), installed = c.at("installed").get<bool>();
      std::string state = deploys && installed ? "yes"
                          : deploys            ? "not installed (scripts/setup installs it)"
                          : installed          ? "installed, not deployed by lanes yet"
                                               : "not installed, not deployed by lanes yet";
      line += fmt::format("{}{}: {}", line.empty() ? "" : "; ", name, state);
    }
    out << fmt::format("  {:<22}{}\n", group, line);
  }
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
