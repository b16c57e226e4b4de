// `lanes up --over-slurm`, `lanes shard`, and the over-Slurm side of
// `lanes down` and `lanes status`.

#include "over_slurm.hpp"

#include <signal.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

#include "commands.hpp"
#include "lanes/scenarios/fabric_view.hpp"
#include "lanes/switches/convergence.hpp"
#include "lanes/hostnet/hostnet.hpp"
#include "lanes/vip/deploy.hpp"
#include "lanes/testbed/daemon_main.hpp"
#include "lanes/testbed/interrupt.hpp"
#include "lanes/testbed/limits.hpp"
#include "lanes/testbed/live_run.hpp"
#include "lanes/testbed/log.hpp"
#include "lanes/testbed/netns.hpp"
#include "lanes/testbed/partition.hpp"
#include "lanes/testbed/process.hpp"
#include "lanes/testbed/run_registry.hpp"
#include "lanes/testbed/slurm_run.hpp"
#include "lanes/testbed/supervisor.hpp"
#include "lanes/testbed/topology_loader.hpp"
#include "lanes/testbed/wait.hpp"

namespace po = boost::program_options;

namespace lanes::cli::commands {

using Clock = std::chrono::steady_clock;

namespace {

std::string describe(const MachineWord& w) {
  const auto& d = w.detail;
  std::string more;
  if (d.contains("nodes")) more += fmt::format(" {} nodes, {} tunnels", d.value("nodes", 0), d.value("tunnels", 0));
  if (d.contains("task_ips"))
    more += fmt::format(" {}/{} task IPs, {}/{} rack routes", d.value("task_ips_full", 0), d.value("task_ips", 0),
                        d.value("aggregates_present", 0), d.value("aggregates", 0));
  if (d.contains("error")) more += " " + d.value("error", std::string());
  return more;
}

// a machine whose shard ended without a word of its teardown
bool lost(const MachineWord& w, bool running) { return !running && !w.down && !w.failed; }

}  // namespace

int down_over_slurm(const SlurmRun& r, std::ostream& out, std::ostream& err) {
  auto t0 = Clock::now();
  auto rep = r.down();
  for (const auto& c : rep.cleaned) out << c;
  for (const auto& e : rep.errors) err << "lanes down: " << e << "\n";
  out << fmt::format("run {} {} over {} machines: {} namespaces, {} processes removed in {}\n", r.run_id,
                     rep.errors.empty() ? "down" : "partly down", r.machines.size(), rep.namespaces, rep.processes,
                     fmt_ms(std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0)));
  return rep.errors.empty() ? kExitOk : kExitFailure;
}

void status_over_slurm(const SlurmRun& r, bool json, std::ostream& out) {
  auto words = r.words();
  bool alive = r.step_running();
  if (json) {
    nlohmann::json j = r.to_json();
    j["step_running"] = alive;
    nlohmann::json ms = nlohmann::json::array();
    for (size_t i = 0; i < r.machines.size(); ++i)
      ms.push_back({{"name", r.machines[i].name},
                    {"addr", r.machines[i].addr.to_string()},
                    {"last", words[i].last},
                    {"detail", words[i].detail},
                    {"lost", lost(words[i], alive)}});
    j["machines"] = ms;
    out << j.dump(2) << "\n";
    return;
  }
  out << fmt::format("run {} over {} machines of Slurm job {} ({}), topology {}\n", r.run_id, r.machines.size(),
                     r.job_id, alive ? "its shards' step is running" : "its shards' step has ended",
                     r.topology_file);
  for (size_t i = 0; i < r.machines.size(); ++i) {
    if (lost(words[i], alive)) {
      std::string state = node_state(r.machines[i].name);
      out << fmt::format("  {:<10} {:<16} lost{}: its shard ended without reporting its teardown (it said '{}' last; "
                         "lanes down {} cleans there)\n",
                         r.machines[i].name, r.machines[i].addr.to_string(),
                         state.empty() ? "" : " (Slurm: " + state + ")", words[i].last, r.run_id);
    }
    else
      out << fmt::format("  {:<10} {:<16} {}{}\n", r.machines[i].name, r.machines[i].addr.to_string(), words[i].last,
                         describe(words[i]));
  }
}

int up_over_slurm(const OverSlurmUp& o, std::ostream& out, std::ostream& err) {
  auto alloc = read_allocation();
  if (!alloc) {
    err << "lanes up: --over-slurm: " << message_of(alloc.error()) << "\n";
    return kExitBadInput;
  }
  const int k = static_cast<int>(alloc.value().machines.size());
  Topology topo = load_topology(o.file);  // bad input: exit 2, nothing created
  Placement placement = place(topo, k);   // cannot be split: exit 2, with its line
  SlurmRunOptions so;
  so.run_id = o.run_id;
  so.topology_file = o.file;
  so.port = o.port;
  so.underlay_mtu = o.underlay_mtu;
  auto started = SlurmRun::start(alloc.value(), so);
  if (!started) {
    err << "lanes up: " << message_of(started.error()) << "\n";
    return started.error().code().value() == EEXIST ? kExitBadInput : kExitFailure;
  }
  const SlurmRun& r = started.value();
  install_interrupt_handlers();
  out << fmt::format("run {}: {} over {} machines of Slurm job {} ({} tunnels)\n", r.run_id, summary_of(topo), k,
                     r.job_id, placement.cross.size());
  out.flush();
  const auto t0 = Clock::now();
  std::vector<MachineWord> words;
  std::string why = r.follow(
      o.wait.has_value(), o.wait,
      [&](const ShardEvent& e) {
        if (e.event == "up")
          out << fmt::format("  {}: up, {} nodes and {} tunnels in {}\n", e.name, e.detail.value("nodes", 0),
                             e.detail.value("tunnels", 0),
                             fmt_ms(std::chrono::milliseconds(e.detail.value("took_ms", 0))));
        else if (e.event == "converged" && o.wait)
          out << fmt::format("  {}: converged, {} task IPs with a next hop per NIC, {} rack routes\n", e.name,
                             e.detail.value("task_ips", 0), e.detail.value("aggregates", 0));
        out.flush();
      },
      [] { return interrupted(); }, words);
  auto took = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0);
  bool timed_out = why == "timeout";
  if (!why.empty() && !timed_out) {
    err << "lanes up: run " << r.run_id << " failed: " << why << "\n";
    std::ostringstream sink;
    (void)down_over_slurm(r, sink, err);
    err << "lanes up: " << sink.str();
    return kExitFailure;
  }
  if (o.json) {
    nlohmann::json j = r.to_json();
    j["took_ms"] = took.count() / 1000;
    j["converged"] = std::all_of(words.begin(), words.end(), [](const MachineWord& w) { return w.converged; });
    nlohmann::json ms = nlohmann::json::array();
    for (size_t i = 0; i < words.size(); ++i)
      ms.push_back({{"name", r.machines[i].name}, {"last", words[i].last}, {"detail", words[i].detail}});
    j["machines"] = ms;
    out << j.dump(2) << "\n";
  }
  if (timed_out) {
    err << fmt::format("lanes up: gave up after --wait with run {} not converged on every machine (the run stays "
                       "up: lanes status {}; lanes down {})\n",
                       r.run_id, r.run_id, r.run_id);
    return kExitFailure;
  }
  if (!o.json)
    out << fmt::format("run {} is up over {} machines in {}{} (lanes status {}; lanes down {})\n", r.run_id, k,
                       fmt_ms(took), o.wait ? ", BGP converged on every machine's switches" : "", r.run_id, r.run_id);
  return kExitOk;
}

// `lanes shard`: one machine's part of a run over several, started by srun
// on every machine of the allocation. It builds and deploys its machine's
// nodes and tunnels, says so on stdout (one JSON line per event), follows
// its switches' convergence, and stays until SIGTERM (scancel, lanes
// down), then takes its part down.
int cmd_shard(const CliContext& cli, const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description desc("options");
  std::string file, run_id, machines_text;
  unsigned port = kVxlanPort, mtu = 1500, bfd_cpus = 0;
  std::vector<std::string> override_args;
  desc.add_options()("file", po::value(&file)->required(), "topology file")(
      "run-id", po::value(&run_id)->required(), "the run's id (the same on every machine)")(
      "machines", po::value(&machines_text)->required(),
      "NAME=ADDRESS,... every machine of the run in Slurm's order")(
      "port", po::value(&port), "UDP port of the tunnels")(
      "underlay-mtu", po::value(&mtu), "the MTU the tunnels are sized for (the same on every machine)")(
      "bfd-cpus", po::value(&bfd_cpus), "the CPUs BFD's default interval is fitted to (the same on every machine)")(
      "override", po::value(&override_args), "KEY=VALUE: a scenario phase's override of the topology (repeatable)");
  po::positional_options_description pos;
  pos.add("file", 1);
  po::variables_map vm;
  if (!parse(args, cmd_named("shard"), desc, pos, vm, out,
             "Run by srun on every machine of a run over several (lanes up --over-slurm), not by\n"
             "people: builds this machine's part, prints one JSON line per event on stdout,\n"
             "and stays until SIGTERM, then takes its part down."))
    return kExitOk;
  if (!RunRegistry::valid_id(run_id)) throw UsageError(fmt::format("--run-id '{}': not a run id", run_id));
  if (port == 0 || port > 65535) throw UsageError(fmt::format("--port {}: give 1-65535", port));
  auto machines = parse_machines_arg(machines_text);
  auto me = this_machine(machines);
  if (!me) {
    err << "lanes shard: this machine is none of --machines (SLURMD_NODENAME and SLURM_NODEID do not say which)\n";
    return kExitBadInput;
  }
  ShardEvent ev{*me, machines[static_cast<size_t>(*me)].name, "", {}};
  auto say = [&](const std::string& event, nlohmann::json detail) {
    ev.event = event;
    ev.detail = std::move(detail);
    out << to_line(ev) << std::endl;
  };
  auto fail = [&](const std::string& why) {
    say("failed", {{"error", why}});
    return kExitFailure;
  };
  Overrides overrides;
  for (const auto& kv : override_args) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError(fmt::format("--override '{}': give KEY=VALUE", kv));
    overrides[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  Topology topo;
  Placement placement;
  try {
    topo = load_topology(file, overrides);
    if (bfd_cpus) (void)adapt_bfd_default(topo, bfd_cpus);
    placement = place(topo, static_cast<int>(machines.size()));
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  Shard shard;
  shard.placement = &placement;
  shard.machine = *me;
  for (const auto& m : machines) shard.underlay.push_back(m.addr);
  shard.port = static_cast<uint16_t>(port);
  shard.underlay_mtu = mtu;
  // the underlay as this machine has it: its address, and room for the tunnels
  auto own = mtu_of_address(machines[static_cast<size_t>(*me)].addr);
  if (!own) return fail(fmt::format("the underlay: {}", message_of(own.error())));
  if (own.value() < mtu)
    return fail(fmt::format("the interface holding {} has MTU {}, below the {} the tunnels were sized for on the first "
                            "machine (lanes up --over-slurm --underlay-mtu {})",
                            machines[static_cast<size_t>(*me)].addr.to_string(), own.value(), mtu, own.value()));
  install_interrupt_handlers();
  RunRegistry reg;
  LiveRunOptions lo;
  lo.run_id = run_id;
  lo.topology_xml = read_file(file);
  lo.topology_file = std::filesystem::absolute(file).string();
  lo.overrides = overrides;
  lo.roles = cli.roles;
  lo.shard = &shard;
  lo.held = true;  // a killed shard leaves a dead run: its supervisor stops, lanes clean removes it
  lo.daemons_timeout = std::chrono::seconds(120);
  const auto t0 = Clock::now();
  auto run = LiveRun::start(topo, reg, lo);
  if (!run) return fail(message_of(run.error()));
  const auto& share = placement.share.at(static_cast<size_t>(*me));
  say("up", {{"nodes", share.nodes.size()},
             {"tunnels", share.tunnels},
             {"hosts", share.hosts},
             {"took_ms", std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count()}});
  const auto t_up = Clock::now();
  auto here = [&](int node) { return shard.local(node); };
  auto netlink = [&](int node) -> Netlink& { return run.value().tb().netlink(node); };
  std::optional<switches::Convergence> last;
  // the step this shard is a task of, as the controller knows it: when the
  // controller no longer lists it (cancelled, its job ended, this machine
  // given up for lost because its slurmd is gone) the shard takes its part
  // down on its own, whatever signal did not reach it
  std::string step;
  if (const char* j = std::getenv("SLURM_JOB_ID"), *st = std::getenv("SLURM_STEP_ID"); j && st && *j && *st)
    step = std::string(j) + "." + st;
  auto next_look = Clock::now() + std::chrono::seconds(5);
  std::string ended;
  while (!interrupted()) {
    if (!step.empty() && Clock::now() >= next_look) {
      next_look = Clock::now() + std::chrono::seconds(5);
      if (auto listed = step_listed(step); listed && !*listed) {
        ended = "step " + step + " is no longer listed by the controller";
        break;
      }
    }
    auto c = switches::check_convergence(topo, netlink, here);
    auto detail = [&] {
      return nlohmann::json{{"task_ips", c.task_ips},
                            {"task_ips_full", c.task_ips_full},
                            {"aggregates", c.aggregates},
                            {"aggregates_present", c.aggregates_present},
                            {"missing", c.first_missing},
                            {"after_ms",
                             std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t_up).count()}};
    };
    if (auto word = shard_word(last, c); !word.empty()) say(word, detail());
    last = c;
    std::this_thread::sleep_for(std::chrono::milliseconds(c.done() ? 1000 : 250));
  }
  auto rep = run.value().down();
  nlohmann::json errors = rep.errors;
  if (!ended.empty()) err << "lanes shard: " << ended << ": its part taken down\n";
  say("down", {{"namespaces", rep.namespaces}, {"processes", rep.processes}, {"errors", errors}});
  return rep.errors.empty() ? kExitOk : kExitFailure;
}

std::string shard_word(const std::optional<switches::Convergence>& last, const switches::Convergence& now) {
  if (now.done()) return !last || !last->done() ? "converged" : "";
  bool changed = !last || last->done() || last->task_ips_full != now.task_ips_full ||
                 last->aggregates_present != now.aggregates_present;
  return changed ? "progress" : "";
}

// `lanes nic-counters`: the byte counters of NICs of this machine, a line
// per tick, for a scenario's first rank on another machine (its NIC
// sampler). Ticks are on the wall clock, the basis every machine shares
// (NTP on a cluster; one clock in the lab): tick i is at T0 + i * EVERY.
int cmd_nic_counters([[maybe_unused]] const CliContext& cli, const std::vector<std::string>& args, std::ostream& out,
                     [[maybe_unused]] std::ostream& err) {
  po::options_description desc("options");
  std::string run;
  std::vector<std::string> nics;
  int64_t t0_ns = 0;
  unsigned every_ms = 100;
  desc.add_options()("run", po::value(&run)->required(), "run id")(
      "nic", po::value(&nics)->required()->multitoken(), "NODE:IFNAME, one or more")(
      "t0-unix-ns", po::value(&t0_ns)->required(), "tick 0 on the wall clock, in ns since the epoch")(
      "every-ms", po::value(&every_ms), "the tick");
  po::positional_options_description pos;
  pos.add("run", 1);
  po::variables_map vm;
  if (!parse(args, cmd_named("nic-counters"), desc, pos, vm, out,
             "Run by a scenario's first rank through srun, not by people: prints the NICs' byte\n"
             "counters, one JSON line per tick, {\"i\": TICK, \"c\": [[TX, RX], ...]}, until SIGTERM."))
    return kExitOk;
  if (!RunRegistry::valid_id(run)) throw UsageError(fmt::format("'{}' is not a run id", run));
  if (every_ms == 0) throw UsageError("--every-ms: give at least 1");
  struct Where {
    std::string ns, ifname;
  };
  std::vector<Where> where;
  std::map<std::string, Netlink> nl;
  for (const auto& n : nics) {
    auto colon = n.find(':');
    if (colon == std::string::npos || colon == 0) throw UsageError(fmt::format("--nic '{}': give NODE:IFNAME", n));
    Where w{RunRegistry::netns_name(run, n.substr(0, colon)), n.substr(colon + 1)};
    if (!nl.count(w.ns)) {
      auto ns = Netns::open(w.ns);
      if (!ns) {
        err << "lanes nic-counters: " << message_of(ns.error()) << "\n";
        return kExitFailure;
      }
      auto x = Netlink::open_in(ns.value().fd(), w.ns);
      if (!x) {
        err << "lanes nic-counters: " << message_of(x.error()) << "\n";
        return kExitFailure;
      }
      nl.emplace(w.ns, std::move(x).value());
    }
    where.push_back(std::move(w));
  }
  install_interrupt_handlers();
  const int64_t every_ns = int64_t{every_ms} * 1'000'000;
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  int64_t now_ns = int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
  int64_t i = now_ns <= t0_ns ? 0 : (now_ns - t0_ns) / every_ns + 1;
  for (; !interrupted(); ++i) {
    int64_t at = t0_ns + i * every_ns;
    timespec ts{static_cast<time_t>(at / 1'000'000'000), static_cast<long>(at % 1'000'000'000)};
    while (::clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, nullptr) == EINTR && !interrupted()) {
    }
    if (interrupted()) break;
    std::map<std::string, std::vector<LinkInfo>> links;
    for (auto& [ns, n] : nl)
      if (auto l = n.links()) links[ns] = std::move(l).value();
    nlohmann::json c = nlohmann::json::array();
    for (const auto& w : where) {
      nlohmann::json pair = nullptr;  // null: the NIC is not there (now)
      for (const auto& l : links[w.ns])
        if (l.name == w.ifname) pair = {l.tx_bytes, l.rx_bytes};
      c.push_back(pair);
    }
    out << nlohmann::json{{"i", i}, {"c", c}}.dump() << std::endl;
  }
  return kExitOk;
}

// `lanes fabric-query`: one question about this machine's part of a run
// (a node's routes, groups, buckets, RIB, sessions, neighbours), asked by
// the first rank of a run over several machines through srun; the answer
// is one JSON line ({"ok": ...} or {"error": ...}).
int cmd_fabric_query([[maybe_unused]] const CliContext& cli, const std::vector<std::string>& args, std::ostream& out,
                     std::ostream& err) {
  po::options_description desc("options");
  std::string run, query;
  desc.add_options()("run", po::value(&run)->required(), "run id")("query", po::value(&query)->required(),
                                                                    "the question as JSON");
  po::positional_options_description pos;
  pos.add("run", 1).add("query", 1);
  po::variables_map vm;
  if (!parse(args, cmd_named("fabric-query"), desc, pos, vm, out,
             "Run by a scenario's first rank through srun, not by people."))
    return kExitOk;
  if (!RunRegistry::valid_id(run)) throw UsageError(fmt::format("'{}' is not a run id", run));
  auto q = nlohmann::json::parse(query, nullptr, false);
  if (q.is_discarded() || !q.is_object()) throw UsageError("the query is not a JSON object");
  RunRegistry reg;
  Topology topo;
  try {  // as the run loaded it: with the overrides of the scenario's phase
    topo = load_run_topology(reg, run);
  } catch (const std::exception& e) {
    err << "lanes fabric-query: cannot read run " << run << "'s topology here: " << e.what() << "\n";
    return kExitFailure;
  }
  int node = q.value("node", -1);
  if (node < 0 || static_cast<size_t>(node) >= topo.nodes.size()) {
    out << nlohmann::json{{"error", "no node " + std::to_string(node) + " in run " + run}}.dump() << "\n";
    return kExitOk;
  }
  // the node's daemons, as this machine's supervisor runs them
  const std::string what = q.value("what", "");
  if (what == "daemon_pid") {
    int pid = 0;
    for (const auto& d : supervised_daemons(reg, run))
      if (d.serves_node(topo.nodes[static_cast<size_t>(node)].name) && d.name == q.value("daemon", "")) pid = d.pid;
    out << nlohmann::json{{"ok", pid}}.dump() << "\n";
    return kExitOk;
  }
  if (what == "claim_task_ips") {  // the rogue-announce fault: the node's job takes another's task IPs
    const std::string host = topo.nodes[static_cast<size_t>(node)].name;
    const std::string t4 = q.value("task4", ""), t6 = q.value("task6", "");
    auto fail = [&](const std::system_error& e) {
      out << nlohmann::json{{"error", host + "'s job: " + message_of(e)}}.dump() << "\n";
      return kExitOk;
    };
    auto ns = Netns::open(hostnet::job_netns(run, host));
    if (!ns) return fail(ns.error());
    auto nl = Netlink::open_in(ns.value().fd(), host + " container");
    if (!nl) return fail(nl.error());
    auto lo = nl.value().ifindex("lo");
    if (!lo) return fail(lo.error());
    if (auto a = parse_ip4(t4)) (void)nl.value().add_address(lo.value(), IfAddr4{*a, 32}, "lo");
    if (auto a = parse_ip6(t6)) (void)nl.value().add_address(lo.value(), IfAddr6{*a, 128}, "lo");
    if (auto st = vip::claim_task_ips(reg.layout(run), host, t4, t6); !st) return fail(st.error());
    out << nlohmann::json{{"ok", true}}.dump() << "\n";
    return kExitOk;
  }
  if (what == "kill_daemon" || what == "daemon_running") {
    pid_t pid = q.value("pid", 0);
    bool ok = what == "kill_daemon" ? kill_process_group(pid) : pid > 0 && process_start_time(pid) != 0;
    out << nlohmann::json{{"ok", ok}}.dump() << "\n";
    return kExitOk;
  }
  auto view = scenarios::LiveFabric::at_rest(reg, run, topo);
  out << scenarios::answer_query(*view, q).dump() << "\n";
  return kExitOk;
}

}  // namespace lanes::cli::commands
