#include "lanes/testbed/slurm_run.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "lanes/testbed/daemon_main.hpp"
#include "lanes/testbed/limits.hpp"
#include "lanes/testbed/partition.hpp"
#include "lanes/testbed/process.hpp"
#include "lanes/testbed/run_registry.hpp"
#include "lanes/testbed/wait.hpp"

namespace lanes::testbed {

namespace {

using Clock = std::chrono::steady_clock;

std::string step_name(const std::string& id) { return "lanes-" + id; }

// Every shard line of the log from OFFSET on (moved past the last whole line).
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

// The last lines of the log that are not a shard's (srun's own, errors)
std::string other_lines(const std::string& path, size_t keep = 6) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);)
    if (!l.empty() && !parse_shard_line(l)) lines.push_back(l);
  std::string s;
  for (size_t i = lines.size() > keep ? lines.size() - keep : 0; i < lines.size(); ++i) s += "\n  " + lines[i];
  return s;
}

}  // namespace

void apply(MachineWord& w, const ShardEvent& e) {
  w.last = e.event;
  w.detail = e.detail;
  if (e.event == "up") w.up = true;
  if (e.event == "converged") w.converged = true;
  if (e.event == "progress") w.converged = false;  // (a flap after converging: not whole until it says so again)
  if (e.event == "down") w.down = true;
  if (e.event == "failed") w.failed = true;
}

std::string SlurmRun::base_dir() { return RunRegistry::default_base() + "-slurm"; }

nlohmann::json SlurmRun::to_json() const {
  nlohmann::json m = nlohmann::json::array();
  for (const auto& x : machines) m.push_back({{"name", x.name}, {"addr", x.addr.to_string()}});
  return {{"run_id", run_id}, {"job_id", job_id},     {"topology_file", topology_file},     {"lanes", lanes},
          {"machines", m},    {"srun_pid", srun_pid}, {"srun_start_time", srun_start_time},
          {"holder_pid", holder_pid}, {"holder_start_time", holder_start_time}};
}

std::optional<SlurmRun> SlurmRun::load(const std::string& run_id) {
  std::string dir = base_dir() + "/" + run_id;
  std::ifstream in(dir + "/slurm.json");
  if (!in) return std::nullopt;
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  SlurmRun r;
  r.dir = dir;
  r.run_id = j.value("run_id", "");
  r.job_id = j.value("job_id", "");
  r.topology_file = j.value("topology_file", "");
  r.lanes = j.value("lanes", "");
  r.srun_pid = j.value("srun_pid", 0);
  r.srun_start_time = j.value("srun_start_time", uint64_t{0});
  r.holder_pid = j.value("holder_pid", 0);
  r.holder_start_time = j.value("holder_start_time", uint64_t{0});
  for (const auto& m : j.value("machines", nlohmann::json::array()))
    if (auto a = parse_ip(m.value("addr", ""))) r.machines.push_back({m.value("name", ""), *a});
  return r;
}

std::vector<std::string> SlurmRun::list() {
  std::vector<std::string> ids;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(base_dir(), ec))
    if (std::filesystem::exists(e.path() / "slurm.json")) ids.push_back(e.path().filename());
  std::sort(ids.begin(), ids.end());
  return ids;
}

bool SlurmRun::step_running() const {
  return srun_pid > 0 && ::kill(srun_pid, 0) == 0 && process_start_time(srun_pid) == srun_start_time;
}

bool SlurmRun::holder_dead() const {
  if (holder_pid <= 0) return false;  // lanes up's: it lives on its own
  return ::kill(holder_pid, 0) != 0 || process_start_time(holder_pid) != holder_start_time;
}

int SlurmRun::machine_index(const std::string& name) const {
  for (size_t i = 0; i < machines.size(); ++i)
    if (machines[i].name == name) return static_cast<int>(i);
  return -1;
}

std::vector<std::string> SlurmRun::machine_argv(int m, const std::vector<std::string>& cmd) const {
  std::vector<std::string> argv = {"srun",
                                   "--jobid=" + job_id,
                                   "--overlap",
                                   "--nodes=1",
                                   "--ntasks=1",
                                   "--nodelist=" + machines.at(static_cast<size_t>(m)).name,
                                   "--job-name=" + step_name(run_id) + "-task",
                                   "--unbuffered",
                                   "--quiet"};
  argv.insert(argv.end(), cmd.begin(), cmd.end());
  return argv;
}

std::vector<std::string> SlurmRun::remote_argv(int m, const std::string& node, const std::vector<std::string>& cmd,
                                               bool hold_go) const {
  std::vector<std::string> inner = {lanes, "exec", run_id, node, "--in-step"};
  if (hold_go) inner.push_back("--hold-go");
  inner.push_back("--");
  inner.insert(inner.end(), cmd.begin(), cmd.end());
  return machine_argv(m, inner);
}

Result<SlurmRun> SlurmRun::start(const Allocation& alloc, const SlurmRunOptions& opt) {
  SlurmRun r;
  r.run_id = opt.run_id.empty() ? RunRegistry().new_id() : opt.run_id;
  r.job_id = alloc.job_id;
  r.topology_file = std::filesystem::absolute(opt.topology_file).string();
  r.lanes = opt.lanes.empty() ? self_dir() + "/lanes" : opt.lanes;
  r.machines = alloc.machines;
  r.dir = base_dir() + "/" + r.run_id;
  uint32_t mtu = opt.underlay_mtu;
  if (!mtu) {  // this machine's own network, where it is one of the allocation's
    for (const auto& m : r.machines)
      if (auto x = mtu_of_address(m.addr)) {
        mtu = x.value();
        break;
      }
    if (!mtu) mtu = 1500;
  }
  std::error_code ec;
  std::filesystem::create_directories(base_dir(), ec);
  if (!std::filesystem::create_directory(r.dir, ec))
    return os_error(EEXIST, fmt::format("run id '{}' is already in use ({}; lanes down {})", r.run_id, r.dir, r.run_id));
  const size_t k = r.machines.size();
  std::vector<std::string> argv = {"srun",
                                   "--job-name=" + step_name(r.run_id),
                                   "--nodes=" + std::to_string(k),
                                   "--ntasks=" + std::to_string(k),
                                   "--ntasks-per-node=1",
                                   "--overlap",
                                   "--kill-on-bad-exit=1",
                                   "--unbuffered",
                                   r.lanes,
                                   "shard",
                                   r.topology_file,
                                   "--run-id",
                                   r.run_id,
                                   "--machines",
                                   machines_arg(r.machines),
                                   "--port",
                                   std::to_string(opt.port ? opt.port : kVxlanPort),
                                   "--underlay-mtu",
                                   std::to_string(mtu),
                                   "--bfd-cpus",
                                   std::to_string(opt.bfd_cpus ? opt.bfd_cpus : read_machine_limits().cpus)};
  for (const auto& [key, value] : opt.overrides) argv.insert(argv.end(), {"--override", key + "=" + value});
  ProcessSpec spec{"srun (the shards of run " + r.run_id + ")", argv};
  spec.log_path = r.log_path();
  spec.new_session = true;  // outlives lanes up; lanes down ends it
  spec.die_with_parent = opt.held;  // lanes run's ends with it
  if (opt.held) {
    r.holder_pid = ::getpid();
    r.holder_start_time = process_start_time(r.holder_pid);
  }
  auto srun = Daemon::start(spec);
  if (!srun) {
    std::filesystem::remove_all(r.dir, ec);
    return os_error(srun.error().code().value(), "starting srun: " + message_of(srun.error()));
  }
  r.srun_pid = srun.value().pid();
  r.srun_start_time = process_start_time(r.srun_pid);
  srun.value().detach();
  write_json_atomic(r.dir + "/slurm.json", r.to_json());
  return r;
}

std::vector<MachineWord> SlurmRun::words() const {
  std::vector<MachineWord> w(machines.size());
  std::streamoff off = 0;
  for (const auto& e : read_events(log_path(), off))
    if (e.machine >= 0 && e.machine < static_cast<int>(w.size())) apply(w[static_cast<size_t>(e.machine)], e);
  return w;
}

std::string SlurmRun::follow(bool converged, std::optional<std::chrono::milliseconds> timeout,
                             const std::function<void(const ShardEvent&)>& on_event,
                             const std::function<bool()>& stop, std::vector<MachineWord>& words) const {
  const auto t0 = Clock::now();
  words.assign(machines.size(), MachineWord{});
  std::streamoff off = 0;
  const int k = static_cast<int>(machines.size());
  for (;;) {
    for (auto& e : read_events(log_path(), off)) {
      if (e.machine < 0 || e.machine >= k) continue;
      apply(words[static_cast<size_t>(e.machine)], e);
      if (on_event) on_event(e);
      if (e.event == "failed")
        return fmt::format("machine {} (shard {}): {}", machines[static_cast<size_t>(e.machine)].name, e.machine,
                           e.detail.value("error", std::string("failed")));
    }
    bool there = std::all_of(words.begin(), words.end(),
                             [&](const MachineWord& w) { return converged ? w.converged : w.up; });
    if (there) return "";
    if (!step_running()) {
      // the last lines may have come with the step's end
      for (auto& e : read_events(log_path(), off))
        if (e.machine >= 0 && e.machine < k) apply(words[static_cast<size_t>(e.machine)], e);
      std::string lost;
      for (int i = 0; i < k; ++i)
        if (!words[static_cast<size_t>(i)].up) lost += (lost.empty() ? "" : ", ") + machines[static_cast<size_t>(i)].name;
      return "the shards' step ended before every machine was up" + (lost.empty() ? "" : " (not up: " + lost + ")") +
             other_lines(log_path());
    }
    if (stop && stop()) return "interrupted";
    if (timeout && Clock::now() - t0 >= *timeout) return "timeout";
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

SlurmDownReport SlurmRun::down() const {
  SlurmDownReport rep;
  if (step_running()) {
    // SIGTERM to every shard of the step: each takes its machine's part down
    std::optional<std::string> step;
    if (auto o = slurm_command({"squeue", "-h", "-s", "-j", job_id, "-o", "%i %j"}, std::chrono::seconds(20))) {
      std::istringstream in(o.value());
      for (std::string id, name; in >> id >> name;)
        if (name == step_name(run_id)) step = id;
    }
    if (step)
      (void)slurm_command({"scancel", "--signal=TERM", *step}, std::chrono::seconds(20));
    else
      ::kill(srun_pid, SIGTERM);  // srun passes it on to every shard
    if (!eventually([&] { return !step_running(); }, std::chrono::seconds(90), std::chrono::milliseconds(100))) {
      rep.errors.push_back(fmt::format("the shards of run {} did not end in 90 s; the step was killed", run_id));
      if (step) (void)slurm_command({"scancel", *step}, std::chrono::seconds(20));
      ::kill(srun_pid, SIGKILL);
      (void)eventually([&] { return !step_running(); }, std::chrono::seconds(30), std::chrono::milliseconds(100));
    }
  }
  // what else of the run still runs as a step (processes on the machines): ended
  if (auto o = slurm_command({"squeue", "-h", "-s", "-j", job_id, "-o", "%i %j"}, std::chrono::seconds(20))) {
    std::istringstream in(o.value());
    for (std::string id, name; in >> id >> name;)
      if (name.rfind(step_name(run_id) + "-task", 0) == 0) (void)slurm_command({"scancel", id}, std::chrono::seconds(20));
  }
  std::streamoff off = 0;
  std::map<int, nlohmann::json> said;  // each machine's down (or a failed start, which removed its part)
  for (auto& e : read_events(log_path(), off))
    if (e.event == "down" || e.event == "failed") said[e.machine] = e.detail;
  for (size_t i = 0; i < machines.size(); ++i) {
    auto it = said.find(static_cast<int>(i));
    if (it != said.end()) {
      rep.namespaces += it->second.value("namespaces", 0);
      rep.processes += it->second.value("processes", 0);
      for (const auto& e : it->second.value("errors", nlohmann::json::array()))
        rep.errors.push_back(machines[i].name + ": " + e.get<std::string>());
      continue;
    }
    // its shard said nothing (killed, or its slurmd gone): lanes clean there,
    // through Slurm, removes what it left
    auto c = slurm_command(machine_argv(static_cast<int>(i), {lanes, "clean"}), std::chrono::seconds(120));
    if (c)
      rep.cleaned.push_back(
          fmt::format("{}: its shard did not report its teardown; lanes clean there: {}", machines[i].name, c.value()));
    else {
      std::string state = node_state(machines[i].name);
      rep.errors.push_back(fmt::format(
          "{}{}: its shard did not report its teardown and lanes clean could not run there ({}); a shard whose step "
          "the controller ended takes its part down on its own; else run 'lanes clean' on {}",
          machines[i].name, state.empty() ? "" : " (Slurm: " + state + ")", message_of(c.error()), machines[i].name));
    }
  }
  std::error_code ec;
  if (rep.errors.empty()) std::filesystem::remove_all(dir, ec);
  return rep;
}

}  // namespace lanes::testbed
