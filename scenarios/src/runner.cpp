#include "lanes/scenarios/runner.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "assertions/live_assertions.hpp"
#include "nic_figures.hpp"
#include "nic_sampler.hpp"
#include "workload_runs.hpp"
#include "lanes/testbed/cpu_load.hpp"
#include "lanes/testbed/delay_line.hpp"
#include "lanes/testbed/features.hpp"
#include "lanes/testbed/impair.hpp"
#include "lanes/testbed/interrupt.hpp"
#include "lanes/testbed/limits.hpp"
#include "lanes/testbed/live_run.hpp"
#include "lanes/testbed/partition.hpp"
#include "lanes/testbed/slurm_run.hpp"
#include "lanes/testbed/topology_loader.hpp"
#include "lanes/testbed/log.hpp"
#include "lanes/testbed/process.hpp"
#include "lanes/testbed/supervisor.hpp"
#include "lanes/testbed/wait.hpp"
#include "lanes/hostnet/hostnet.hpp"
#include "lanes/hostnet/host_agent.hpp"
#include "lanes/scenarios/fabric_view.hpp"
#include "lanes/scenarios/live_assertion.hpp"
#include "lanes/scenarios/steady.hpp"
#include "lanes/scenarios/workload.hpp"
#include "lanes/switches/convergence.hpp"
#include "lanes/vip/deploy.hpp"

namespace lanes::scenarios {

namespace tb = lanes::testbed;
namespace sw = lanes::switches;
using Clock = std::chrono::steady_clock;
using nlohmann::json;
using reports::Assertion;
using reports::Marker;
using reports::PhaseResult;
using reports::ScenarioResult;
using reports::Series;
using reports::WorkloadResult;
using std::chrono::milliseconds;

namespace {

constexpr double kSampleS = NicSampler::kSampleS;

bool sleep_checked(milliseconds d) { return tb::pause_for(d, [] { return tb::interrupted(); }); }

template <typename F>
bool eventually(F pred, milliseconds timeout, milliseconds every = milliseconds(100)) {
  return tb::eventually(pred, timeout, every, [] { return tb::interrupted(); });
}

class PhaseRun final : public StepContext {
 public:
  PhaseRun(const Scenario& sc, const Phase& ph, const RunOptions& opt, ScenarioResult& result, PhaseResult& pr,
           std::ofstream* steps)
      : sc_(sc), ph_(ph), opt_(opt), result_(result), pr_(pr), topo_(ph.topology), steps_(steps) {}

  void run() {
    dir_ = opt_.out_dir + "/" + ph_.name;
    std::filesystem::create_directories(dir_);
    tb::RunRegistry reg;
    double busy = settle_cpu();
    say(fmt::format("phase {}: bringing up {}{}", ph_.name, topo_.name, describe_overrides()));
    // BFD's default interval, fitted to this machine where the file leaves it
    uint64_t cpus = tb::read_machine_limits().cpus;
    if (auto note = tb::adapt_bfd_default(topo_, cpus); !note.empty()) say(fmt::format("phase {}: {}", ph_.name, note));
    for (const auto& w : tb::bfd_warnings(topo_, cpus)) say(fmt::format("phase {}: warning: {}", ph_.name, w));
    tb::LiveRunOptions lo{"", sc_.topology_text, sc_.topology_file, opt_.bin_dir};
    lo.overrides = ph_.overrides;
    lo.held = true;  // a run of lanes run is dead once lanes run is (until --keep leaves it up)
    lo.roles = opt_.roles;
    if (!opt_.run_id_prefix.empty()) {
      int n = opt_.phase_seq ? ++*opt_.phase_seq : 1;
      lo.run_id = opt_.run_id_prefix + std::to_string(n);
      if (!tb::RunRegistry::valid_id(lo.run_id))
        throw StepError(fmt::format("run id {} (--run-id {} and phase {}) is longer than 8 characters", lo.run_id,
                                    opt_.run_id_prefix, n));
    }
    if (opt_.over_slurm) {
      start_over_slurm(lo.run_id, cpus);
    } else {
      auto live = tb::LiveRun::start(topo_, reg, lo);
      if (!live) throw StepError("bringing the topology up: " + std::string(live.error().what()));
      live_.emplace(std::move(live).value());
      fabric_.emplace(*live_);
      view_ = &*fabric_;
      pr_.run_id = live_->id();
    }
    say(fmt::format("phase {}: run {} is up (lanes status {})", ph_.name, pr_.run_id, pr_.run_id));
    pr_.config = job_config();
    pr_.config["topology"] = topo_.name;
    pr_.config["tcp_congestion"] = sc_.tcp_congestion;
    pr_.config["bfd_interval_ms"] = tb::bfd_load(topo_).min_interval_ms;  // 0: BFD off
    pr_.config["overrides"] = ph_.overrides;
    if (slurm_) {
      json names = json::array();
      for (const auto& m : slurm_->machines) names.push_back(m.name);
      pr_.config["machines"] = names;
    }
    pr_.config["cpu_busy_before"] = busy;
    t0_ = Clock::now();
    start_sampler();
    std::exception_ptr failure;
    try {
      for (const auto& st : ph_.steps) {
        if (tb::interrupted()) throw StepError("interrupted");
        run_step(st);
      }
    } catch (const StepError& e) {
      failure = std::current_exception();
      // a run over several machines whose shards are gone: that is the
      // cause, whatever the step saw of it
      if (slurm_ && !slurm_->step_running()) failure = std::make_exception_ptr(StepError(lost_shards(e.what())));
    } catch (...) {
      failure = std::current_exception();
    }
    // whatever happened: stop what still runs, keep what it measured
    workloads_.end_all();
    pr_.duration_s = now_s();
    if (sampler_) {
      sampler_->stop();
      pr_.series = sampler_->series();
      for (auto& w : pr_.workloads) compute_share(w);
    }
    // what the topology's delay lines measured (configured against held)
    if (live_)
      if (auto d = tb::delay_line_states(live_->registry().layout(live_->id()), topo_); !d.empty())
        pr_.config["delay_lines"] = std::move(d);
    copy_logs();
    if (failure) std::rethrow_exception(failure);
  }

  // A phase measures the NICs only if the CPU has room: the kernel may
  // still be freeing an earlier run's namespaces, or something else may be
  // running. Waits, briefly (other work may share the machine for good:
  // CI runs tests side by side), for the machine to be less than half busy
  // and says so; returns the busy share it last saw.
  double settle_cpu() {
    constexpr double kQuiet = 0.5;
    auto busy = tb::wait_for_idle_cpu(kQuiet, milliseconds(300), milliseconds(0));
    if (!busy || *busy < kQuiet) return busy.value_or(0);
    say(fmt::format("phase {}: the machine is {:.0f}% busy before bring-up; waiting up to 10 s for it to settle",
                    ph_.name, 100 * *busy));
    auto start = Clock::now();
    busy = tb::wait_for_idle_cpu(kQuiet, milliseconds(500), milliseconds(10'000));
    double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (busy && *busy < kQuiet)
      say(fmt::format("phase {}: settled after {:.1f} s ({:.0f}% busy)", ph_.name, waited, 100 * *busy));
    else
      say(fmt::format("phase {}: still {:.0f}% busy after {:.0f} s: its rates may measure the CPU, not the NICs",
                      ph_.name, 100 * busy.value_or(0), waited));
    return busy.value_or(0);
  }

  // The run stays up for the user (lanes run --keep).
  void keep() {
    if (live_) live_->keep();
    slurm_.reset();  // its shards' step goes on; lanes down ends it
  }
  void down() {
    if (slurm_) {
      auto rep = slurm_->down();
      for (const auto& c : rep.cleaned) say(c);
      for (const auto& e : rep.errors) say("teardown: " + e);
      slurm_.reset();
      return;
    }
    helpers_.clear();  // (each ended and waited for: before its namespace goes)
    if (!live_) return;
    auto rep = live_->down();
    for (const auto& e : rep.errors) say("teardown: " + e);
    fabric_.reset();
    live_.reset();
  }
  std::string run_id() const { return live_ ? live_->id() : slurm_ ? slurm_->run_id : ""; }

  // ---- StepContext ----

  const tb::Topology& topo() const override { return topo_; }
  FabricView& fabric() override { return *view_; }
  int node_ns(const std::string& name) override {
    if (slurm_) return remote_ns(name, name);
    return live_->tb().netns(node(name)).fd();
  }
  int job_ns(const std::string& host) override {
    if (slurm_) return remote_ns(host, host + ".job");
    auto it = job_ns_.find(host);
    if (it != job_ns_.end()) return it->second.fd();
    auto ns = tb::Netns::open(hostnet::job_netns(live_->id(), host));
    if (!ns) throw StepError("the job container of " + host + " is missing: " + ns.error().what());
    return job_ns_.emplace(host, std::move(ns).value()).first->second.fd();
  }
  std::string server_addr(const std::string& name, bool v6) const override {
    int i = node(name);
    for (const auto& l : topo_.links)
      if (l.b.node == i) return v6 ? l.b.addr6.addr.to_string() : l.b.addr4.addr.to_string();
    throw StepError(name + " has no link");
  }
  int take_ports(int count) override {
    int first = next_port_;
    next_port_ += std::max(1, count);
    return first;
  }
  std::string out_base(const std::string& name) const override { return dir_ + "/" + name; }
  uint64_t seed() const override { return opt_.seed; }
  std::map<int, int> bpf_flow_nics(const std::string& host, int port) override {
    std::map<int, int> nic_of;
    std::optional<hostnet::HostAgentState> st;
    if (slurm_) {  // the host agent's state file on its machine
      tb::RunLayout there(tb::RunRegistry::default_base() + "/" + slurm_->run_id);
      tb::ProcessSpec spec{"cat", slurm_->machine_argv(machine_of(host), {"cat", hostnet::host_agent_files(there, host).state})};
      spec.new_session = false;
      auto r = tb::run_capture(spec, std::chrono::seconds(20));
      if (r && r.value().status == 0) {
        auto j = json::parse(r.value().out, nullptr, false);
        if (!j.is_discarded()) try {
            st = hostnet::HostAgentState::from_json(j);
          } catch (const std::exception&) {
          }
      }
    } else {
      st = hostnet::read_host_agent_state(live_->registry().layout(live_->id()), host);
    }
    if (!st || !st->flows) return nic_of;
    for (const auto& f : *st->flows) {
      if (f.proto != IPPROTO_TCP) continue;
      if (f.nic < 0 || static_cast<size_t>(f.nic) >= N(host).nics.size()) continue;
      if (f.dport == port) nic_of[f.sport] = f.nic;
      else if (f.sport == port) nic_of[f.dport] = f.nic;
    }
    return nic_of;
  }
  void fail_workload(const std::string& name, const JobFailure& f) override {
    WorkloadRun* w = workloads_.find(name);
    if (!w) throw StepError("job-fail: no workload " + name + " runs in this phase");
    if (w->finished) throw StepError("job-fail: workload " + name + " has already ended");
    const Workload* plugin = find_workload(w->step.type);
    if (auto why = plugin->fail(*w, *this, f); !why.empty())
      throw StepError("job-fail: workload " + name + ": " + why);
  }

  void claim_task_ips(const std::string& host, const std::string& victim) override {
    const auto& vj = *N(victim).job;
    if (slurm_) {  // done on the claimer's machine, as below
      const auto& hj = *N(host).job;
      bool v4 = vj.has4() && hj.has4(), v6 = vj.has6() && hj.has6();
      (void)ask_machine(host, {{"what", "claim_task_ips"},
                               {"task4", v4 ? vj.task_ip4.to_string() : ""},
                               {"task6", v6 ? vj.task_ip6.to_string() : ""}});
      return;
    }
    auto nl = tb::Netlink::open_in(job_ns(host), host + " container");
    if (!nl) throw StepError(nl.error().what());
    auto lo = nl.value().ifindex("lo");
    if (!lo) throw StepError(lo.error().what());
    // the victim's families that the claimer's own job has
    const auto& hj = *N(host).job;
    bool v4 = vj.has4() && hj.has4(), v6 = vj.has6() && hj.has6();
    if (v4) (void)nl.value().add_address(lo.value(), tb::IfAddr4{vj.task_ip4, 32}, "lo");
    if (v6) (void)nl.value().add_address(lo.value(), tb::IfAddr6{vj.task_ip6, 128}, "lo");
    if (auto claimed = lanes::vip::claim_task_ips(live_->registry().layout(live_->id()), host,
                                                  v4 ? vj.task_ip4.to_string() : "", v6 ? vj.task_ip6.to_string() : "");
        !claimed)
      throw StepError(claimed.error().what());
  }
  double now_s() const override { return std::chrono::duration<double>(Clock::now() - t0_).count(); }
  void mark(const std::string& label, const std::string& kind) override {
    double t = now_s();
    marks_[label] = t;
    pr_.markers.push_back({t, label, kind});
  }
  void say(const std::string& s) override {
    if (opt_.progress) *opt_.progress << "  " << s << "\n" << std::flush;
    if (steps_) *steps_ << fmt::format("{:8.3f} {} {}", live_ || slurm_ ? now_s() : 0.0, ph_.name, s) << "\n" << std::flush;
  }
  void figure(const std::string& key, json value) override { pr_.config[key] = std::move(value); }
  void record_fault(const std::string& label, json record) override {
    pr_.config["fault_" + label] = record;
    faults_[label] = std::move(record);
  }
  bool sleep(milliseconds d) override { return sleep_checked(d); }
  bool eventually(const std::function<bool()>& pred, milliseconds timeout, milliseconds every) override {
    return scenarios::eventually(pred, timeout, every);
  }

 private:
  // What the job hosts were set up as (lanes compare puts two runs' side by
  // side): each setting's distinct values, joined.
  nlohmann::json job_config() const {
    std::map<std::string, std::set<std::string>> v;
    int hosts = 0;
    for (const auto& n : topo_.nodes) {
      if (!n.job) continue;
      ++hosts;
      v["egress"].insert(tb::to_string(n.job->egress));
      v["vip"].insert(tb::to_string(n.job->vip));
      v["family"].insert(tb::to_string(n.job->family));
      v["nics"].insert(std::to_string(n.nics.size()));
      for (const auto& nic : n.nics)
        v["nic_rate"].insert(nic.rate_bps ? fmt::format("{:g} Mbit/s", static_cast<double>(nic.rate_bps) / 1e6) : "unshaped");
    }
    nlohmann::json out = {{"job_hosts", hosts}};
    for (const auto& [k, set] : v) {
      std::string joined;
      for (const auto& x : set) joined += (joined.empty() ? "" : ", ") + x;
      out[k] = joined;
    }
    return out;
  }

  std::string describe_overrides() const {
    std::string s;
    for (const auto& [k, v] : ph_.overrides) s += fmt::format("{}{}={}", s.empty() ? " (" : ", ", k, v);
    return s.empty() ? s : s + ")";
  }
  int node(const std::string& name) const { return topo_.find_node(name); }
  // Whether what runs in namespace NS speaks MPTCP: the job of a host on
  // egress mptcp, and every server where a job is (a listener of MPTCP
  // takes plain TCP too; a connection to a plain listener falls back)
  bool on_mptcp(int ns) {
    if (!topo_.first_on_egress(tb::EgressMode::mptcp)) return false;
    auto of_node = [&](const std::string& name, bool job) {
      int i = node(name);
      if (i < 0) return false;
      const auto& n = topo_.nodes.at(static_cast<size_t>(i));
      return job ? n.on_egress(tb::EgressMode::mptcp) : n.kind == tb::NodeKind::server;
    };
    if (ns <= kRemoteNs) {
      const std::string& where = remote_ns_.at(static_cast<size_t>(kRemoteNs - ns)).second;
      bool job = where.size() > 4 && where.ends_with(".job");
      return of_node(job ? where.substr(0, where.size() - 4) : where, job);
    }
    for (const auto& [host, h] : job_ns_)
      if (h.fd() == ns) return of_node(host, true);
    for (size_t i = 0; i < topo_.nodes.size(); ++i)
      if (topo_.nodes[i].kind == tb::NodeKind::server && live_ && live_->tb().netns(static_cast<int>(i)).fd() == ns)
        return true;
    return false;
  }
  const tb::Node& N(const std::string& name) const { return topo_.nodes.at(static_cast<size_t>(node(name))); }
  const tb::Link& nic_link(const std::string& host, int nic) const {
    return topo_.links.at(static_cast<size_t>(N(host).nics.at(static_cast<size_t>(nic)).link));
  }

  // Sets NIC of every host up or down, all at once: a link change waits in
  // the kernel for an RCU grace period (the qdisc's deactivation), which on
  // two busy cores takes about 140 ms; one after another, 64 NICs took 9 s.
  void set_nics(const std::vector<std::string>& hosts, int nic, bool up) override {
    if (slurm_) return set_nics_remote(hosts, nic, up);
    std::vector<std::pair<int, int>> at;  // node, ifindex (resolved here: the cache is not shared)
    for (const auto& h : hosts) {
      auto idx = live_->tb().ifindex(node(h), nic_link(h, nic).b.ifname);
      if (!idx) throw StepError(idx.error().what());
      at.push_back({node(h), idx.value()});
    }
    std::vector<std::string> errors(hosts.size());
    constexpr size_t kAtOnce = 64;
    for (size_t from = 0; from < hosts.size(); from += kAtOnce) {
      std::vector<std::thread> ts;
      for (size_t i = from; i < std::min(hosts.size(), from + kAtOnce); ++i)
        ts.emplace_back([&, i] {
          const auto& link = nic_link(hosts[i], nic);
          auto& nl = live_->tb().netlink(at[i].first);
          // taking the NIC down flushed its permanent neighbours; the host
          // agent puts them back with the NIC, whoever took it down
          if (auto s = nl.set_link_up(at[i].second, up, link.b.ifname); !s) errors[i] = s.error().what();
        });
      for (auto& t : ts) t.join();
    }
    for (const auto& e : errors)
      if (!e.empty()) throw StepError(e);
  }
  // The job hosts the phase's steps name (host=, victim=, rogue=, from=,
  // to=, rack=, or what a workload says it samples): only they are
  // sampled, so a fleet of a thousand hosts is not dumped over netlink ten
  // times a second for a workload on one of them.
  std::set<std::string> sampled_hosts() const {
    std::set<std::string> out;
    for (const auto& st : ph_.steps) {
      std::vector<std::string> named;
      if (const Workload* w = st.element == "workload" ? find_workload(st.type) : nullptr) {
        named = w->sampled_hosts(st, topo_);
      } else {
        for (const char* k : {"host", "victim", "rogue", "from", "to"})
          if (st.has(k)) named.push_back(st.str(k));
        if (st.has("rack"))
          for (const auto& h : hosts_of(st, topo_)) named.push_back(h);
      }
      for (const auto& h : named)
        if (topo_.is_job_host(h)) out.insert(h);
    }
    return out;
  }

  void start_sampler() {
    std::vector<NicSampler::Nic> nics;
    auto wanted = sampled_hosts();
    for (size_t i = 0; i < topo_.nodes.size(); ++i) {
      const auto& n = topo_.nodes[i];
      if (n.kind != tb::NodeKind::host || !n.job || !wanted.count(n.name)) continue;
      for (const auto& nic : n.nics) {
        NicSampler::Nic x{static_cast<int>(i), n.name, nic.index, topo_.links[nic.link].b.ifname, -1};
        if (slurm_) {
          x.machine = machine_of(n.name);
          x.node = n.name;
        } else {
          x.ns_fd = live_->tb().netns(static_cast<int>(i)).fd();
        }
        nics.push_back(std::move(x));
      }
    }
    NicSampler::RemoteSampler remote;
    if (slurm_)
      remote = [this](int m, const std::vector<std::string>& specs, int64_t t0_ns, const std::string& log) {
        std::vector<std::string> cmd = {lanes_bin(), "nic-counters", slurm_->run_id, "--t0-unix-ns",
                                        std::to_string(t0_ns), "--nic"};
        cmd.insert(cmd.end(), specs.begin(), specs.end());
        tb::ProcessSpec spec{"NIC counters on " + slurm_->machines.at(static_cast<size_t>(m)).name,
                             slurm_->machine_argv(m, cmd)};
        spec.log_path = log;
        spec.die_with_parent = true;
        return spec;
      };
    sampler_.emplace(std::move(nics), t0_, opt_.progress, remote, dir_);
  }

  Proc start_traffic(const std::string& role, int ns, std::vector<std::string> args, const std::string& out,
                     bool hold_for_go) override {
    std::string what = "lanes-traffic " + (args.empty() ? std::string() : args[0]);
    args.insert(args.begin(), traffic());
    args.insert(args.end(), {"--congestion", sc_.tcp_congestion});
    if (on_mptcp(ns) && std::find(args.begin(), args.end(), "--mptcp") == args.end()) args.push_back("--mptcp");
    tb::ProcessSpec spec{what, std::move(args)};
    spec.netns_fd = ns;
    spec.log_path = out;
    spec.hold_sigusr1 = hold_for_go;
    if (ns <= kRemoteNs) {  // srun here, lanes-traffic on the node's machine
      const auto& [m, where] = remote_ns_.at(static_cast<size_t>(kRemoteNs - ns));
      spec.argv = slurm_->remote_argv(m, where, spec.argv, hold_for_go);
      spec.netns_fd = -1;
      spec.hold_sigusr1 = false;  // srun takes the go and passes it on
      spec.die_with_parent = true;  // and ends, and with it the task, if lanes run dies
    }
    std::error_code ec;
    std::filesystem::remove(out, ec);
    auto d = tb::Daemon::start(spec);
    if (!d) throw StepError("starting " + what + ": " + d.error().what());
    if (ns <= kRemoteNs && hold_for_go) held_remote_.insert(d.value().pid());
    return {role, std::move(d).value(), out};
  }
  Proc start_command(const std::string& role, int ns, const std::string& cmd, const std::string& out,
                     std::vector<std::pair<std::string, std::string>> env) override {
    tb::ProcessSpec spec{role, {"/bin/sh", "-c", cmd}};
    spec.netns_fd = ns;
    spec.log_path = out;
    if (ns <= kRemoteNs) {  // srun carries lanes' environment, ENV included, to the task
      const auto& [m, where] = remote_ns_.at(static_cast<size_t>(kRemoteNs - ns));
      spec.argv = slurm_->remote_argv(m, where, spec.argv);
      spec.netns_fd = -1;
      spec.die_with_parent = true;
    }
    spec.env = std::move(env);
    std::error_code ec;
    std::filesystem::remove(out, ec);
    auto d = tb::Daemon::start(spec);
    if (!d) throw StepError("starting " + role + " (" + cmd + "): " + d.error().what());
    return {role, std::move(d).value(), out};
  }
  void start_helper(const std::string& key, const std::string& name, int ns, std::vector<std::string> args,
                    const std::string& log) override {
    if (ns <= kRemoteNs) throw StepError(name + " runs on this machine's nodes only, not over Slurm");
    (void)stop_helper(key);
    args.insert(args.begin(), (opt_.bin_dir.empty() ? tb::self_dir() : opt_.bin_dir) + "/" + name);
    tb::ProcessSpec spec{name + " (" + key + ")", std::move(args)};
    spec.netns_fd = ns;
    spec.log_path = log;
    spec.die_with_parent = true;  // SIGTERM, and with it its cleanup, if lanes dies
    auto d = tb::Daemon::start(spec);
    if (!d) throw StepError("starting " + spec.name + ": " + d.error().what());
    helpers_.emplace(key, std::move(d).value());
  }
  bool stop_helper(const std::string& key) override {
    auto it = helpers_.find(key);
    if (it == helpers_.end()) return false;
    (void)it->second.stop(std::chrono::milliseconds(5000));
    helpers_.erase(it);
    return true;
  }
  void go(std::vector<Proc>& procs) override {
    // a process on another machine takes its go once lanes exec there said
    // it holds it (an earlier SIGUSR1 would end srun or lanes exec)
    for (auto& p : procs)
      if (held_remote_.count(p.d.pid()))
        if (!eventually(
                [&] {
                  std::ifstream in(p.out);
                  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
                  return text.find("lanes exec: holding") != std::string::npos || !p.d.running();
                },
                milliseconds(60'000), milliseconds(20)))
          throw StepError(p.role + " on another machine did not start within 60 s");
    for (auto& p : procs) ::kill(p.d.pid(), SIGUSR1);
  }
  std::string traffic() const {
    return (opt_.bin_dir.empty() ? tb::self_dir() : opt_.bin_dir) + "/lanes-traffic";
  }
  void wait_listening(int fd, int port, bool udp, const std::string& who) override {
    auto listening = [&] {
      tb::ProcessSpec spec{"ss", {"ss", udp ? "-Hlun" : "-Hltn", "sport = :" + std::to_string(port)}};
      spec.netns_fd = fd;
      if (fd <= kRemoteNs) {
        const auto& [m, where] = remote_ns_.at(static_cast<size_t>(kRemoteNs - fd));
        spec.argv = slurm_->remote_argv(m, where, spec.argv);
        spec.netns_fd = -1;
      }
      spec.new_session = false;
      auto r = tb::run_capture(spec, std::chrono::seconds(fd <= kRemoteNs ? 20 : 2));
      return r && r.value().status == 0 && r.value().out.find(std::to_string(port)) != std::string::npos;
    };
    if (!eventually(listening, milliseconds(fd <= kRemoteNs ? 20000 : 5000), milliseconds(20)))
      throw StepError(fmt::format("{} does not listen on port {}", who, port));
  }

  void run_step(const Step& st) {
    if (sampler_) sampler_->set_step(st.describe(), st.element == "workload" || st.element == "wait" ||
                                                        st.element == "sleep" || st.element == "converge");
    if (st.element == "converge") return converge(st);
    if (st.element == "sleep") {
      if (!sleep_checked(st.duration("duration"))) throw StepError("interrupted");
      if (st.has("mark")) mark(st.str("mark"), "mark");
      return;
    }
    if (st.element == "mark") return mark(st.str("name"), "mark");
    if (st.element == "workload") return workloads_.start(st);
    if (st.element == "stop") {
      workloads_.stop(st.str("workload"));
      if (st.has("mark")) mark(st.str("mark"), "mark");
      return;
    }
    if (st.element == "wait") return wait(st);
    if (st.element == "fault") {
      const Fault* f = find_fault(st.type);
      if (!f) throw StepError("no fault type " + st.type);  // the loader knows every type
      return f->apply(st, st.has("mark") ? st.str("mark") : st.type, *this);
    }
    if (st.element == "assert") {
      const LiveAssertion* live = find_live_assertion(st.type);
      Assertion a = live ? live_assert(st, *live) : evaluate(st, result_, ph_.name);
      report(a);
      return;
    }
  }

  void report(Assertion a) {
    a.phase = a.phase.empty() ? ph_.name : a.phase;
    say(fmt::format("{} {}: {} (expected {})", a.passed ? "✓" : "✗", a.name, a.measured, a.expected));
    result_.assertions.push_back(std::move(a));
  }

  void converge(const Step& st) {
    auto t = st.duration("timeout", milliseconds(60'000));
    auto start = Clock::now();
    // read from the switches' kernels: one route and nexthop dump per
    // switch and poll, however many hosts (sw::check_convergence)
    std::string missing;
    bool ok = eventually(
        [&] {
          if (slurm_) return converged_over_slurm(missing);
          auto c = sw::check_convergence(topo_, [&](int n) -> tb::Netlink& { return live_->tb().netlink(n); });
          missing = c.first_missing;
          return c.done();
        },
        t, milliseconds(100));
    double took = std::chrono::duration<double>(Clock::now() - start).count();
    Assertion a;
    a.name = "converge";
    a.line = st.line;
    a.expected = fmt::format(
        "every task IP (IPv4 and IPv6) reaches all its NICs and every switch every rack within {:.0f} s",
        t.count() / 1000.0);
    a.measured = ok ? fmt::format("{:.2f} s", took) : "not after " + fmt::format("{:.0f} s", took);
    a.passed = ok;
    if (!ok) a.message = missing;
    pr_.config["converge_s"] = took;
    say(fmt::format("{} converged: {}", ok ? "✓" : "✗", a.measured));
    if (!ok) {
      result_.assertions.push_back(a);
      throw StepError("the routes did not converge: " + a.message);
    }
    if (st.has("mark")) mark(st.str("mark"), "mark");
  }

  // ---- workloads (workload_runs.cpp) ----

  // the NIC figures of a workload that ended at END: from a sample after its end
  void nic_figures(WorkloadResult& r, double end) {
    if (!sampler_) return;
    sampler_->wait_sample_after(t0_ + std::chrono::microseconds(static_cast<int64_t>((end + kSampleS) * 1e6)));
    pr_.series = sampler_->series();
    compute_share(r);
  }
  void compute_share(WorkloadResult& w) {
    if (const Workload* plugin = find_workload(w.type)) add_nic_figures(w, *plugin, pr_.series, topo_);
  }

  // ---- waits ----

  void wait(const Step& st) {
    if (st.has("workload")) {
      workloads_.wait(st.str("workload"));
    } else {
      auto hosts = hosts_of(st, topo_);
      std::string who = st.has("host") ? st.str("host") + "'s group has" : "the groups of rack " + st.str("rack") + " have";
      size_t count = static_cast<size_t>(st.integer("count"));
      auto t = st.duration("timeout", milliseconds(30'000));
      auto start = Clock::now();
      TaskGroups groups(topo_, *view_, !st.has("family") ? 0 : st.str("family") == "ipv6" ? AF_INET6 : AF_INET);
      bool ok = scenarios::eventually([&] { return groups.all_have(hosts, count); }, t, milliseconds(20));
      double took = std::chrono::duration<double>(Clock::now() - start).count();
      auto missing = [&] {
        size_t n = 0;
        for (const auto& [h, m] : groups.members(hosts)) n += m.size() != count;
        return n;
      };
      Assertion a;
      a.name = fmt::format("wait {} {} members", who, count);
      a.line = st.line;
      a.expected = fmt::format("within {:.1f} s", t.count() / 1000.0);
      a.measured = ok ? fmt::format("after {:.2f} s", took)
                      : hosts.size() == 1 ? fmt::format("{} members after {:.1f} s", groups.members(hosts)[hosts[0]].size(), took)
                                          : fmt::format("{} of {} groups not at {} after {:.1f} s", missing(), hosts.size(), count, took);
      a.passed = ok;
      report(a);
      if (st.has("mark")) pr_.config["wait_" + st.str("mark") + "_s"] = took;
    }
    if (st.has("mark")) mark(st.str("mark"), "mark");
  }

  // ---- faults ----

  void nft(int fd, const std::string& script, const std::string& where) override {
    tb::ProcessSpec spec{"nft", {"nft", script}};
    spec.netns_fd = fd;
    spec.new_session = false;
    if (fd <= kRemoteNs) {
      const auto& [m, on] = remote_ns_.at(static_cast<size_t>(kRemoteNs - fd));
      spec.argv = slurm_->remote_argv(m, on, spec.argv);
      spec.netns_fd = -1;
    }
    auto r = tb::run_capture(spec, std::chrono::seconds(fd <= kRemoteNs ? 30 : 5));
    if (!r || r.value().status != 0)
      throw StepError("nft in " + where + " failed (" + script + ")" +
                      (r ? ": exit " + std::to_string(r.value().status) : ": " + std::string(r.error().what())));
  }

  pid_t daemon_pid(const std::string& node_name, const std::string& daemon) override {
    if (slurm_) return static_cast<pid_t>(ask_machine(node_name, {{"what", "daemon_pid"}, {"daemon", daemon}}).value("ok", 0));
    for (const auto& d : tb::supervised_daemons(live_->registry(), live_->id()))
      if (d.serves_node(node_name) && d.name == daemon) return d.pid;
    return 0;
  }
  bool kill_daemon(const std::string& node_name, pid_t pid) override {
    if (slurm_) return ask_machine(node_name, {{"what", "kill_daemon"}, {"pid", pid}}).value("ok", false);
    return tb::kill_process_group(pid);
  }
  bool daemon_running(const std::string& node_name, pid_t pid) override {
    if (slurm_) return ask_machine(node_name, {{"what", "daemon_running"}, {"pid", pid}}).value("ok", false);
    return tb::process_start_time(pid) != 0;
  }
  // a question about NODE to its machine's lanes fabric-query (a run over Slurm)
  json ask_machine(const std::string& node_name, json q) {
    q["node"] = node(node_name);
    auto answer = ask_(node(node_name), q.dump());
    if (!answer) throw StepError(tb::message_of(answer.error()));
    auto j = json::parse(answer.value(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) throw StepError("an answer that is no JSON: " + answer.value());
    if (j.contains("error")) throw StepError(j["error"].get<std::string>());
    return j;
  }

  // ---- assertions on the live testbed ----

  // An assertion on the live run: its plug-in, over this run's fabric.
  Assertion live_assert(const Step& st, const LiveAssertion& plugin) {
    LiveContext ctx{topo_,
                    *view_,
                    marks_,
                    [this] { return sampler_ ? sampler_->series() : std::vector<Series>{}; },
                    faults_,
                    [](const std::function<bool()>& pred, milliseconds timeout, milliseconds every) {
                      return scenarios::eventually(pred, timeout, every);
                    },
                    {},
                    [this](const std::string& host) -> std::optional<hostnet::HostAgentState> {
                      if (!live_) return std::nullopt;
                      return hostnet::read_host_agent_state(live_->registry().layout(live_->id()), host);
                    }};
    Assertion a = plugin.check(st, ctx);
    a.line = st.line;
    a.phase = ph_.name;
    for (const auto& [k, v] : ctx.figures) pr_.config[k] = v;
    return a;
  }

  void copy_logs() {
    if (!live_) return;
    std::error_code ec;
    std::filesystem::create_directories(dir_ + "/logs", ec);
    for (const auto& e : std::filesystem::directory_iterator(live_->registry().layout(live_->id()).logs(), ec))
      std::filesystem::copy_file(e.path(), dir_ + "/logs/" + e.path().filename().string(),
                                 std::filesystem::copy_options::overwrite_existing, ec);
    std::filesystem::copy_file(live_->registry().layout(live_->id()).events(), dir_ + "/events.jsonl",
                               std::filesystem::copy_options::overwrite_existing, ec);
  }

  const Scenario& sc_;
  const Phase& ph_;
  const RunOptions& opt_;
  ScenarioResult& result_;
  PhaseResult& pr_;
  tb::Topology topo_;  // the phase's, with the BFD interval lanes chose where the file left it
  std::ofstream* steps_;
  std::string dir_;
  std::optional<tb::LiveRun> live_;
  std::optional<LiveFabric> fabric_;  // over live_
  FabricView* view_ = nullptr;
  std::optional<RemoteFabric> remote_view_;  // over slurm_: each question asked on its node's machine
  RemoteFabric::Ask ask_;                    // lanes fabric-query on a node's machine

  // ---- a run over several machines (lanes run --over-slurm) ----
  std::optional<tb::SlurmRun> slurm_;
  tb::Placement placement_;
  // A node's namespace on another machine is no fd here: node_ns and job_ns
  // hand out kRemoteNs - i for remote_ns_[i] (its machine, and the node as
  // lanes exec names it), and whatever starts a process there starts srun.
  static constexpr int kRemoteNs = -2;
  std::vector<std::pair<int, std::string>> remote_ns_;
  std::set<pid_t> held_remote_;  // srun of a process on another machine that waits for its go
  std::map<std::string, tb::Daemon> helpers_;  // start_helper's, by key (ended before the run goes down)
  int remote_ns(const std::string& node_name, const std::string& where) {
    int m = machine_of(node_name);
    for (size_t i = 0; i < remote_ns_.size(); ++i)
      if (remote_ns_[i].first == m && remote_ns_[i].second == where) return kRemoteNs - static_cast<int>(i);
    remote_ns_.push_back({m, where});
    return kRemoteNs - static_cast<int>(remote_ns_.size() - 1);
  }
  int machine_of(const std::string& node_name) const {
    int i = node(node_name);
    if (i < 0) throw StepError("no node " + node_name);
    return placement_.machine_of.at(static_cast<size_t>(i));
  }
  std::string lanes_bin() const { return (opt_.bin_dir.empty() ? tb::self_dir() : opt_.bin_dir) + "/lanes"; }

  // Why the run failed when its shards' step ended under it: the job's
  // state in Slurm and each machine's last word.
  std::string lost_shards(const std::string& step_saw) {
    tb::ProcessSpec spec{"squeue", {"squeue", "-h", "-j", slurm_->job_id, "-o", "%T"}};
    spec.new_session = false;
    auto q = tb::run_capture(spec, std::chrono::seconds(20));
    std::string state = q && q.value().status == 0 ? q.value().out : "";
    while (!state.empty() && (state.back() == '\n' || state.back() == ' ')) state.pop_back();
    std::string words;
    auto w = slurm_->words();
    for (size_t i = 0; i < w.size(); ++i)
      words += fmt::format("{}{}: {}", i ? ", " : "", slurm_->machines[i].name,
                           w[i].down ? "took its part down" : w[i].failed ? "failed" : "lost (said '" + w[i].last + "' last)");
    return fmt::format("the run's shards ended under it (Slurm job {} is {}): {}; the step then: {}", slurm_->job_id,
                       state.empty() ? "gone: cancelled, or it ended" : state, words, step_saw);
  }

  // every machine's shard says its switches converged (each reads its own)
  bool converged_over_slurm(std::string& missing) {
    auto words = slurm_->words();
    for (size_t i = 0; i < words.size(); ++i)
      if (!words[i].converged) {
        missing = slurm_->machines[i].name + ": " + words[i].detail.value("missing", std::string("not converged"));
        return false;
      }
    return true;
  }

  void start_over_slurm(const std::string& run_id, uint64_t cpus) {
    const auto& alloc = *opt_.over_slurm;
    try {
      placement_ = tb::place(topo_, static_cast<int>(alloc.machines.size()));
    } catch (const tb::InputError& e) {
      throw StepError(e.what());
    }
    tb::SlurmRunOptions so;
    so.run_id = run_id;
    // the file every machine reads: the scenario's topology file where it
    // holds the text the phase runs, else the text written beside the
    // phase's results (--out on a file system every machine sees)
    so.topology_file = sc_.topology_file;
    {
      std::ifstream in(sc_.topology_file, std::ios::binary);
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (!in.good() && !in.eof()) text.clear();
      if (text != sc_.topology_text) {
        so.topology_file = std::filesystem::absolute(dir_ + "/topology.xml").string();
        std::ofstream(so.topology_file, std::ios::binary) << sc_.topology_text;
      }
    }
    so.overrides = ph_.overrides;
    so.bfd_cpus = cpus;
    so.lanes = lanes_bin();
    so.held = true;  // a run of lanes run is dead once lanes run is
    auto r = tb::SlurmRun::start(alloc, so);
    if (!r) throw StepError("bringing the topology up over Slurm: " + tb::message_of(r.error()));
    slurm_.emplace(std::move(r).value());
    pr_.run_id = slurm_->run_id;
    ask_ = [this](int n, const std::string& query) -> tb::Result<std::string> {
      int m = placement_.machine_of.at(static_cast<size_t>(n));
      tb::ProcessSpec spec{"fabric-query", slurm_->machine_argv(m, {lanes_bin(), "fabric-query", slurm_->run_id, query})};
      spec.new_session = false;
      auto answer = tb::run_capture(spec, std::chrono::seconds(30));
      if (!answer) return answer.error();
      if (answer.value().status != 0)
        return tb::os_error(EIO, fmt::format("lanes fabric-query on {} exited with status {}",
                                             slurm_->machines.at(static_cast<size_t>(m)).name, answer.value().status));
      return answer.value().out;
    };
    remote_view_.emplace(ask_);
    view_ = &*remote_view_;
    std::vector<tb::MachineWord> words;
    std::string why = slurm_->follow(
        false, milliseconds(600'000),
        [&](const tb::ShardEvent& e) {
          if (e.event == "up")
            say(fmt::format("phase {}: {} is up ({} nodes, {} tunnels)", ph_.name, e.name, e.detail.value("nodes", 0),
                            e.detail.value("tunnels", 0)));
        },
        [] { return tb::interrupted(); }, words);
    if (!why.empty()) {
      down();
      throw StepError(fmt::format("bringing the topology up over {} machines: {}", alloc.machines.size(), why));
    }
  }

  // every NIC at once: one step per host on its machine (ip link set)
  void set_nics_remote(const std::vector<std::string>& hosts, int nic, bool up) {
    std::vector<tb::Daemon> procs;
    std::vector<std::string> errors;
    for (const auto& h : hosts) {
      tb::ProcessSpec spec{"ip link on " + h,
                           slurm_->remote_argv(machine_of(h), h,
                                               {"ip", "link", "set", nic_link(h, nic).b.ifname, up ? "up" : "down"})};
      spec.new_session = false;
      auto d = tb::Daemon::start(spec);
      if (!d) errors.push_back(tb::message_of(d.error()));
      else procs.push_back(std::move(d).value());
    }
    for (size_t i = 0; i < procs.size(); ++i)
      if (int rc = procs[i].wait(); rc != 0) errors.push_back(fmt::format("{}: exit {}", procs[i].name(), rc));
    if (!errors.empty()) throw StepError("setting NICs over several machines: " + errors.front());
  }
  std::map<std::string, tb::Netns> job_ns_;
  std::optional<NicSampler> sampler_;
  Clock::time_point t0_;
  std::map<std::string, double> marks_ = {{"start", 0.0}};
  WorkloadRuns workloads_{*this, marks_, pr_, [this](WorkloadResult& r, double end) { nic_figures(r, end); },
                          [this](Assertion a) { report(std::move(a)); }};
  std::map<std::string, json> faults_;
  int next_port_ = 5301;
};

reports::TopologyView view_of(const tb::Topology& t) {
  reports::TopologyView v;
  v.name = t.name;
  for (const auto& n : t.nodes)
    v.nodes.push_back({n.name, tb::to_string(n.kind), n.rack >= 0 ? t.racks[static_cast<size_t>(n.rack)].name : ""});
  for (const auto& l : t.links)
    v.links.push_back({t.nodes[static_cast<size_t>(l.a.node)].name, t.nodes[static_cast<size_t>(l.b.node)].name,
                       tb::to_string(l.kind)});
  return v;
}

}  // namespace

namespace {
// What SC needs that this kernel lacks, said with the first place that
// asks for it ("" when it can run): an impairment only netem gives, in a
// phase's topology or in a fault.
std::string missing_for(const Scenario& sc) {
  for (const auto& ph : sc.phases)
    if (const auto* n = ph.topology.first_on_egress(testbed::EgressMode::mptcp)) {
      static const bool mptcp = testbed::probe_kernel_features().mptcp;
      if (!mptcp)
        return fmt::format("phase {} puts {}'s job on egress mptcp; this kernel has no MPTCP (CONFIG_MPTCP, "
                           "net.mptcp.enabled)", ph.name, n->name);
    }
  // delay, jitter and reorder are netem's or lanes' delay line's (it needs
  // BPF), as each phase's topology's impair-engine and the kernel say
  for (const auto& ph : sc.phases) {
    std::string where;
    for (const auto& l : ph.topology.links)
      if (where.empty() && l.impair.netem())
        where = fmt::format("{} at {}:{}", l.impair.netem_parts(), l.impair_loc.file, l.impair_loc.line);
    for (const auto& st : ph.steps)
      if (where.empty() && st.element == "fault" && st.type == "impair")
        for (const char* k : testbed::kNetemOnly)
          if (where.empty() && st.has(k)) where = fmt::format("{} at {}:{}", k, sc.file, st.line);
    if (where.empty()) continue;
    if (auto why = testbed::delay_engine_problem(ph.topology); !why.empty())
      return fmt::format("phase {} asks for {}; {}", ph.name, where, why);
  }
  return "";
}
}  // namespace

reports::ScenarioResult run_scenario(const Scenario& sc, const RunOptions& opt_in) {
  RunOptions opt = opt_in;
  ScenarioResult r;
  r.name = sc.name;
  r.description = sc.description;
  r.file = sc.file;
  if (!sc.phases.empty()) r.topology = view_of(sc.phases.back().topology);
  auto t0 = Clock::now();
  if (opt.out_dir.empty()) opt.out_dir = "/tmp/lanes-scenario-" + std::to_string(::getpid());
  opt.out_dir += "/" + sc.name;
  std::filesystem::create_directories(opt.out_dir);
  std::ofstream steps(opt.out_dir + "/steps.log", std::ios::trunc);
  if (opt.progress) *opt.progress << "scenario " << sc.name << ": " << sc.description << "\n" << std::flush;
  if (r.not_run = missing_for(sc); !r.not_run.empty()) {
    if (opt.progress) *opt.progress << "  not run: " << r.not_run << "\n";
    steps << "not run: " << r.not_run << "\n";
    return r;
  }
  for (size_t i = 0; i < sc.phases.size(); ++i) {
    const auto& ph = sc.phases[i];
    r.phases.emplace_back();
    r.phases.back().name = ph.name;
    PhaseRun run(sc, ph, opt, r, r.phases.back(), &steps);
    try {
      run.run();
    } catch (const std::exception& e) {
      r.error = fmt::format("phase {}: {}", ph.name, e.what());
      if (opt.progress) *opt.progress << "  ✗ " << r.error << "\n";
      steps << "error: " << r.error << "\n";
    }
    bool last = i + 1 == sc.phases.size() || !r.error.empty();
    if (last && opt.keep && run.run_id().size()) {
      if (opt.kept_run) *opt.kept_run = run.run_id();
      run.keep();
    } else {
      run.down();
    }
    if (!r.error.empty()) break;
  }
  if (r.error.empty())
    for (const auto& a : sc.assertions) {
      auto x = evaluate(a, r, "");
      std::string line = fmt::format("{} {}: {} (expected {})", x.passed ? "✓" : "✗", x.name, x.measured, x.expected);
      if (opt.progress) *opt.progress << "  " << line << "\n";
      steps << line << "\n";
      r.assertions.push_back(std::move(x));
    }
  r.duration_s = std::chrono::duration<double>(Clock::now() - t0).count();
  r.passed = r.error.empty() && !r.assertions.empty() &&
             std::all_of(r.assertions.begin(), r.assertions.end(), [](const Assertion& a) { return a.passed; });
  steps.close();
  r.log_tail = lanes::log::tail_of(opt.out_dir + "/steps.log", 40);
  return r;
}

}  // namespace lanes::scenarios
