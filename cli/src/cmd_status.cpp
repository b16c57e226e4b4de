// `lanes status`.

#include "commands.hpp"
#include "over_slurm.hpp"

#include <unistd.h>

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <atomic>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "lanes/testbed/netns.hpp"
#include "lanes/testbed/role.hpp"
#include "lanes/testbed/run_registry.hpp"
#include "lanes/testbed/supervisor.hpp"
#include "lanes/testbed/topology_loader.hpp"

namespace po = boost::program_options;

namespace lanes::cli::commands {

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
nlohmann::json run_detail_json(const Roles& roles, const RunRegistry& reg, const std::string& id, const Topology& full,
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
                   {"family", to_string(n.job->family)},
                   {"egress", to_string(n.job->egress)},
                   {"vip", to_string(n.job->vip)}};
      // the task IPs of the job's families only
      if (n.job->has4()) jn["job"]["task_ip4"] = n.job->task_ip4.to_string();
      if (n.job->has6()) jn["job"]["task_ip6"] = n.job->task_ip6.to_string();
    }
    auto ns = Netns::open(nsname);
    jn["present"] = ns.ok();
    if (ns) netns[i] = std::move(ns).value();
    nodes[i] = std::move(jn);
  }
  // every role's view of every node (a switch's asks its gobgpd), beside the kernels
  parallel_for(count, 4, [&](size_t i) {
    const Node& n = topo->nodes[i];
    if (nodes[i].is_null()) return;  // not asked for
    nlohmann::json extra = nlohmann::json::object();
    int fd = netns[i] ? netns[i]->fd() : -1;
    for (const auto& role : roles)
      if (auto v = role->status(reg, id, n, fd, /*detailed=*/true); !v.is_null()) extra[role->status_key()] = std::move(v);
    if (netns[i]) {
      auto ifs = interfaces_json(netns[i]->fd(), RunRegistry::netns_name(id, n.name), static_cast<int>(i), peer_of);
      if (!ifs.is_null()) extra["interfaces"] = std::move(ifs);
    }
    nodes[i].update(extra);
  });
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

// The role whose status lanes status files under KEY (null if none).
const Role* role_of(const Roles& roles, std::string_view key) {
  for (const auto& r : roles)
    if (key == r->status_key()) return r.get();
  return nullptr;
}

nlohmann::json run_fleet_json(const Roles& roles, const RunRegistry& reg, const std::string& id, const Topology& topo) {
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
    if (const Role* bgp = role_of(roles, "bgp"); ns && bgp) {
      auto b = bgp->status(reg, id, n, ns.value().fd(), /*detailed=*/false);
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
      if (const Role* host = role_of(roles, "hostnet"))
        if (auto st = host->status(reg, id, n, -1, /*detailed=*/false); !st.is_null()) {
          ++reporting;
          for (const auto& x : st.value("nics", nlohmann::json::array())) nics_up += x.value("up", false);
        }
      if (const Role* vip = role_of(roles, "injector"))
        if (auto st = vip->status(reg, id, n, -1, /*detailed=*/false); !st.is_null())
          for (const auto& s : st.value("sessions", nlohmann::json::array())) {
            ++sessions;
            established += s.value("state", "") == "established";
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

namespace {
// "198.19.0.1 2001:2:0:100::1", or the one of a single-family job
std::vector<std::string> task_ips_of(const nlohmann::json& job) {
  std::vector<std::string> out;
  for (const char* k : {"task_ip4", "task_ip6"})
    if (job.contains(k)) out.push_back(job[k].get<std::string>());
  return out;
}
}  // namespace

namespace {

// Every run, a line each (or as JSON).
void print_runs(RunRegistry& reg, bool json, std::ostream& out) {
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& id : reg.list()) runs.push_back(run_summary_json(reg, id));
  if (json) {
    out << nlohmann::json{{"runs", runs}}.dump(2) << "\n";
    return;
  }
  if (runs.empty()) {
    out << "no runs (lanes up FILE starts one)\n";
    return;
  }
  out << fmt::format("{:<10} {:<9} {:<16} {:>10} {:>6}\n", "RUN", "PHASE", "TOPOLOGY", "NAMESPACES", "AGE");
  for (const auto& r : runs)
    out << fmt::format("{:<10} {:<9} {:<16} {:>10} {:>6}\n", r["id"].get<std::string>(),
                       r["phase"].get<std::string>(), r.value("topology", "?"),
                       r["namespaces"].get<size_t>(), age_of(r.value("created_unix", int64_t{0})));
}

// A run of more than kSummaryAboveHosts hosts: a line per switch and per rack.
void print_fleet(const nlohmann::json& f, const std::string& run, const Topology& topo, size_t hosts, std::ostream& out) {
  out << fmt::format("run {}: {} ({}), topology '{}' from {}\n", run, f["phase"].get<std::string>(),
                     age_of(f.value("created_unix", int64_t{0})), f.value("topology", "?"), f.value("topology_file", "?"));
  out << fmt::format("{} nodes, {} hosts: summarised (lanes status {} NODE... or --full for nodes in full)\n",
                     topo.nodes.size(), hosts, run);
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
}

// A run node by node: each node's line, each role's view of it, its interfaces.
int print_detail(const CliContext& cli, const nlohmann::json& j, const std::string& run, std::ostream& out) {
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
      extra = fmt::format(" job {} task {} egress {} vip {}", n["job"]["name"].get<std::string>(),
                          fmt::join(task_ips_of(n["job"]), " "), n["job"]["egress"].get<std::string>(),
                          n["job"]["vip"].get<std::string>());
    out << fmt::format("{} ({}){}{}\n", n["name"].get<std::string>(), n["kind"].get<std::string>(), extra,
                       n["present"].get<bool>() ? "" : "  [namespace missing]");
    // each role prints its own view of the node
    for (const auto& role : cli.roles)
      if (n.contains(role->status_key())) role->print_status(n[role->status_key()], n, out);
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

}  // namespace

int cmd_status(const CliContext& cli, const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
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
    print_runs(reg, json, out);
    if (!json)
      for (const auto& id : SlurmRun::list())
        if (auto r = SlurmRun::load(id))
          out << fmt::format("run {} is over {} machines of Slurm job {} (lanes status {})\n", id, r->machines.size(),
                             r->job_id, id);
    return kExitOk;
  }
  if (auto r = SlurmRun::load(run)) {  // over several machines: each one's last word
    status_over_slurm(*r, json, out);
    return kExitOk;
  }
  if (!reg.exists(run)) {
    err << "lanes status: no run '" << run << "' (lanes status lists the runs)\n";
    return kExitBadInput;
  }
  // a run's nodes are read inside its namespaces (an ordinary user's are in the user's world)
  if (!have_privileges(err, "status")) return kExitFailure;
  std::optional<Topology> topo;
  try {  // as the run loaded it: with the overrides of the scenario's phase
    topo = load_run_topology(reg, run);
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
    auto f = run_fleet_json(cli.roles, reg, run, *topo);
    if (json) {
      out << f.dump(2) << "\n";
      return kExitOk;
    }
    print_fleet(f, run, *topo, hosts, out);
    return kExitOk;
  }
  std::set<std::string> wanted(only.begin(), only.end());
  auto j = run_detail_json(cli.roles, reg, run, *topo, wanted);
  if (json) {
    out << j.dump(2) << "\n";
    return kExitOk;
  }
  return print_detail(cli, j, run, out);
}

}  // namespace lanes::cli::commands
