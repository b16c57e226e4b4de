// `lanes up`.

#include "commands.hpp"
#include "over_slurm.hpp"

#include <unistd.h>

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "lanes/testbed/interrupt.hpp"
#include "lanes/testbed/limits.hpp"
#include "lanes/testbed/live_run.hpp"
#include "lanes/testbed/log.hpp"
#include "lanes/testbed/netns.hpp"
#include "lanes/testbed/run_layout.hpp"
#include "lanes/testbed/topology_loader.hpp"
#include "lanes/testbed/wait.hpp"
#include "lanes/switches/convergence.hpp"

namespace po = boost::program_options;

namespace lanes::cli::commands {

using namespace lanes::switches;

int cmd_up([[maybe_unused]] const CliContext& cli, const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description desc("options");
  std::string file, run_id;
  desc.add_options()("file", po::value(&file)->required(), "topology file")(
      "run-id", po::value(&run_id), "run id (1-8 of a-z, 0-9); default: a fresh random one")(
      "wait", po::value<std::string>()->implicit_value("120s")->value_name("TIMEOUT"),
      "wait until BGP has converged (read from the switches' kernels), at most TIMEOUT in all, the daemons' start "
      "included (default 120s)")(
      "over-slurm", "inside a Slurm allocation (salloc/sbatch -N K): build it over the K machines, one shard "
      "per machine started with srun, links between machines as VXLAN tunnels")(
      "port", po::value<unsigned>()->value_name("PORT"), "--over-slurm: the tunnels' UDP port (default 4789)")(
      "underlay-mtu", po::value<unsigned>()->value_name("MTU"),
      "--over-slurm: the MTU of the machines' own network (default: read from this machine)")(
      "json", "print the result as JSON");
  po::positional_options_description pos;
  pos.add("file", 1);
  po::variables_map vm;
  if (!parse(args, cmd_named("up"), desc, pos, vm, out,
             "Builds the topology (a network namespace per node, a veth pair per link, addresses,\n"
             "TBF line rates) and leaves it running. 'lanes down RUN' removes it.\n"
             "With --wait it returns once BGP has converged: every job's task IP (IPv4 and IPv6)\n"
             "has one next hop per NIC at its rack switch and every switch routes to every rack.\n"
             "TIMEOUT bounds the whole of it, from the start: if the daemons are still starting\n"
             "when it runs out, the run is removed and lanes exits 1 saying how far they got; if\n"
             "BGP has not converged by then, the run stays up and lanes exits 1.\n"
             "With --over-slurm (inside an allocation of K machines) the racks are split over the\n"
             "machines (lanes validate --machines K shows how), srun starts 'lanes shard' on each,\n"
             "and lanes returns once every machine's part is up (with --wait: converged, read from\n"
             "every machine's switches). 'lanes down RUN' ends the shards' step (scancel)."))
    return kExitOk;
  std::optional<std::chrono::milliseconds> wait;
  if (vm.count("wait")) {
    std::chrono::milliseconds d{0};
    if (!parse_duration(vm["wait"].as<std::string>(), d) || d.count() <= 0)
      throw UsageError(fmt::format("--wait '{}': give a duration such as 60s or 500ms", vm["wait"].as<std::string>()));
    wait = d;
  }
  if (vm.count("over-slurm")) {
    if (vm.count("run-id") && !RunRegistry::valid_id(run_id))
      throw UsageError(fmt::format("--run-id '{}': use 1-8 characters of a-z and 0-9", run_id));
    OverSlurmUp o{file, run_id, wait, 0, 0, vm.count("json") > 0};
    if (vm.count("port")) {
      unsigned p = vm["port"].as<unsigned>();
      if (p == 0 || p > 65535) throw UsageError(fmt::format("--port {}: give 1-65535", p));
      o.port = static_cast<uint16_t>(p);
    }
    if (vm.count("underlay-mtu")) {
      unsigned m = vm["underlay-mtu"].as<unsigned>();
      if (m < 1280 || m > 65535) throw UsageError(fmt::format("--underlay-mtu {}: give 1280-65535", m));
      o.underlay_mtu = m;
    }
    if (!have_privileges(err, "up")) return kExitFailure;
    return up_over_slurm(o, out, err);
  }
  if (vm.count("port") || vm.count("underlay-mtu")) throw UsageError("--port and --underlay-mtu go with --over-slurm");
  Topology topo = load_topology(file);  // bad input: exit 2, nothing created
  const MachineLimits limits = read_machine_limits();
  for (const auto& w : footprint_warnings(estimate_footprint(topo), limits))
    err << "lanes up: warning: " << file << ": on this machine " << w << "\n";
  // BFD's interval where the file leaves it: the default, or what this machine carries
  if (auto note = adapt_bfd_default(topo, limits.cpus); !note.empty()) err << "lanes up: " << file << ": " << note << "\n";
  for (const auto& w : bfd_warnings(topo, limits.cpus)) err << "lanes up: warning: " << file << ": " << w << "\n";
  RunRegistry reg;
  if (vm.count("run-id") && !RunRegistry::valid_id(run_id))
    throw UsageError(fmt::format("--run-id '{}': use 1-8 characters of a-z and 0-9", run_id));
  if (!have_privileges(err, "up")) return kExitFailure;
  if (run_id.empty()) run_id = reg.new_id();
  if (reg.exists(run_id) || !list_netns(RunRegistry::netns_prefix(run_id)).empty()) {
    err << "lanes up: run id '" << run_id << "' is already in use (lanes status; lanes down " << run_id
        << ")\n";
    return kExitBadInput;
  }
  install_interrupt_handlers();  // ^C while building: roll back, then exit
  const auto t_start = std::chrono::steady_clock::now();
  LiveRunOptions lo;
  if (wait) lo.give_up = t_start + *wait;
  lo.run_id = run_id;
  lo.topology_xml = read_file(file);
  lo.topology_file = std::filesystem::absolute(file).string();
  lo.roles = cli.roles;
  auto run = LiveRun::start(topo, reg, lo);
  if (!run) {
    if (wait && std::chrono::steady_clock::now() >= t_start + *wait)
      err << fmt::format("lanes up: gave up after --wait {} while starting the daemons: ", vm["wait"].as<std::string>());
    else
      err << "lanes up: ";
    err << run.error().what() << "\n";
    return kExitFailure;
  }
  log::add_file_sink(RunLayout(run.value().dir()).lanes_log());
  std::chrono::microseconds switches_us = run.value().daemons_took();
  const BuildTimings tm = run.value().tb().timings();
  std::optional<Convergence> conv;
  std::chrono::milliseconds converge_took{0};
  if (wait) {
    auto t0 = std::chrono::steady_clock::now();
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*wait - (t0 - t_start));
    conv = poll_until([&] { return check_convergence(topo, [&](int node) -> Netlink& { return run.value().tb().netlink(node); }); },
                      [](const Convergence& c) { return c.done(); }, std::max(left, std::chrono::milliseconds(0)),
                      std::chrono::milliseconds(100), [] { return interrupted(); })
               .last;
    converge_took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  }
  run.value().keep();
  // what exists, counted as status and down count it: nodes and job containers
  size_t namespaces = list_netns(RunRegistry::netns_prefix(run_id)).size();
  if (vm.count("json")) {
    nlohmann::json j = {{"run_id", run_id},
                        {"topology", topo.name},
                        {"namespaces", namespaces},
                        {"nodes", topo.nodes.size()},
                        {"links", topo.links.size()},
                        {"timings_ms",
                         {{"namespaces", tm.namespaces.count() / 1000.0},
                          {"links", tm.links.count() / 1000.0},
                          {"addresses", tm.addresses.count() / 1000.0},
                          {"qdiscs", tm.qdiscs.count() / 1000.0},
                          {"total", tm.total.count() / 1000.0},
                          {"switches", switches_us.count() / 1000.0}}}};
    if (conv)
      j["converged"] = {{"done", conv->done()},
                        {"after_ms", converge_took.count()},
                        {"task_ips", conv->task_ips},
                        {"task_ips_full", conv->task_ips_full},
                        {"aggregates", conv->aggregates},
                        {"aggregates_present", conv->aggregates_present},
                        {"missing", conv->first_missing}};
    out << j.dump(2) << "\n";
  } else {
    out << fmt::format("run {} is up: {} namespaces, {} links in {}{} (lanes status {}; lanes down {})\n", run_id,
                       namespaces, topo.links.size(), fmt_ms(tm.total),
                       switches_us.count() ? fmt::format(", daemons started in {}", fmt_ms(switches_us)) : "",
                       run_id, run_id);
    if (conv && conv->done())
      out << fmt::format("BGP converged {} after the daemons started: {} task IPs with a next hop per NIC, {} "
                         "rack routes\n",
                         fmt_ms(converge_took), conv->task_ips, conv->aggregates);
  }
  if (conv && !conv->done()) {
    err << fmt::format("lanes up: gave up after --wait {} with BGP not converged ({} of it after the daemons were up): "
                       "{} of {} task IPs full, {} of {} rack routes; first missing: {} (the run stays up: lanes "
                       "status {} shows its sessions and BFD; lanes down {})\n",
                       vm["wait"].as<std::string>(), fmt_ms(converge_took), conv->task_ips_full, conv->task_ips,
                       conv->aggregates_present, conv->aggregates, conv->first_missing, run_id, run_id);
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace lanes::cli::commands
