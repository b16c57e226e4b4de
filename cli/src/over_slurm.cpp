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
#include "lanes/switches/convergence.hpp"
#include "lanes/testbed/daemon_main.hpp"
#include "lanes/testbed/interrupt.hpp"
#include "lanes/testbed/limits.hpp"
#include "lanes/testbed/live_run.hpp"
#include "lanes/testbed/log.hpp"
#include "lanes/testbed/netns.hpp"
#include "lanes/testbed/partition.hpp"
#include "lanes/testbed/process.hpp"
#include "lanes/testbed/run_registry.hpp"
#include "lanes/testbed/topology_loader.hpp"
#include "lanes/testbed/wait.hpp"

namespace po = boost::program_options;

namespace lanes::cli::commands {

using Clock = std::chrono::steady_clock;

std::string slurm_runs_dir() { return RunRegistry::default_base() + "-slurm"; }

namespace {

std::string step_name(const std::string& id) { return "lanes-" + id; }

nlohmann::json to_json(const SlurmRun& r) {
  nlohmann::json m = nlohmann::json::array();
  for (const auto& x : r.machines) m.push_back({{"name", x.name}, {"addr", x.addr.to_string()}});
  return {{"run_id", r.run_id},   {"job_id", r.job_id},   {"topology_file", r.topology_file},
          {"machines", m},        {"srun_pid", r.srun_pid}, {"srun_start_time", r.srun_start_time}};
}

bool srun_alive(const SlurmRun& r) {
  return r.srun_pid > 0 && ::kill(r.srun_pid, 0) == 0 && process_start_time(r.srun_pid) == r.srun_start_time;
}

// Every shard line of the run's log so far, from OFFSET on (moved past
// the last whole line).
std::vector<ShardEvent> read_events(const std::string& path, std::streamoff& offset) {
  std::vector<ShardEvent> out;
  std::ifstream in(path, std::ios::binary);
  if (!in) return out;
  in.seekg(offset);
  for (std::string line; std::getline(in, line);) {
    if (in.eof()) break;  // a line still being written: read it whole next time
    offset = in.tellg();
    if (auto e = parse_shard_line(line)) out.push_back(std::move(*e));
  }
  return out;
}

// The lines of the log that are not a shard's (srun's and the shards' own
// errors), last few, for a failure's message.
std::string other_lines(const std::string& path, size_t keep = 6) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);)
    if (!l.empty() && !parse_shard_line(l)) lines.push_back(l);
  std::string s;
  for (size_t i = lines.size() > keep ? lines.size() - keep : 0; i < lines.size(); ++i) s += "\n  " + lines[i];
  return s;
}

Result<std::string> capture(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  ProcessSpec spec{argv.front(), argv};
  spec.new_session = false;
  auto r = run_capture(spec, timeout);
  if (!r) return r.error();
  if (r.value().status != 0)
    return os_error(EIO, fmt::format("{} exited with status {}", argv.front(), r.value().status));
  return r.value().out;
}

// The step of the run's shards in the job ("12.0"), from squeue.
std::optional<std::string> find_step(const SlurmRun& r) {
  auto o = capture({"squeue", "-h", "-s", "-j", r.job_id, "-o", "%i %j"}, std::chrono::seconds(20));
  if (!o) return std::nullopt;
  std::istringstream in(o.value());
  for (std::string step, name; in >> step >> name;)
    if (name == step_name(r.run_id)) return step;
  return std::nullopt;
}

struct MachineWord {
  std::string last = "starting";
  nlohmann::json detail = nlohmann::json::object();
  bool up = false, converged = false, down = false;
};

std::string describe_failure(const SlurmRun& r, int machine, const nlohmann::json& d) {
  std::string name = machine >= 0 && machine < static_cast<int>(r.machines.size())
                         ? r.machines[static_cast<size_t>(machine)].name
                         : "machine " + std::to_string(machine);
  return fmt::format("machine {} (shard {}): {}", name, machine, d.value("error", std::string("failed")));
}

}  // namespace

std::optional<SlurmRun> load_slurm_run(const std::string& run_id) {
  std::string dir = slurm_runs_dir() + "/" + run_id;
  std::ifstream in(dir + "/slurm.json");
  if (!in) return std::nullopt;
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  SlurmRun r;
  r.dir = dir;
  r.run_id = j.value("run_id", "");
  r.job_id = j.value("job_id", "");
  r.topology_file = j.value("topology_file", "");
  r.srun_pid = j.value("srun_pid", 0);
  r.srun_start_time = j.value("srun_start_time", uint64_t{0});
  for (const auto& m : j.value("machines", nlohmann::json::array()))
    if (auto a = parse_ip(m.value("addr", ""))) r.machines.push_back({m.value("name", ""), *a});
  return r;
}

std::vector<std::string> list_slurm_runs() {
  std::vector<std::string> ids;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(slurm_runs_dir(), ec))
    if (std::filesystem::exists(e.path() / "slurm.json")) ids.push_back(e.path().filename());
  std::sort(ids.begin(), ids.end());
  return ids;
}

int down_over_slurm(const SlurmRun& r, std::ostream& out, std::ostream& err) {
  auto t0 = Clock::now();
  if (srun_alive(r)) {
    // the shards' step, SIGTERM to every shard: each takes its machine's part down
    auto step = find_step(r);
    if (step)
      (void)capture({"scancel", "--signal=TERM", *step}, std::chrono::seconds(20));
    else
      ::kill(r.srun_pid, SIGTERM);  // srun passes it on to every shard
    if (!eventually([&] { return !srun_alive(r); }, std::chrono::seconds(90), std::chrono::milliseconds(100))) {
      err << "lanes down: the shards of run " << r.run_id << " did not end in 90 s; ending the step\n";
      if (step) (void)capture({"scancel", *step}, std::chrono::seconds(20));
      ::kill(r.srun_pid, SIGKILL);
      (void)eventually([&] { return !srun_alive(r); }, std::chrono::seconds(30), std::chrono::milliseconds(100));
    }
  }
  std::streamoff off = 0;
  std::map<int, nlohmann::json> downs;
  for (auto& e : read_events(r.dir + "/shards.log", off))
    if (e.event == "down" || e.event == "failed") downs[e.machine] = e.detail;  // a failed start removed its part
  int rc = kExitOk;
  int namespaces = 0, processes = 0;
  std::vector<std::string> silent;
  for (size_t i = 0; i < r.machines.size(); ++i) {
    auto it = downs.find(static_cast<int>(i));
    if (it == downs.end()) {
      silent.push_back(r.machines[i].name);
      continue;
    }
    namespaces += it->second.value("namespaces", 0);
    processes += it->second.value("processes", 0);
    if (!it->second.contains("namespaces")) continue;  // failed: it built nothing that stays
    for (const auto& e : it->second.value("errors", nlohmann::json::array()))
      err << "lanes down: " << r.machines[i].name << ": " << e.get<std::string>() << "\n";
    if (!it->second.value("errors", nlohmann::json::array()).empty()) rc = kExitFailure;
  }
  // a machine whose shard did not say it took its part down (killed, or its
  // slurmd gone): lanes clean there, through Slurm, removes what it left
  for (const auto& name : silent) {
    auto c = capture({"srun", "--jobid=" + r.job_id, "--overlap", "-N1", "-n1", "--nodelist=" + name,
                      "--job-name=" + step_name(r.run_id) + "-clean", self_dir() + "/lanes", "clean"},
                     std::chrono::seconds(120));
    if (c) {
      out << fmt::format("{}: its shard did not report its teardown; lanes clean there: {}", name, c.value());
    } else {
      err << fmt::format("lanes down: {}: its shard did not report its teardown and lanes clean could not run there "
                         "({}); run 'lanes clean' on {}\n",
                         name, message_of(c.error()), name);
      rc = kExitFailure;
    }
  }
  std::error_code ec;
  if (rc == kExitOk) std::filesystem::remove_all(r.dir, ec);
  out << fmt::format("run {} {} over {} machines: {} namespaces, {} processes removed in {}\n", r.run_id,
                     rc == kExitOk ? "down" : "partly down", r.machines.size(), namespaces, processes,
                     fmt_ms(std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0)));
  return rc;
}

void status_over_slurm(const SlurmRun& r, bool json, std::ostream& out) {
  std::streamoff off = 0;
  std::map<int, ShardEvent> last;
  for (auto& e : read_events(r.dir + "/shards.log", off)) last[e.machine] = e;
  bool alive = srun_alive(r);
  if (json) {
    nlohmann::json j = to_json(r);
    j["step_running"] = alive;
    nlohmann::json ms = nlohmann::json::array();
    for (size_t i = 0; i < r.machines.size(); ++i) {
      auto it = last.find(static_cast<int>(i));
      nlohmann::json m = {{"name", r.machines[i].name}, {"addr", r.machines[i].addr.to_string()}};
      m["last"] = it == last.end() ? "starting" : it->second.event;
      m["lost"] = !alive && m["last"] != "down" && m["last"] != "failed";
      if (it != last.end()) m["detail"] = it->second.detail;
      ms.push_back(m);
    }
    j["machines"] = ms;
    out << j.dump(2) << "\n";
    return;
  }
  out << fmt::format("run {} over {} machines of Slurm job {} ({}), topology {}\n", r.run_id, r.machines.size(),
                     r.job_id, alive ? "its shards' step is running" : "its shards' step has ended",
                     r.topology_file);
  for (size_t i = 0; i < r.machines.size(); ++i) {
    auto it = last.find(static_cast<int>(i));
    std::string word = it == last.end() ? "starting" : it->second.event;
    std::string more;
    if (!alive && word != "down" && word != "failed") {  // its shard ended without a word
      out << fmt::format("  {:<10} {:<16} lost: its shard ended without taking its part down (it said '{}' last; "
                         "lanes down {} cleans there)\n",
                         r.machines[i].name, r.machines[i].addr.to_string(), word, r.run_id);
      continue;
    }
    if (it != last.end()) {
      const auto& d = it->second.detail;
      if (d.contains("nodes")) more += fmt::format(" {} nodes, {} tunnels", d.value("nodes", 0), d.value("tunnels", 0));
      if (d.contains("task_ips"))
        more += fmt::format(" {}/{} task IPs, {}/{} rack routes", d.value("task_ips_full", 0), d.value("task_ips", 0),
                            d.value("aggregates_present", 0), d.value("aggregates", 0));
      if (d.contains("error")) more += " " + d.value("error", std::string());
    }
    out << fmt::format("  {:<10} {:<16} {}{}\n", r.machines[i].name, r.machines[i].addr.to_string(), word, more);
  }
}

int up_over_slurm(const OverSlurmUp& o, std::ostream& out, std::ostream& err) {
  auto alloc = read_allocation();
  if (!alloc) {
    err << "lanes up: --over-slurm: " << message_of(alloc.error()) << "\n";
    return kExitBadInput;
  }
  const auto& machines = alloc.value().machines;
  const int k = static_cast<int>(machines.size());
  Topology topo = load_topology(o.file);      // bad input: exit 2, nothing created
  Placement placement = place(topo, k);       // cannot be split: exit 2, with its line
  uint32_t mtu = o.underlay_mtu;
  if (!mtu) {  // this machine's own network, where it is one of the allocation's
    for (const auto& m : machines)
      if (auto x = mtu_of_address(m.addr)) {
        mtu = x.value();
        break;
      }
    if (!mtu) mtu = 1500;
  }
  RunRegistry reg;
  std::string id = o.run_id.empty() ? reg.new_id() : o.run_id;
  SlurmRun r;
  r.run_id = id;
  r.job_id = alloc.value().job_id;
  r.topology_file = std::filesystem::absolute(o.file).string();
  r.machines = machines;
  r.dir = slurm_runs_dir() + "/" + id;
  std::error_code ec;
  std::filesystem::create_directories(slurm_runs_dir(), ec);
  if (!std::filesystem::create_directory(r.dir, ec)) {
    err << "lanes up: run id '" << id << "' is already in use (" << r.dir << "; lanes down " << id << ")\n";
    return kExitBadInput;
  }
  const uint64_t cpus = read_machine_limits().cpus;
  std::vector<std::string> argv = {"srun",
                                   "--job-name=" + step_name(id),
                                   "--nodes=" + std::to_string(k),
                                   "--ntasks=" + std::to_string(k),
                                   "--ntasks-per-node=1",
                                   "--overlap",
                                   "--kill-on-bad-exit=1",
                                   "--unbuffered",
                                   self_dir() + "/lanes",
                                   "shard",
                                   r.topology_file,
                                   "--run-id",
                                   id,
                                   "--machines",
                                   machines_arg(machines),
                                   "--port",
                                   std::to_string(o.port ? o.port : kVxlanPort),
                                   "--underlay-mtu",
                                   std::to_string(mtu),
                                   "--bfd-cpus",
                                   std::to_string(cpus)};
  ProcessSpec spec{"srun (the shards of run " + id + ")", argv};
  spec.log_path = r.dir + "/shards.log";
  spec.new_session = true;  // outlives lanes up; lanes down ends it
  auto srun = Daemon::start(spec);
  if (!srun) {
    std::filesystem::remove_all(r.dir, ec);
    err << "lanes up: starting srun: " << srun.error().what() << "\n";
    return kExitFailure;
  }
  r.srun_pid = srun.value().pid();
  r.srun_start_time = process_start_time(r.srun_pid);
  srun.value().detach();
  write_json_atomic(r.dir + "/slurm.json", to_json(r));
  install_interrupt_handlers();
  out << fmt::format("run {}: {} over {} machines of Slurm job {} ({} tunnels), UDP port {}, underlay MTU {}\n", id,
                     summary_of(topo), k, r.job_id, placement.cross.size(), o.port ? o.port : kVxlanPort, mtu);
  out.flush();

  // follow the shards: every one up (and converged, with --wait), or the first failure
  const auto t0 = Clock::now();
  std::vector<MachineWord> words(static_cast<size_t>(k));
  std::streamoff off = 0;
  std::string failure;
  bool timed_out = false;
  auto all = [&](bool MachineWord::*f) {
    return std::all_of(words.begin(), words.end(), [&](const MachineWord& w) { return w.*f; });
  };
  for (;;) {
    for (auto& e : read_events(r.dir + "/shards.log", off)) {
      if (e.machine < 0 || e.machine >= k) continue;
      auto& w = words[static_cast<size_t>(e.machine)];
      w.last = e.event;
      w.detail = e.detail;
      if (e.event == "up") {
        w.up = true;
        out << fmt::format("  {}: up, {} nodes and {} tunnels in {}\n", e.name, e.detail.value("nodes", 0),
                           e.detail.value("tunnels", 0), fmt_ms(std::chrono::milliseconds(e.detail.value("took_ms", 0))));
      } else if (e.event == "converged") {
        w.converged = true;
        if (o.wait)
          out << fmt::format("  {}: converged, {} task IPs with a next hop per NIC, {} rack routes\n", e.name,
                             e.detail.value("task_ips", 0), e.detail.value("aggregates", 0));
      } else if (e.event == "failed" && failure.empty()) {
        failure = describe_failure(r, e.machine, e.detail);
      }
      out.flush();
    }
    if (!failure.empty()) break;
    if (o.wait ? all(&MachineWord::converged) : all(&MachineWord::up)) break;
    if (!srun_alive(r)) {
      failure = "the shards' step ended before every machine was up" + other_lines(r.dir + "/shards.log");
      break;
    }
    if (interrupted()) {
      failure = "interrupted";
      break;
    }
    if (o.wait && Clock::now() - t0 >= *o.wait) {
      timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto took = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0);
  if (!failure.empty()) {
    err << "lanes up: run " << id << " failed: " << failure << "\n";
    std::ostringstream sink;
    (void)down_over_slurm(r, sink, err);
    err << "lanes up: " << sink.str();
    return kExitFailure;
  }
  if (o.json) {
    nlohmann::json j = to_json(r);
    j["took_ms"] = took.count() / 1000;
    j["converged"] = all(&MachineWord::converged);
    nlohmann::json ms = nlohmann::json::array();
    for (size_t i = 0; i < words.size(); ++i) ms.push_back({{"name", machines[i].name}, {"last", words[i].last}, {"detail", words[i].detail}});
    j["machines"] = ms;
    out << j.dump(2) << "\n";
  }
  if (timed_out) {
    err << fmt::format("lanes up: gave up after --wait with run {} not converged on every machine (the run stays "
                       "up: lanes status {}; lanes down {})\n",
                       id, id, id);
    return kExitFailure;
  }
  if (!o.json)
    out << fmt::format("run {} is up over {} machines in {}{} (lanes status {}; lanes down {})\n", id, k, fmt_ms(took),
                       o.wait ? ", BGP converged on every machine's switches" : "", id, id);
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
  desc.add_options()("file", po::value(&file)->required(), "topology file")(
      "run-id", po::value(&run_id)->required(), "the run's id (the same on every machine)")(
      "machines", po::value(&machines_text)->required(),
      "NAME=ADDRESS,... every machine of the run in Slurm's order")(
      "port", po::value(&port), "UDP port of the tunnels")(
      "underlay-mtu", po::value(&mtu), "the MTU the tunnels are sized for (the same on every machine)")(
      "bfd-cpus", po::value(&bfd_cpus), "the CPUs BFD's default interval is fitted to (the same on every machine)");
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
  Topology topo;
  Placement placement;
  try {
    topo = load_topology(file);
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
  bool converged = false;
  while (!interrupted()) {
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
    bool changed = !last || last->task_ips_full != c.task_ips_full || last->aggregates_present != c.aggregates_present;
    if (c.done() && !converged) {
      converged = true;
      say("converged", detail());
    } else if (changed && !c.done()) {
      say("progress", detail());
    }
    last = c;
    std::this_thread::sleep_for(std::chrono::milliseconds(converged ? 1000 : 250));
  }
  auto rep = run.value().down();
  nlohmann::json errors = rep.errors;
  say("down", {{"namespaces", rep.namespaces}, {"processes", rep.processes}, {"errors", errors}});
  return rep.errors.empty() ? kExitOk : kExitFailure;
}

}  // namespace lanes::cli::commands
