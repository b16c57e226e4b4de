#include "lanes/cli/cli.hpp"

#include <signal.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <pugixml.hpp>
#include <atomic>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "lanes/cli/graph.hpp"
#include "lanes/core/cleanup.hpp"
#include "lanes/core/deploy.hpp"
#include "lanes/core/features.hpp"
#include "lanes/core/input_file.hpp"
#include "lanes/core/interrupt.hpp"
#include "lanes/core/limits.hpp"
#include "lanes/core/live_run.hpp"
#include "lanes/core/log.hpp"
#include "lanes/core/process.hpp"
#include "lanes/core/supervisor.hpp"
#include "lanes/core/testbed.hpp"
#include "lanes/core/topology_loader.hpp"
#include "lanes/core/version.hpp"
#include "lanes/hostnet/host_agent.hpp"
#include "lanes/switch/convergence.hpp"
#include "lanes/switch/switch_config.hpp"
#include "lanes/switch/switches.hpp"
#include "lanes/vip/deploy.hpp"

namespace po = boost::program_options;

namespace lanes::testbed {
namespace {

struct Command {
  const char* name;
  const char* args;
  const char* summary;
  int (*fn)(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
};

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
  out << "\n'lanes COMMAND --help' describes a command. Exit codes: 0 ok, 1 failure, 2 bad input.\n"
         "Runs keep their state in $LANES_STATE_DIR (default /run/lanes).\n";
}

bool parse(const std::vector<std::string>& args, const Command& cmd, po::options_description& desc,
           const po::positional_options_description& pos, po::variables_map& vm, std::ostream& out,
           const char* details = nullptr) {
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

// ---- validate ----

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

// The name of the root element of the XML in TEXT, or "" if there is none.
std::string root_element_of(const std::string& text) {
  pugi::xml_document doc;
  doc.load_buffer(text.data(), text.size());
  return doc.document_element().name();
}

int cmd_validate(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
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
      out << f << ": ok, " << summary_of(t) << "\n";
      for (const auto& w : footprint_warnings(estimate_footprint(t), read_machine_limits()))
        err << f << ": warning: on this machine " << w << "\n";
    } catch (const InputError& e) {
      err << e.what() << "\n";
      rc = kExitBadInput;
    }
  }
  return rc;
}

// ---- graph ----

int cmd_graph(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
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

// ---- up ----

int cmd_up(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description desc("options");
  std::string file, run_id;
  desc.add_options()("file", po::value(&file)->required(), "topology file")(
      "run-id", po::value(&run_id), "run id (1-8 of a-z, 0-9); default: a fresh random one")(
      "wait", po::value<std::string>()->implicit_value("120s")->value_name("TIMEOUT"),
      "wait until BGP has converged (read from the switches' kernels), at most TIMEOUT (default 120s)")(
      "json", "print the result as JSON");
  po::positional_options_description pos;
  pos.add("file", 1);
  po::variables_map vm;
  if (!parse(args, cmd_named("up"), desc, pos, vm, out,
             "Builds the topology (a network namespace per node, a veth pair per link, addresses,\n"
             "TBF line rates) and leaves it running. 'lanes down RUN' removes it.\n"
             "With --wait it returns once BGP has converged: every job's task IP (IPv4 and IPv6)\n"
             "has one next hop per NIC at its rack switch and every switch routes to every rack;\n"
             "if that does not happen in time the run stays up and lanes exits 1."))
    return kExitOk;
  std::optional<std::chrono::milliseconds> wait;
  if (vm.count("wait")) {
    std::chrono::milliseconds d{0};
    if (!parse_duration(vm["wait"].as<std::string>(), d) || d.count() <= 0)
      throw UsageError(fmt::format("--wait '{}': give a duration such as 60s or 500ms", vm["wait"].as<std::string>()));
    wait = d;
  }
  Topology topo = load_topology(file);  // bad input: exit 2, nothing created
  for (const auto& w : footprint_warnings(estimate_footprint(topo), read_machine_limits()))
    err << "lanes up: warning: " << file << ": on this machine " << w << "\n";
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
  auto run = LiveRun::start(topo, reg, {run_id, read_file(file), std::filesystem::absolute(file).string()});
  if (!run) {
    err << "lanes up: " << run.error().what() << "\n";
    return kExitFailure;
  }
  log::add_file_sink(run.value().dir() + "/lanes.log");
  std::chrono::microseconds switches_us = run.value().daemons_took();
  const BuildTimings tm = run.value().tb().timings();
  std::optional<Convergence> conv;
  std::chrono::milliseconds converge_took{0};
  if (wait) {
    auto t0 = std::chrono::steady_clock::now();
    for (;;) {
      conv = check_convergence(topo, [&](int node) -> Netlink& { return run.value().tb().netlink(node); });
      converge_took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
      if (conv->done() || converge_took >= *wait || interrupted()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
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
    err << fmt::format("lanes up: BGP had not converged after {}: {} of {} task IPs full, {} of {} rack routes; "
                       "first missing: {} (the run stays up: lanes down {})\n",
                       fmt_ms(converge_took), conv->task_ips_full, conv->task_ips, conv->aggregates_present,
                       conv->aggregates, conv->first_missing, run_id);
    return kExitFailure;
  }
  return kExitOk;
}

// ---- status ----

std::string age_of(int64_t created) {
  if (created == 0) return "-";
  auto s = static_cast<long long>(std::time(nullptr) - created);
  if (s < 120) return fmt::format("{}s", s);
  if (s < 7200) return fmt::format("{}m", s / 60);
  return fmt::format("{}h", s / 3600);
}

nlohmann::json run_summary_json(const RunRegistry& reg, const std::string& id) {
  auto st = reg.load(id);
  RunHealth h = reg.assess(id);
  nlohmann::json j = {{"id", id},
                      {"phase", h.phase},
                      {"namespaces", list_netns(RunRegistry::netns_prefix(id)).size()}};
  if (!h.reason.empty()) j["dead_because"] = h.reason;
  if (st) {
    j["topology"] = st.value().topology_name;
    j["topology_file"] = st.value().topology_file;
    j["created_unix"] = st.value().created_unix;
    j["owner"] = st.value().owner;
  }
  return j;
}

// Runs FN(i) for i in [0, N) on up to WORKERS threads.
template <typename F>
void parallel_for(size_t n, size_t workers, F fn) {
  std::atomic<size_t> next{0};
  std::vector<std::thread> ts;
  for (size_t w = 0; w < std::min(n, workers); ++w)
    ts.emplace_back([&] {
      for (size_t i; (i = next++) < n;) fn(i);
    });
  for (auto& t : ts) t.join();
}

// A node's interfaces as its kernel has them, each with the link's other
// end from the topology (PEER_OF: node, ifname -> "node:ifname").
nlohmann::json interfaces_json(int ns_fd, const std::string& nsname, int node,
                               const std::map<std::pair<int, std::string>, std::string>& peer_of) {
  auto nl = Netlink::open_in(ns_fd, nsname);
  if (!nl) return nullptr;
  auto links = nl.value().links();
  auto addrs = nl.value().addresses();
  auto qd = nl.value().qdiscs();
  nlohmann::json ifs = nlohmann::json::array();
  if (!links) return ifs;
  for (const auto& l : links.value()) {
    if (l.name == "lo") continue;
    nlohmann::json ji = {{"name", l.name},       {"index", l.index},
                         {"kind", l.kind},       {"up", l.admin_up},
                         {"carrier", l.carrier}, {"rx_bytes", l.rx_bytes},
                         {"tx_bytes", l.tx_bytes}, {"rx_packets", l.rx_packets},
                         {"tx_packets", l.tx_packets}, {"tx_dropped", l.tx_dropped}};
    nlohmann::json a = nlohmann::json::array();
    if (addrs)
      for (const auto& ad : addrs.value())
        if (ad.index == l.index && ad.addr.rfind("fe80", 0) != 0) a.push_back(ad.addr);
    ji["addresses"] = std::move(a);
    if (qd)
      for (const auto& q : qd.value())
        if (q.index == l.index && q.kind == "tbf") ji["rate_bps"] = q.rate_bps;
    auto it = peer_of.find({node, l.name});
    if (it != peer_of.end()) ji["peer"] = it->second;
    ifs.push_back(std::move(ji));
  }
  return ifs;
}

// Every node of the run: what the topology says, what its kernel has, and
// its daemons' view. Gathered in parallel: a fleet (1062 nodes, 20 switches
// asked by gobgp three times each) took 10.6 s one node after another.
// ONLY (if not empty): just these nodes.
nlohmann::json run_detail_json(const RunRegistry& reg, const std::string& id, const Topology& full,
                               const std::set<std::string>& only = {}) {
  nlohmann::json j = run_summary_json(reg, id);
  const Topology* topo = &full;
  std::map<std::pair<int, std::string>, std::string> peer_of;
  for (const auto& lk : topo->links) {
    peer_of[{lk.a.node, lk.a.ifname}] = topo->nodes[lk.b.node].name + ":" + lk.b.ifname;
    peer_of[{lk.b.node, lk.b.ifname}] = topo->nodes[lk.a.node].name + ":" + lk.a.ifname;
  }
  size_t count = topo->nodes.size();
  std::vector<nlohmann::json> nodes(count);
  std::vector<std::optional<Netns>> netns(count);
  for (size_t i = 0; i < count; ++i) {
    const Node& n = topo->nodes[i];
    if (!only.empty() && !only.count(n.name)) continue;
    std::string nsname = RunRegistry::netns_name(id, n.name);
    nlohmann::json jn = {{"name", n.name}, {"kind", to_string(n.kind)}, {"netns", nsname}};
    if (n.rack >= 0) jn["rack"] = topo->racks[n.rack].name;
    if (n.kind == NodeKind::spine || n.kind == NodeKind::rack_switch) {
      jn["asn"] = n.asn;
      jn["router_id"] = n.router_id.to_string();
    }
    if (n.job) {
      jn["job"] = {{"name", n.job->name},
                   {"task_ip4", n.job->task_ip4.to_string()},
                   {"task_ip6", n.job->task_ip6.to_string()},
                   {"egress", to_string(n.job->egress)},
                   {"vip", to_string(n.job->vip)}};
    }
    auto ns = Netns::open(nsname);
    jn["present"] = ns.ok();
    if (ns) netns[i] = std::move(ns).value();
    nodes[i] = std::move(jn);
  }
  // the switches' gobgpd (each answer a gobgp process) beside the kernels
  std::vector<size_t> switches;
  for (size_t i = 0; i < count; ++i)
    if (netns[i] && (topo->nodes[i].kind == NodeKind::rack_switch || topo->nodes[i].kind == NodeKind::spine))
      switches.push_back(i);
  std::vector<nlohmann::json> bgp_of(switches.size());
  std::thread bgp([&] {
    parallel_for(switches.size(), 4, [&](size_t k) {
      size_t i = switches[k];
      bgp_of[k] = switch_status_json(reg, id, topo->nodes[i], netns[i]->fd());
    });
  });
  parallel_for(count, 4, [&](size_t i) {
    const Node& n = topo->nodes[i];
    if (nodes[i].is_null()) return;  // not asked for
    nlohmann::json extra = nlohmann::json::object();
    if (n.kind == NodeKind::host) {
      // the host agent's view: NIC state, counters, BPF flows per NIC
      try {
        std::ifstream in(hostnet::host_agent_files(reg.layout(id), n.name).state);
        if (in) {
          auto st = nlohmann::json::parse(in);
          st.erase("flows");
          st["container_netns"] = RunRegistry::netns_name(id, n.name + ".job");
          extra["hostnet"] = std::move(st);
        }
        std::ifstream inj(vip::injector_files(reg.layout(id), n.name).state);
        if (inj) extra["injector"] = nlohmann::json::parse(inj);
      } catch (const std::exception&) {
      }
    }
    if (netns[i]) {
      auto ifs = interfaces_json(netns[i]->fd(), RunRegistry::netns_name(id, n.name), static_cast<int>(i), peer_of);
      if (!ifs.is_null()) extra["interfaces"] = std::move(ifs);
    }
    nodes[i].update(extra);
  });
  bgp.join();
  for (size_t k = 0; k < switches.size(); ++k) nodes[switches[k]]["bgp"] = std::move(bgp_of[k]);
  nlohmann::json arr = nlohmann::json::array();
  for (auto& n : nodes)
    if (!n.is_null()) arr.push_back(std::move(n));
  j["nodes"] = std::move(arr);
  return j;
}

// Above this many hosts, lanes status RUN summarises: a line per switch and
// per rack, from gobgpd's neighbors and the daemons' state files, no look
// into a thousand kernels (lanes status RUN NODE... or --full for those).
constexpr size_t kSummaryAboveHosts = 64;

nlohmann::json run_fleet_json(const RunRegistry& reg, const std::string& id, const Topology& topo) {
  nlohmann::json j = run_summary_json(reg, id);
  j["view"] = "summary";
  std::vector<size_t> switches;
  for (size_t i = 0; i < topo.nodes.size(); ++i)
    if (topo.nodes[i].kind == NodeKind::rack_switch || topo.nodes[i].kind == NodeKind::spine) switches.push_back(i);
  std::vector<nlohmann::json> sw(switches.size());
  parallel_for(switches.size(), 4, [&](size_t k) {
    const Node& n = topo.nodes[switches[k]];
    nlohmann::json x = {{"name", n.name}, {"kind", to_string(n.kind)}, {"asn", n.asn}};
    auto ns = Netns::open(RunRegistry::netns_name(id, n.name));
    x["present"] = ns.ok();
    if (ns) {
      auto b = switch_status_json(reg, id, n, ns.value().fd(), /*with_rib=*/false);
      size_t est = 0;
      for (const auto& s : b["sessions"]) est += s["state"] == "established";
      x["sessions"] = b["sessions"].size();
      x["established"] = est;
      x["groups"] = b.value("routes", nlohmann::json::object()).size();
      x["stale"] = b.value("stale", false);
      if (b.contains("error")) x["error"] = b["error"];
      x["daemons"] = b["daemons"];
      x["daemon_exits"] = b["daemon_exits"];
    }
    sw[k] = std::move(x);
  });
  nlohmann::json racks = nlohmann::json::array();
  for (const auto& r : topo.racks) {
    size_t hosts = 0, nics = 0, nics_up = 0, sessions = 0, established = 0, reporting = 0;
    for (int h : r.hosts) {
      const Node& n = topo.nodes[static_cast<size_t>(h)];
      ++hosts;
      nics += n.nics.size();
      try {
        std::ifstream in(hostnet::host_agent_files(reg.layout(id), n.name).state);
        if (in) {
          ++reporting;
          for (const auto& x : nlohmann::json::parse(in).value("nics", nlohmann::json::array())) nics_up += x.value("up", false);
        }
        std::ifstream inj(vip::injector_files(reg.layout(id), n.name).state);
        if (inj)
          for (const auto& s : nlohmann::json::parse(inj).value("sessions", nlohmann::json::array())) {
            ++sessions;
            established += s.value("state", "") == "established";
          }
      } catch (const std::exception&) {
      }
    }
    racks.push_back({{"name", r.name}, {"switch", topo.nodes[static_cast<size_t>(r.switch_node)].name},
                     {"hosts", hosts}, {"hosts_reporting", reporting}, {"nics", nics}, {"nics_up", nics_up},
                     {"injector_sessions", sessions}, {"injector_established", established},
                     {"servers", r.servers.size()}});
  }
  nlohmann::json sws = nlohmann::json::array();
  for (auto& x : sw) sws.push_back(std::move(x));
  j["switches"] = std::move(sws);
  j["racks"] = std::move(racks);
  return j;
}

int cmd_status(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description desc("options");
  std::string run;
  std::vector<std::string> only;
  desc.add_options()("run", po::value(&run), "run id; without it, every run is listed")(
      "node", po::value(&only), "NODE...: only these nodes, in full")(
      "full", "every node in full, however large the run (without it, a run of more than 64 hosts is summarised)")(
      "json", "print JSON instead of tables");
  po::positional_options_description pos;
  pos.add("run", 1).add("node", -1);
  po::variables_map vm;
  if (!parse(args, cmd_named("status"), desc, pos, vm, out,
             "A run of up to 64 hosts is shown node by node: its switches' BGP sessions and\n"
             "groups, each host's NICs, job container and VIP injector, every interface.\n"
             "A larger run is summarised, a line per switch and per rack; name nodes (or\n"
             "--full) to see them in full."))
    return kExitOk;
  if (vm.count("run") && !RunRegistry::valid_id(run))
    throw UsageError(fmt::format("'{}' is not a run id (1-8 of a-z, 0-9)", run));
  RunRegistry reg;
  bool json = vm.count("json");
  if (run.empty()) {
    nlohmann::json runs = nlohmann::json::array();
    for (const auto& id : reg.list()) runs.push_back(run_summary_json(reg, id));
    if (json) {
      out << nlohmann::json{{"runs", runs}}.dump(2) << "\n";
      return kExitOk;
    }
    if (runs.empty()) {
      out << "no runs (lanes up FILE starts one)\n";
      return kExitOk;
    }
    out << fmt::format("{:<10} {:<9} {:<16} {:>10} {:>6}\n", "RUN", "PHASE", "TOPOLOGY", "NAMESPACES", "AGE");
    for (const auto& r : runs)
      out << fmt::format("{:<10} {:<9} {:<16} {:>10} {:>6}\n", r["id"].get<std::string>(),
                         r["phase"].get<std::string>(), r.value("topology", "?"),
                         r["namespaces"].get<size_t>(), age_of(r.value("created_unix", int64_t{0})));
    return kExitOk;
  }
  if (!reg.exists(run)) {
    err << "lanes status: no run '" << run << "' (lanes status lists the runs)\n";
    return kExitBadInput;
  }
  std::optional<Topology> topo;
  try {
    topo = load_topology_text(read_file(reg.layout(run).topology()), reg.layout(run).topology());
  } catch (const std::exception& e) {
    err << "lanes status: cannot read run " << run << "'s topology: " << e.what() << "\n";
    return kExitFailure;
  }
  for (const auto& n : only)
    if (topo->find_node(n) < 0)
      throw UsageError(fmt::format("run {} has no node '{}' (lanes status {} lists them)", run, n, run));
  size_t hosts = 0;
  for (const auto& n : topo->nodes) hosts += n.kind == NodeKind::host;
  if (only.empty() && !vm.count("full") && hosts > kSummaryAboveHosts) {
    auto f = run_fleet_json(reg, run, *topo);
    if (json) {
      out << f.dump(2) << "\n";
      return kExitOk;
    }
    out << fmt::format("run {}: {} ({}), topology '{}' from {}\n", run, f["phase"].get<std::string>(),
                       age_of(f.value("created_unix", int64_t{0})), f.value("topology", "?"), f.value("topology_file", "?"));
    out << fmt::format("{} nodes, {} hosts: summarised (lanes status {} NODE... or --full for nodes in full)\n",
                       topo->nodes.size(), hosts, run);
    out << fmt::format("{:<10} {:<6} {:>8} {:>12} {:>7}  {}\n", "SWITCH", "KIND", "AS", "SESSIONS UP", "GROUPS", "DAEMONS");
    for (const auto& s : f["switches"]) {
      std::string d;
      for (const auto& x : s.value("daemons", nlohmann::json::array()))
        d += fmt::format("{} {} ({} restarts) ", x["name"].get<std::string>(), x["pid"].get<int>(), x["restarts"].get<int>());
      std::string note = !s["present"].get<bool>() ? "[namespace missing]"
                         : s.contains("error")     ? s["error"].get<std::string>()
                         : s.value("stale", false) ? "routes STALE (gobgpd lost)"
                                                   : "";
      out << fmt::format("{:<10} {:<6} {:>8} {:>12} {:>7}  {}{}\n", s["name"].get<std::string>(), s["kind"].get<std::string>(),
                         s["asn"].get<uint32_t>(),
                         fmt::format("{}/{}", s.value("established", size_t{0}), s.value("sessions", size_t{0})),
                         s.value("groups", size_t{0}), d, note);
    }
    out << fmt::format("{:<10} {:<10} {:>6} {:>10} {:>18} {:>8}\n", "RACK", "SWITCH", "HOSTS", "NICS UP", "INJECTOR SESSIONS", "SERVERS");
    for (const auto& r : f["racks"])
      out << fmt::format("{:<10} {:<10} {:>6} {:>10} {:>18} {:>8}{}\n", r["name"].get<std::string>(),
                         r["switch"].get<std::string>(), r["hosts"].get<size_t>(),
                         fmt::format("{}/{}", r["nics_up"].get<size_t>(), r["nics"].get<size_t>()),
                         fmt::format("{}/{} up", r["injector_established"].get<size_t>(), r["injector_sessions"].get<size_t>()),
                         r["servers"].get<size_t>(),
                         r["hosts_reporting"] == r["hosts"] ? "" : fmt::format("  ({} hosts not reporting)",
                                                                              r["hosts"].get<size_t>() - r["hosts_reporting"].get<size_t>()));
    return kExitOk;
  }
  std::set<std::string> wanted(only.begin(), only.end());
  auto j = run_detail_json(reg, run, *topo, wanted);
  if (json) {
    out << j.dump(2) << "\n";
    return kExitOk;
  }
  out << fmt::format("run {}: {} ({}), topology '{}' from {}\n", run, j["phase"].get<std::string>(),
                     age_of(j.value("created_unix", int64_t{0})), j.value("topology", "?"),
                     j.value("topology_file", "?"));
  if (j.contains("error")) {
    out << "  " << j["error"].get<std::string>() << "\n";
    return kExitFailure;
  }
  for (const auto& n : j["nodes"]) {
    std::string extra;
    if (n.contains("asn")) extra = fmt::format(" AS {} router-id {}", n["asn"].get<uint32_t>(), n["router_id"].get<std::string>());
    if (n.contains("job"))
      extra = fmt::format(" job {} task {} {} egress {} vip {}", n["job"]["name"].get<std::string>(),
                          n["job"]["task_ip4"].get<std::string>(), n["job"]["task_ip6"].get<std::string>(),
                          n["job"]["egress"].get<std::string>(), n["job"]["vip"].get<std::string>());
    out << fmt::format("{} ({}){}{}\n", n["name"].get<std::string>(), n["kind"].get<std::string>(), extra,
                       n["present"].get<bool>() ? "" : "  [namespace missing]");
    if (n.contains("bgp")) {
      const auto& b = n["bgp"];
      size_t est = 0;
      for (const auto& ss : b["sessions"]) est += ss["state"] == "established";
      out << fmt::format("  bgp: {} sessions, {} established, {} announcements rejected{}{}\n", b["sessions"].size(), est,
                         b.value("rejected", uint64_t{0}), b.value("stale", false) ? ", routes STALE (gobgpd lost)" : "",
                         b.contains("error") ? ", " + b["error"].get<std::string>() : "");
      for (const auto& ss : b["sessions"])
        out << fmt::format("    {:<16} {:<16} AS {:<10} {:<11} received {} accepted {} rejected {}\n",
                           ss["neighbor"].get<std::string>(), ss["description"].get<std::string>(),
                           ss["peer_as"].get<uint32_t>(), ss["state"].get<std::string>(), ss["received"].get<uint64_t>(),
                           ss["accepted"].get<uint64_t>(), ss["rejected"].get<uint64_t>());
      if (b.contains("announced")) {
        std::string a;
        for (const auto& p : b["announced"]) a += " " + p.get<std::string>();
        out << "  announced:" << (a.empty() ? " -" : a) << "\n";
      }
      if (b.contains("routes"))
        for (const auto& [prefix, r] : b["routes"].items()) {
          std::string m;
          for (const auto& x : r["members"]) m += " " + x["ifname"].get<std::string>() + "(" + x["peer"].get<std::string>() + ")";
          out << fmt::format("  group {:<22} ->{}\n", prefix, m);
        }
      std::string d;
      for (const auto& x : b["daemons"])
        d += fmt::format(" {} pid {} ({} restarts)", x["name"].get<std::string>(), x["pid"].get<int>(), x["restarts"].get<int>());
      out << "  daemons:" << (d.empty() ? " none" : d) << fmt::format("; exits recorded: {}\n", b.value("daemon_exits", 0));
    }
    if (n.contains("hostnet")) {
      const auto& h = n["hostnet"];
      std::string kind = "?";
      for (const auto& i : n.value("interfaces", nlohmann::json::array()))
        if (i.value("name", "") == "jnic0") kind = i.value("kind", "?");
      out << fmt::format("  job container {} ({} links jnicN <-> ethN), egress {}\n", h.value("container_netns", "?"),
                         kind, h.value("mode", "?"));
      for (const auto& x : h.value("nics", nlohmann::json::array())) {
        std::string bpf;
        if (x.contains("bpf"))
          bpf = fmt::format("  bpf: {} flows active, {} total, {} moved away", x["bpf"].value("flows_active", uint64_t{0}),
                            x["bpf"].value("flows_total", uint64_t{0}), x["bpf"].value("moved", uint64_t{0}));
        out << fmt::format("    {} numa {} {:<4}{}\n", x.value("ifname", "?"), x.value("numa", 0),
                           x.value("up", false) ? "up" : "DOWN", bpf);
      }
    }
    if (n.contains("injector")) {
      const auto& v = n["injector"];
      out << fmt::format("  VIP injector ({}): {} {}\n", v.value("mode", "?"), v.value("task4", ""), v.value("task6", ""));
      for (const auto& ss : v.value("sessions", nlohmann::json::array())) {
        std::string ann;
        for (const auto& k : ss["announced_nics"]) ann += " nic" + std::to_string(k.get<int>());
        out << fmt::format("    {} -> {} {:<11} announcing:{}{}\n", ss.value("local", "?"), ss.value("peer", "?"),
                           ss.value("state", "?"), ann.empty() ? " nothing" : ann,
                           ss.value("last_error", "").empty() ? "" : "  last error: " + ss["last_error"].get<std::string>());
      }
    }
    if (!n.contains("interfaces")) continue;
    for (const auto& i : n["interfaces"]) {
      std::string addrs;
      for (const auto& a : i["addresses"]) addrs += (addrs.empty() ? "" : " ") + a.get<std::string>();
      out << fmt::format("  {:<7} {:<4} {:<10} {:<18} {:>9} tx {:>12} rx {:>12}  {}\n",
                         i["name"].get<std::string>(), i["up"].get<bool>() ? "up" : "down",
                         i["carrier"].get<bool>() ? "carrier" : "no-carrier",
                         i.value("peer", "-"),
                         i.contains("rate_bps") ? format_rate(i["rate_bps"].get<uint64_t>()) : "unshaped",
                         i["tx_bytes"].get<uint64_t>(), i["rx_bytes"].get<uint64_t>(), addrs);
    }
  }
  return kExitOk;
}

// ---- exec ----

int cmd_exec(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto dd = std::find(args.begin(), args.end(), "--");
  std::vector<std::string> before(args.begin(), dd);
  std::vector<std::string> command;
  if (dd != args.end()) command.assign(dd + 1, args.end());
  po::options_description desc("options");
  std::string run, node;
  desc.add_options()("run", po::value(&run)->required(), "run id")("node", po::value(&node)->required(),
                                                                    "node name");
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
  spec.env = {{"LANES_RUN", run}, {"LANES_NODE", node}};
  // ^C goes to the command; lanes waits for it
  struct sigaction ign {}, old_int{}, old_quit{};
  ign.sa_handler = SIG_IGN;
  ::sigaction(SIGINT, &ign, &old_int);
  ::sigaction(SIGQUIT, &ign, &old_quit);
  auto d = Daemon::start(spec);
  if (!d) {
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGQUIT, &old_quit, nullptr);
    err << "lanes exec: " << d.error().what() << "\n";
    return 127;
  }
  int rc = d.value().wait();
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGQUIT, &old_quit, nullptr);
  return rc;
}

// ---- down and clean ----

std::string pids_text(const std::vector<pid_t>& pids) {
  std::string s;
  for (pid_t p : pids) s += (s.empty() ? "" : " ") + std::to_string(p);
  return s;
}

int cmd_down(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description desc("options");
  std::string run;
  desc.add_options()("run", po::value(&run), "run id (may be omitted when only one run exists)")(
      "all", "take every run down that no lanes process is using");
  po::positional_options_description pos;
  pos.add("run", 1);
  po::variables_map vm;
  if (!parse(args, cmd_named("down"), desc, pos, vm, out)) return kExitOk;
  if (vm.count("run") && !RunRegistry::valid_id(run))
    throw UsageError(fmt::format("'{}' is not a run id (1-8 of a-z, 0-9)", run));
  if (!have_privileges(err, "down")) return kExitFailure;
  RunRegistry reg;
  std::vector<std::string> ids;
  if (vm.count("all")) {
    if (!run.empty()) throw UsageError("give either RUN or --all");
    ids = reg.list();
  } else if (run.empty()) {
    ids = reg.list();
    if (ids.size() > 1) {
      err << "lanes down: " << ids.size() << " runs exist; name one or use --all:";
      for (const auto& i : ids) err << " " << i;
      err << "\n";
      return kExitBadInput;
    }
  } else {
    auto o = reg.owner_of(run);
    if (!reg.exists(run) && o && o->state_dir != reg.base() && RunRegistry(o->state_dir).exists(run)) {
      err << "lanes down: run '" << run << "' belongs to state dir " << o->state_dir << " (LANES_STATE_DIR="
          << o->state_dir << " lanes down " << run << ")\n";
      return kExitBadInput;
    }
    if (!reg.exists(run) && (list_netns(RunRegistry::netns_prefix(run)).empty() || !o)) {
      err << "lanes down: no run '" << run << "' (lanes status lists the runs)\n";
      return kExitBadInput;
    }
    ids = {run};
  }
  if (ids.empty()) {
    out << "no runs to take down\n";
    return kExitOk;
  }
  int rc = kExitOk;
  for (const auto& id : ids) {
    auto r = remove_run(reg, id);
    for (const auto& e : r.errors) err << "lanes: " << e << "\n";
    if (!r.ok) rc = kExitFailure;
    out << fmt::format("run {} {}: {} namespaces, {} processes removed in {}\n", id,
                       r.ok ? "down" : "partly down", r.report.namespaces, r.report.processes, fmt_ms(r.took));
  }
  return rc;
}

int cmd_clean(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description desc("options");
  desc.add_options()("all", "also take down runs that are up (every run no lanes process is using)")(
      "dry-run,n", "list what a clean would remove, and remove nothing");
  po::positional_options_description pos;
  po::variables_map vm;
  if (!parse(args, cmd_named("clean"), desc, pos, vm, out,
             "Removes what dead runs of this state dir left behind: runs whose lanes process died\n"
             "(while building, tearing down, or running a scenario), runs whose supervisor died,\n"
             "and the namespaces and processes of runs whose directory is gone. Runs\n"
             "that are up stay unless --all is given; runs a live lanes process holds, runs of\n"
             "other state dirs and objects no owner record proves to be lanes' are never touched."))
    return kExitOk;
  bool dry = vm.count("dry-run");
  bool all = vm.count("all");
  if (!dry && !have_privileges(err, "clean")) return kExitFailure;
  RunRegistry reg;
  CleanPlan plan = plan_clean(reg, all);
  int rc = kExitOk;
  int namespaces = 0, processes = 0;
  for (const auto& t : plan.targets) {
    if (dry) {
      out << fmt::format("would remove run {} ({}): {} namespaces, {} processes{}{}\n", t.id, t.why,
                         t.namespaces.size(), t.processes.size(),
                         t.processes.empty() ? "" : " (pids " + pids_text(t.processes) + ")",
                         t.has_dir ? ", its directory" : "");
      continue;
    }
    auto r = remove_run(reg, t.id);
    if (r.busy) {  // it came to life (or another clean took it) since the plan
      out << fmt::format("left alone: run {}: a lanes process took it since this clean looked; not touched\n",
                         t.id);
      continue;
    }
    for (const auto& e : r.errors) err << "lanes: " << e << "\n";
    if (!r.ok) rc = kExitFailure;
    namespaces += r.report.namespaces;
    processes += r.report.processes;
    out << fmt::format("removed run {} ({}): {} namespaces, {} processes\n", t.id, t.why, r.report.namespaces,
                       r.report.processes);
  }
  for (const auto& id : plan.stale_records) {
    if (dry) {
      out << fmt::format("would remove the owner record of run {} (the run exists nowhere)\n", id);
    } else {
      reg.forget(id);
      out << fmt::format("removed the owner record of run {} (the run exists nowhere)\n", id);
    }
  }
  for (const auto& path : plan.hidden_dirs) {
    std::error_code ec;
    if (!dry) std::filesystem::remove_all(path, ec);
    out << fmt::format("{} {} (a lanes process died creating or removing a run there)\n",
                       dry ? "would remove" : "removed", path);
  }
  for (const auto& why : plan.left_alone) out << "left alone: " << why << "\n";
  if (!dry)
    out << fmt::format("clean: {} runs removed ({} namespaces, {} processes)", plan.targets.size(), namespaces,
                       processes);
  else
    out << fmt::format("clean --dry-run: {} runs would be removed", plan.targets.size());
  if (plan.kept_up)
    out << fmt::format("; {} run{} up kept (--all removes them)", plan.kept_up, plan.kept_up == 1 ? "" : "s");
  if (plan.live) out << fmt::format("; {} run{} in use by a lanes process", plan.live, plan.live == 1 ? "" : "s");
  out << "\n";
  return rc;
}

// ---- switch-config ----

int cmd_switch_config(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description desc("options");
  std::string file, node;
  desc.add_options()("file", po::value(&file)->required(), "topology file")(
      "node", po::value(&node)->required(), "a rack switch or spine")("agent", "print the FIB agent's JSON instead");
  po::positional_options_description pos;
  pos.add("file", 1).add("node", 1);
  po::variables_map vm;
  if (!parse(args, cmd_named("switch-config"), desc, pos, vm, out,
             "Prints the gobgpd TOML (or, with --agent, the FIB agent's JSON) that lanes renders\n"
             "for NODE. Nothing is started."))
    return kExitOk;
  auto t = load_topology(file);
  int n = t.find_node(node);
  if (n < 0 || (t.nodes[n].kind != NodeKind::rack_switch && t.nodes[n].kind != NodeKind::spine)) {
    err << "lanes switch-config: '" << node << "' is not a rack switch or spine of " << file << "\n";
    return kExitBadInput;
  }
  if (vm.count("agent"))
    out << render_agent_config(t, n).dump(2) << "\n";
  else
    out << render_gobgp_config(t, n);
  return kExitOk;
}

// ---- features ----

int cmd_features(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
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
  if (!f.notes.empty()) out << "notes: " << f.notes << "\n";
  out << fmt::format("limits that bound a run's size (lanes validate warns when a topology nears one):\n"
                     "  cpus              {}\n  memory available  {:.1f} GiB (daemons: about 10 MiB per job host, 72 "
                     "MiB per switch)\n  kernel.pid_max    {}\n  threads-max       {}\n  open files        {} "
                     "(per daemon; gobgpd holds one per BGP session)\n  neighbour limit   {} (gc_thresh3; lanes' "
                     "permanent entries do not count)\n  receive backlog   {} packets per CPU (netdev_max_backlog, "
                     "shared by every namespace: a burst beyond it drops, e.g. SYNs connected 1 s late)\n",
                     lim.cpus, static_cast<double>(lim.mem_available) / (1u << 30), lim.pid_max, lim.threads_max,
                     lim.nofile, lim.gc_thresh3, lim.netdev_max_backlog);
  return kExitOk;
}

// ---- supervise (internal) ----

int cmd_supervise(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  po::options_description desc("options");
  std::string run, state_dir = RunRegistry::default_base(), owner;
  desc.add_options()("run", po::value(&run)->required(), "run id")(
      "state-dir", po::value(&state_dir), "the run's state dir")(
      "owner", po::value(&owner), "PID:START_TIME of the lanes process the run belongs to while it is held");
  po::positional_options_description pos;
  pos.add("run", 1);
  po::variables_map vm;
  if (!parse(args, cmd_named("supervise"), desc, pos, vm, out,
             "Internal: started by 'lanes up'. Runs gobgpd and the FIB agent on every switch of RUN,\n"
             "restarts them when they exit and records it in the run's events.jsonl."))
    return kExitOk;
  if (!RunRegistry::valid_id(run)) throw UsageError(fmt::format("'{}' is not a run id", run));
  SupervisorOwner o;
  if (!owner.empty()) {
    auto colon = owner.find(':');
    try {
      if (colon == std::string::npos) throw std::invalid_argument(owner);
      o.pid = static_cast<pid_t>(std::stol(owner.substr(0, colon)));
      o.start_time = std::stoull(owner.substr(colon + 1));
    } catch (const std::exception&) {
      throw UsageError(fmt::format("--owner {}: expected PID:START_TIME", owner));
    }
  }
  return run_supervisor(RunRegistry(state_dir), run, o);
}

const std::vector<Command> kBuiltins = {
    {"validate", "FILE...", "check topology, scenario and suite files (nothing is built)", cmd_validate},
    {"up", "FILE [--run-id ID] [--json]", "build a topology and leave it running", cmd_up},
    {"status", "[RUN [NODE...]] [--full] [--json]", "list runs, or show one run's nodes and interfaces", cmd_status},
    {"exec", "RUN NODE -- CMD...", "run a command inside a node's namespace", cmd_exec},
    {"down", "[RUN | --all]", "take a run down and remove everything it made", cmd_down},
    {"clean", "[--all] [--dry-run]", "remove what dead runs left behind", cmd_clean},
    {"graph", "FILE [--format dot|mermaid]", "draw a topology as Graphviz DOT or Mermaid", cmd_graph},
    {"features", "[--json]", "show the kernel features lanes detected", cmd_features},
    {"switch-config", "FILE NODE [--agent]", "print the gobgpd or FIB agent config of a switch", cmd_switch_config},
    {"supervise", "RUN --state-dir DIR [--owner PID:START]", "(internal) keep a run's daemons alive",
     cmd_supervise},
};

}  // namespace

bool have_privileges(std::ostream& err, const char* what) {
  if (::geteuid() == 0) return true;
  err << "lanes " << what << ": needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN to create network "
      << "namespaces)\n";
  return false;
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

int run_cli(int argc, char** argv, std::ostream& out, std::ostream& err) {
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
      return c.fn(rest, out, err);
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

}  // namespace lanes::testbed
