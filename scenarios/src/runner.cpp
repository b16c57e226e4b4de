#include "lanes/scenarios/runner.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <condition_variable>
#include <mutex>
#include <numeric>
#include <set>
#include <sstream>
#include <thread>

#include "assertions/live_assertions.hpp"
#include "lanes/core/interrupt.hpp"
#include "lanes/core/live_run.hpp"
#include "lanes/core/log.hpp"
#include "lanes/core/process.hpp"
#include "lanes/core/supervisor.hpp"
#include "lanes/core/wait.hpp"
#include "lanes/hostnet/hostnet.hpp"
#include "lanes/scenarios/fabric_view.hpp"
#include "lanes/scenarios/live_assertion.hpp"
#include "lanes/switch/convergence.hpp"
#include "lanes/switch/gobgp_client.hpp"
#include "lanes/switch/switch_config.hpp"
#include "lanes/switch/switches.hpp"
#include "lanes/vip/deploy.hpp"

namespace lanes::scenarios {

namespace tb = lanes::testbed;
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

constexpr double kSampleS = 0.1;

// A step failed in a way that ends the phase (the testbed could not do
// what the scenario asked).
struct StepError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

bool sleep_checked(milliseconds d) {
  auto end = Clock::now() + d;
  while (Clock::now() < end) {
    if (tb::interrupted()) return false;
    std::this_thread::sleep_for(std::min<Clock::duration>(end - Clock::now(), milliseconds(50)));
  }
  return true;
}

template <typename F>
bool eventually(F pred, milliseconds timeout, milliseconds every = milliseconds(100)) {
  return tb::eventually(pred, timeout, every, [] { return tb::interrupted(); });
}

json last_json_line(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty() && line[0] == '{') last = line;
  if (last.empty()) return {};
  try {
    return json::parse(last);
  } catch (const std::exception&) {
    return {};
  }
}

// ---- the phase's NIC counters, sampled in the background ----

class Sampler {
 public:
  struct Nic {
    int host;
    std::string host_name;
    int nic;
    std::string ifname;
    int ns_fd;
  };
  Sampler(std::vector<Nic> nics, Clock::time_point t0, std::ostream* progress)
      : nics_(std::move(nics)), t0_(t0), progress_(progress) {
    tx_.resize(nics_.size());
    rx_.resize(nics_.size());
    thread_ = std::thread([this] { loop(); });
  }
  ~Sampler() { stop(); }
  void stop() {
    stop_ = true;
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    if (progress_ && tty_ && printed_) *progress_ << "\r\033[K" << std::flush;
  }
  // Blocks until a sample taken after T exists (at most a second).
  void wait_sample_after(Clock::time_point t) {
    std::unique_lock<std::mutex> g(mu_);
    cv_.wait_for(g, std::chrono::seconds(1), [&] { return last_sample_ > t || stop_; });
  }
  void set_step(const std::string& s, bool long_step) {
    std::lock_guard<std::mutex> g(mu_);
    step_ = s;
    step_start_ = Clock::now();
    long_step_ = long_step;
  }
  // Gbit/s per sample and NIC (sample i covers (i, i+1] * 100 ms)
  std::vector<Series> series() const {
    std::lock_guard<std::mutex> g(mu_);
    std::vector<Series> out;
    for (size_t k = 0; k < nics_.size(); ++k)
      for (int dir = 0; dir < 2; ++dir) {
        const auto& c = dir ? rx_[k] : tx_[k];
        Series s;
        s.name = fmt::format("{} nic{} {}", nics_[k].host_name, nics_[k].nic, dir ? "rx" : "tx");
        s.unit = "Gbit/s";
        s.interval_s = kSampleS;
        for (size_t i = 1; i < c.size(); ++i)
          s.values.push_back(static_cast<double>(c[i] - c[i - 1]) * 8 / kSampleS / 1e9);
        out.push_back(std::move(s));
      }
    return out;
  }

 private:
  void loop() {
    std::map<int, tb::Netlink> nl;  // per ns fd, opened in this thread
    for (const auto& n : nics_)
      if (!nl.count(n.ns_fd)) {
        auto x = tb::Netlink::open_in(n.ns_fd, n.host_name);
        if (x) nl.emplace(n.ns_fd, std::move(x).value());
      }
    tty_ = progress_ && ::isatty(STDERR_FILENO);
    auto last_print = Clock::now();
    for (uint64_t i = 0; !stop_; ++i) {
      std::this_thread::sleep_until(t0_ + std::chrono::microseconds(static_cast<int64_t>(i * kSampleS * 1e6)));
      std::map<int, std::vector<tb::LinkInfo>> links;
      for (auto& [fd, n] : nl) {
        auto l = n.links();
        if (l) links[fd] = std::move(l).value();
      }
      {
        std::lock_guard<std::mutex> g(mu_);
        for (size_t k = 0; k < nics_.size(); ++k) {
          uint64_t tx = tx_[k].empty() ? 0 : tx_[k].back(), rx = rx_[k].empty() ? 0 : rx_[k].back();
          for (const auto& l : links[nics_[k].ns_fd])
            if (l.name == nics_[k].ifname) tx = l.tx_bytes, rx = l.rx_bytes;
          tx_[k].push_back(tx);
          rx_[k].push_back(rx);
        }
        last_sample_ = Clock::now();
      }
      cv_.notify_all();
      if (progress_ && i % 10 == 0 && i > 0) print_progress(last_print);
    }
  }
  void print_progress(Clock::time_point& last) {
    std::string step;
    double elapsed;
    bool long_step;
    std::string rates;
    {
      std::lock_guard<std::mutex> g(mu_);
      step = step_;
      long_step = long_step_;
      elapsed = std::chrono::duration<double>(Clock::now() - step_start_).count();
      // per host its NICs' Gbit/s over the last second; the 8 busiest shown
      std::vector<std::pair<std::string, std::vector<double>>> hosts;
      for (size_t k = 0; k < nics_.size(); ++k) {
        const auto& t = tx_[k];
        const auto& r = rx_[k];
        if (t.size() < 11) return;
        double g1 = static_cast<double>(t.back() - t[t.size() - 11] + r.back() - r[r.size() - 11]) * 8 / 1e9;
        if (hosts.empty() || hosts.back().first != nics_[k].host_name) hosts.push_back({nics_[k].host_name, {}});
        hosts.back().second.push_back(g1);
      }
      constexpr size_t kShown = 8;
      auto total = [](const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); };
      std::vector<size_t> order(hosts.size());
      std::iota(order.begin(), order.end(), size_t{0});
      if (hosts.size() > kShown) {
        std::stable_sort(order.begin(), order.end(),
                         [&](size_t a, size_t b) { return total(hosts[a].second) > total(hosts[b].second); });
        order.resize(kShown);
        std::sort(order.begin(), order.end());
      }
      for (size_t i : order) {
        rates += " " + hosts[i].first + ":";
        for (double rate : hosts[i].second) rates += fmt::format(" {:.2f}", rate);
      }
      if (hosts.size() > kShown) rates += fmt::format(" (+{} more hosts)", hosts.size() - kShown);
    }
    if (!long_step || elapsed < 2) return;
    if (tty_) {
      *progress_ << "\r\033[K  " << fmt::format("{} · {:.0f} s · Gbit/s per NIC{}", step, elapsed, rates)
                 << std::flush;
      printed_ = true;
    } else if (Clock::now() - last >= std::chrono::seconds(5)) {
      *progress_ << fmt::format("  … {} · {:.0f} s · Gbit/s per NIC{}\n", step, elapsed, rates) << std::flush;
      last = Clock::now();
    }
  }

  std::vector<Nic> nics_;
  Clock::time_point t0_;
  std::ostream* progress_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Clock::time_point last_sample_;
  std::vector<std::vector<uint64_t>> tx_, rx_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::string step_;
  Clock::time_point step_start_ = Clock::now();
  bool long_step_ = false, tty_ = false, printed_ = false;
};

// ---- a phase being run ----

struct Proc {
  std::string role;  // "send h1", "recv storage"
  tb::Daemon d;
  std::string out;
};

struct Running {
  Step step;
  int port = 0;
  double start_s = 0;
  std::vector<Proc> servers;  // receivers, serve, probe-recv: stopped or awaited after the clients
  std::vector<Proc> clients;
  std::vector<std::string> hosts;  // a checkpoint's hosts, in the order of servers and clients
  double started_in_s = 0;  // a burst: the time it took to start its clients before their go
  bool finished = false;
};

class PhaseRun {
 public:
  PhaseRun(const Scenario& sc, const Phase& ph, const RunOptions& opt, ScenarioResult& result, PhaseResult& pr,
           std::ofstream* steps)
      : sc_(sc), ph_(ph), opt_(opt), result_(result), pr_(pr), topo_(ph.topology), steps_(steps) {}

  void run() {
    dir_ = opt_.out_dir + "/" + ph_.name;
    std::filesystem::create_directories(dir_);
    tb::RunRegistry reg;
    say(fmt::format("phase {}: bringing up {}{}", ph_.name, topo_.name, describe_overrides()));
    tb::LiveRunOptions lo{"", ph_.topology_xml, sc_.topology_file, opt_.bin_dir};
    lo.held = true;  // a run of lanes run is dead once lanes run is (until --keep leaves it up)
    lo.roles = opt_.roles;
    if (!opt_.run_id_prefix.empty()) {
      int n = opt_.phase_seq ? ++*opt_.phase_seq : 1;
      lo.run_id = opt_.run_id_prefix + std::to_string(n);
      if (!tb::RunRegistry::valid_id(lo.run_id))
        throw StepError(fmt::format("run id {} (--run-id {} and phase {}) is longer than 8 characters", lo.run_id,
                                    opt_.run_id_prefix, n));
    }
    auto live = tb::LiveRun::start(topo_, reg, lo);
    if (!live) throw StepError("bringing the topology up: " + std::string(live.error().what()));
    live_.emplace(std::move(live).value());
    pr_.run_id = live_->id();
    say(fmt::format("phase {}: run {} is up (lanes status {})", ph_.name, pr_.run_id, pr_.run_id));
    pr_.config = {{"topology", topo_.name}, {"overrides", ph_.overrides}};
    t0_ = Clock::now();
    start_sampler();
    std::exception_ptr failure;
    try {
      for (const auto& st : ph_.steps) {
        if (tb::interrupted()) throw StepError("interrupted");
        run_step(st);
      }
    } catch (...) {
      failure = std::current_exception();
    }
    // whatever happened: stop what still runs, keep what it measured
    for (auto& [name, w] : running_)
      if (!w.finished) finish(w, true);
    pr_.duration_s = now_s();
    if (sampler_) {
      sampler_->stop();
      pr_.series = sampler_->series();
      for (auto& w : pr_.workloads) compute_share(w);
    }
    copy_logs();
    if (failure) std::rethrow_exception(failure);
  }

  // The run stays up for the user (lanes run --keep).
  void keep() {
    if (live_) live_->keep();
  }
  void down() {
    if (!live_) return;
    auto rep = live_->down();
    for (const auto& e : rep.errors) say("teardown: " + e);
    live_.reset();
  }
  std::string run_id() const { return live_ ? live_->id() : ""; }

 private:
  std::string describe_overrides() const {
    std::string s;
    for (const auto& [k, v] : ph_.overrides) s += fmt::format("{}{}={}", s.empty() ? " (" : ", ", k, v);
    return s.empty() ? s : s + ")";
  }
  void say(const std::string& s) {
    if (opt_.progress) *opt_.progress << "  " << s << "\n" << std::flush;
    if (steps_) *steps_ << fmt::format("{:8.3f} {} {}", live_ ? now_s() : 0.0, ph_.name, s) << "\n" << std::flush;
  }
  double now_s() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }
  void mark(const std::string& label, const std::string& kind) {
    double t = now_s();
    marks_[label] = t;
    pr_.markers.push_back({t, label, kind});
  }

  int node(const std::string& name) const { return topo_.find_node(name); }
  const tb::Node& N(const std::string& name) const { return topo_.nodes.at(static_cast<size_t>(node(name))); }
  int ns_fd(const std::string& name) { return live_->tb().netns(node(name)).fd(); }
  int job_fd(const std::string& host) {
    auto it = job_ns_.find(host);
    if (it != job_ns_.end()) return it->second.fd();
    auto ns = tb::Netns::open(hostnet::job_netns(live_->id(), host));
    if (!ns) throw StepError("the job container of " + host + " is missing: " + ns.error().what());
    return job_ns_.emplace(host, std::move(ns).value()).first->second.fd();
  }
  // the address a server answers on
  std::string server_addr(const std::string& name) const {
    int i = node(name);
    for (const auto& l : topo_.links)
      if (l.b.node == i) return l.b.addr4.addr.to_string();
    throw StepError(name + " has no link");
  }
  const tb::Link& nic_link(const std::string& host, int nic) const {
    return topo_.links.at(static_cast<size_t>(N(host).nics.at(static_cast<size_t>(nic)).link));
  }
  std::string task_prefix(const std::string& host) const { return N(host).job->task_ip4.to_string() + "/32"; }
  int switch_of(const std::string& host) const {
    return topo_.racks.at(static_cast<size_t>(N(host).rack)).switch_node;
  }

  // the switch's group for HOST's task IP: {group id, members}
  std::pair<uint32_t, std::vector<uint32_t>> group(const std::string& host) {
    return live_->tb().netlink(switch_of(host)).route_group(task_prefix(host));
  }
  std::vector<std::string> hosts_of(const Step& st) const { return scenarios::hosts_of(st, topo_); }
  // Each host's group members and buckets as its switch holds them (one
  // route dump and one nexthop or bucket dump per switch, however many hosts).
  std::map<std::string, std::vector<uint32_t>> groups(const std::vector<std::string>& hosts) {
    LiveFabric fabric(*live_);
    return TaskGroups(topo_, fabric).members(hosts);
  }
  std::map<std::string, std::vector<uint32_t>> buckets_of(const std::vector<std::string>& hosts) {
    LiveFabric fabric(*live_);
    auto b = TaskGroups(topo_, fabric).buckets(hosts);
    if (!b) throw StepError(b.error().what());
    return std::move(b).value();
  }
  // Sets NIC of every host up or down, all at once: a link change waits in
  // the kernel for an RCU grace period (the qdisc's deactivation), which on
  // two busy cores takes about 140 ms; one after another, 64 NICs took 9 s.
  void set_nics(const std::vector<std::string>& hosts, int nic, bool up) {
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
          const auto& ifname = nic_link(hosts[i], nic).b.ifname;
          if (auto s = live_->tb().netlink(at[i].first).set_link_up(at[i].second, up, ifname); !s)
            errors[i] = s.error().what();
        });
      for (auto& t : ts) t.join();
    }
    for (const auto& e : errors)
      if (!e.empty()) throw StepError(e);
  }
  // true when every host's group has COUNT members
  bool all_members(const std::vector<std::string>& hosts, size_t count) {
    LiveFabric fabric(*live_);
    return TaskGroups(topo_, fabric).all_have(hosts, count);
  }
  std::vector<uint32_t> buckets(const std::string& host) {
    auto [g, m] = group(host);
    if (!g) return {};
    auto b = live_->tb().netlink(switch_of(host)).nexthop_buckets(g);
    return b ? b.value() : std::vector<uint32_t>{};
  }

  // The job hosts the phase's steps name (host=, victim=, rogue=, from=,
  // to=, a bootstrap's hosts= or every job host): only they are sampled,
  // so a fleet of a thousand hosts is not dumped over netlink ten times a
  // second for a workload on one of them.
  std::set<std::string> sampled_hosts() const {
    std::set<std::string> out;
    auto job_host = [&](const std::string& h) {
      int i = topo_.find_node(h);
      return i >= 0 && topo_.nodes[static_cast<size_t>(i)].kind == tb::NodeKind::host &&
             topo_.nodes[static_cast<size_t>(i)].job;
    };
    for (const auto& st : ph_.steps) {
      for (const char* k : {"host", "victim", "rogue", "from", "to"})
        if (st.has(k) && job_host(st.str(k))) out.insert(st.str(k));
      if (st.has("rack"))
        for (const auto& h : hosts_of(st)) out.insert(h);
      if (st.element == "workload" && st.type == "bootstrap") {
        // a burst's figures come from its fetchers, not the NIC counters:
        // they are sampled for the report's charts up to 32 hosts, not a
        // fleet's thousand namespaces ten times a second
        std::set<std::string> burst;
        if (st.has("hosts")) {
          std::stringstream ss(st.str("hosts"));
          for (std::string h; std::getline(ss, h, ',');)
            if (job_host(h)) burst.insert(h);
        } else {
          for (const auto& n : topo_.nodes)
            if (n.kind == tb::NodeKind::host && n.job) burst.insert(n.name);
        }
        if (burst.size() <= 32) out.insert(burst.begin(), burst.end());
      }
    }
    return out;
  }

  void start_sampler() {
    std::vector<Sampler::Nic> nics;
    auto wanted = sampled_hosts();
    for (size_t i = 0; i < topo_.nodes.size(); ++i) {
      const auto& n = topo_.nodes[i];
      if (n.kind != tb::NodeKind::host || !n.job || !wanted.count(n.name)) continue;
      for (const auto& nic : n.nics)
        nics.push_back({static_cast<int>(i), n.name, nic.index, topo_.links[nic.link].b.ifname,
                        live_->tb().netns(static_cast<int>(i)).fd()});
    }
    sampler_.emplace(std::move(nics), t0_, opt_.progress);
  }

  tb::Daemon start_proc(const std::string& what, int fd, std::vector<std::string> argv, const std::string& out,
                        bool hold_for_go = false) {
    tb::ProcessSpec spec{what, std::move(argv)};
    spec.netns_fd = fd;
    spec.log_path = out;
    spec.hold_sigusr1 = hold_for_go;
    std::error_code ec;
    std::filesystem::remove(out, ec);
    auto d = tb::Daemon::start(spec);
    if (!d) throw StepError("starting " + what + ": " + d.error().what());
    return std::move(d).value();
  }
  std::string traffic() const {
    return (opt_.bin_dir.empty() ? tb::self_dir() : opt_.bin_dir) + "/lanes-traffic";
  }
  void wait_listening(int fd, int port, bool udp, const std::string& who) {
    auto listening = [&] {
      tb::ProcessSpec spec{"ss", {"ss", udp ? "-Hlun" : "-Hltn", "sport = :" + std::to_string(port)}};
      spec.netns_fd = fd;
      spec.new_session = false;
      auto r = tb::run_capture(spec, std::chrono::seconds(2));
      return r && r.value().status == 0 && r.value().out.find(std::to_string(port)) != std::string::npos;
    };
    if (!eventually(listening, milliseconds(5000), milliseconds(20)))
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
    if (st.element == "workload") return start_workload(st);
    if (st.element == "stop") {
      auto& w = running_.at(st.str("workload"));
      if (!w.finished) finish(w, true);
      if (st.has("mark")) mark(st.str("mark"), "mark");
      return;
    }
    if (st.element == "wait") return wait(st);
    if (st.element == "fault") return fault(st);
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
    // switch and poll, however many hosts (tb::check_convergence)
    std::string missing;
    bool ok = eventually(
        [&] {
          auto c = tb::check_convergence(topo_, [&](int n) -> tb::Netlink& { return live_->tb().netlink(n); });
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

  // ---- workloads ----

  // A workload with repeat="N" runs N times back to back; it is reported
  // once, by its median run (completion times have a tail: a flow that
  // loses its last segments waits for a retransmission timeout), with every
  // run's time beside it and every run's bytes and errors counted.
  void start_workload(const Step& st) {
    int repeat = st.integer("repeat", 1);
    if (repeat <= 1) return start_once(st);
    std::string name = st.str("name");
    std::vector<WorkloadResult> runs;
    for (int i = 0; i < repeat; ++i) {
      Step one = st;
      one.attrs["name"] = fmt::format("{}#{}", name, i + 1);
      one.attrs.erase("repeat");
      start_once(one);
      runs.push_back(pr_.workloads.back());
      pr_.workloads.pop_back();
    }
    std::vector<size_t> order(runs.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return runs[a].figures.value("seconds", 0.0) < runs[b].figures.value("seconds", 0.0);
    });
    WorkloadResult r = runs[order[order.size() / 2]];
    r.name = name;
    r.start_s = runs.front().start_s;
    r.end_s = runs.back().end_s;
    json secs = json::array();
    int errors = 0;
    bool verified = true;
    uint64_t bytes = 0;
    for (const auto& x : runs) {
      secs.push_back(x.figures.value("seconds", 0.0));
      errors += x.figures.value("connection_errors", 0);
      verified = verified && x.figures.value("bytes_verified", false);
      bytes += x.figures.value("verified_bytes", uint64_t{0});
    }
    r.figures["runs"] = repeat;
    r.figures["seconds_runs"] = secs;
    r.figures["connection_errors"] = errors;
    r.figures["bytes_verified"] = verified;
    r.figures["verified_bytes"] = bytes;
    marks_[name + ".start"] = r.start_s;
    marks_[name + ".end"] = r.end_s;
    say(fmt::format("workload {}: median of {} runs {:.2f} s (runs: {})", name, repeat, r.figures.value("seconds", 0.0),
                    secs.dump()));
    pr_.workloads.push_back(std::move(r));
  }

  void start_once(const Step& st) {
    Running w;
    w.step = st;
    std::string name = st.str("name");
    int port = next_port_++;
    w.port = port;
    std::string base = dir_ + "/" + name;
    std::string seed = std::to_string(opt_.seed);
    const std::string& t = st.type;
    if (t == "checkpoint-save" || t == "checkpoint-restore") {
      // one transfer per host (rack="..." : every job host of the rack at
      // once); servers[i] and clients[i] are host i's receiver and sender.
      // A save from several hosts into one server listens on a port each.
      bool save = t == "checkpoint-save";
      std::string server = st.str("server");
      int flows = st.integer("flows", 16);
      auto hosts = hosts_of(st);
      w.hosts = hosts;
      if (save && hosts.size() > 1) next_port_ += static_cast<int>(hosts.size()) - 1;
      auto file = [&](const char* role, size_t i) {
        return hosts.size() == 1 ? fmt::format("{}.{}.json", base, role) : fmt::format("{}.{}-{}.json", base, role, hosts[i]);
      };
      for (size_t i = 0; i < hosts.size(); ++i) {
        int p = save ? port + static_cast<int>(i) : port;
        int rfd = save ? ns_fd(server) : job_fd(hosts[i]);
        w.servers.push_back({"recv", start_proc("lanes-traffic recv", rfd,
                                                {traffic(), "recv", "--port", std::to_string(p), "--flows",
                                                 std::to_string(flows), "--seed", seed},
                                                file("recv", i)),
                             file("recv", i)});
      }
      for (size_t i = 0; i < hosts.size(); ++i)
        wait_listening(save ? ns_fd(server) : job_fd(hosts[i]), save ? port + static_cast<int>(i) : port, false,
                       save ? server : hosts[i] + "'s job");
      // the senders start held and get their go together: started one
      // after another, the first transfers would starve the starting of
      // the others (64 senders took 8.7 s on 2 cores)
      for (size_t i = 0; i < hosts.size(); ++i) {
        int p = save ? port + static_cast<int>(i) : port;
        std::string to = save ? server_addr(server) : N(hosts[i]).job->task_ip4.to_string();
        w.clients.push_back({"send", start_proc("lanes-traffic send", save ? job_fd(hosts[i]) : ns_fd(server),
                                                {traffic(), "send", "--to", to, "--port", std::to_string(p),
                                                 "--flows", std::to_string(flows), "--total",
                                                 std::to_string(st.bytes("bytes")), "--seed", seed, "--wait-go"},
                                                file("send", i), true),
                             file("send", i)});
      }
      w.start_s = now_s();
      for (auto& c : w.clients) ::kill(c.d.pid(), SIGUSR1);
    } else if (t == "ingest" || t == "bootstrap") {
      // a bootstrap's server="ps1,ps2": the hosts take the servers in turn
      std::vector<std::string> servers;
      std::stringstream sl(st.str("server"));
      for (std::string s; std::getline(sl, s, ',');) servers.push_back(s);
      for (const auto& server : servers) {
        std::string out = fmt::format("{}.serve-{}.json", base, server);
        w.servers.push_back({"serve " + server,
                             start_proc("lanes-traffic serve", ns_fd(server),
                                        {traffic(), "serve", "--port", std::to_string(port), "--seed", seed}, out),
                             out});
      }
      for (const auto& server : servers) wait_listening(ns_fd(server), port, false, server);
      std::vector<std::string> hosts;
      if (t == "ingest") {
        hosts = {st.str("host")};
      } else if (st.has("hosts")) {
        std::stringstream ss(st.str("hosts"));
        for (std::string h; std::getline(ss, h, ',');)
          if (node(h) >= 0 && N(h).job) hosts.push_back(h);
        if (hosts.empty()) throw StepError("bootstrap hosts=\"" + st.str("hosts") + "\" names no job host");
      } else {
        for (const auto& n : topo_.nodes)
          if (n.kind == tb::NodeKind::host && n.job) hosts.push_back(n.name);
      }
      int workers = t == "ingest" ? st.integer("conns", 32) : st.integer("workers", 256);
      // a bootstrap's fetchers start held and get their go together once
      // all run (starting a thousand processes takes seconds)
      bool burst = t == "bootstrap";
      double starting = now_s();
      w.start_s = starting;
      for (size_t i = 0; i < hosts.size(); ++i) {
        int conns = t == "ingest" ? workers
                                  : workers / static_cast<int>(hosts.size()) +
                                        (static_cast<int>(i) < workers % static_cast<int>(hosts.size()) ? 1 : 0);
        if (conns == 0) continue;
        std::string out = fmt::format("{}.fetch-{}.json", base, hosts[i]);
        std::vector<std::string> argv = {
            traffic(), "fetch", "--to", server_addr(servers[i % servers.size()]), "--port", std::to_string(port),
            "--conns", std::to_string(conns), "--requests",
            std::to_string(t == "ingest" ? st.integer("requests", 20) : 1), "--bytes",
            std::to_string(t == "ingest" ? st.bytes("size", 65536) : st.bytes("bytes", 4'000'000)), "--seed", seed,
            "--timeout", std::to_string(st.duration("timeout", milliseconds(120'000)).count() / 1000)};
        if (burst) argv.push_back("--wait-go");
        w.clients.push_back(
            {"fetch " + hosts[i], start_proc("lanes-traffic fetch", job_fd(hosts[i]), std::move(argv), out, burst), out});
      }
      if (burst) {
        w.start_s = now_s();
        w.started_in_s = w.start_s - starting;
        for (auto& c : w.clients) ::kill(c.d.pid(), SIGUSR1);
      }
    } else if (t == "probe") {
      std::string from = st.str("from"), to = st.str("to");
      bool to_host = N(to).kind == tb::NodeKind::host && N(to).job;
      bool from_host = N(from).kind == tb::NodeKind::host && N(from).job;
      int rfd = to_host ? job_fd(to) : ns_fd(to), sfd = from_host ? job_fd(from) : ns_fd(from);
      std::string dst = to_host ? N(to).job->task_ip4.to_string() : server_addr(to);
      std::vector<std::string> argv = {traffic(), "probe-send", "--to", dst, "--port", std::to_string(port),
                                       "--rate", fmt::format("{}", st.num("rate", 1000))};
      int paths = st.integer("paths", 8);
      if (st.flag("per-nic", false)) {
        std::string binds;
        for (const auto& nic : N(from).nics) binds += (binds.empty() ? "" : ",") + nic.job_addr4.addr.to_string();
        argv.insert(argv.end(), {"--bind", binds});
        paths = static_cast<int>(N(from).nics.size());
      }
      argv.insert(argv.end(), {"--paths", std::to_string(paths)});
      w.servers.push_back({"probe-recv", start_proc("lanes-traffic probe-recv", rfd,
                                                    {traffic(), "probe-recv", "--port", std::to_string(port)},
                                                    base + ".probe-recv.json"),
                           base + ".probe-recv.json"});
      wait_listening(rfd, port, true, to);
      w.start_s = now_s();
      w.clients.push_back({"probe-send", start_proc("lanes-traffic probe-send", sfd, argv, base + ".probe-send.json"),
                           base + ".probe-send.json"});
    }
    marks_[name + ".start"] = w.start_s;
    pr_.markers.push_back({w.start_s, name, "workload"});
    say(fmt::format("workload {} ({}) started", name, t));
    auto& ref = running_.emplace(name, std::move(w)).first->second;
    if (t != "probe" && st.flag("wait", true)) finish(ref, false);
  }

  // Waits for (or, with STOP, ends) workload W and records its figures.
  void finish(Running& w, bool stop) {
    const Step& st = w.step;
    auto timeout = st.duration("timeout", milliseconds(300'000));
    auto deadline = Clock::now() + timeout;
    bool timed_out = false;
    for (auto& c : w.clients) {
      if (stop) (void)c.d.stop(milliseconds(2000));
      while (c.d.running()) {
        if (Clock::now() > deadline || tb::interrupted()) {
          timed_out = true;
          (void)c.d.stop(milliseconds(1000));
          break;
        }
        std::this_thread::sleep_for(milliseconds(20));
      }
    }
    double end = now_s();
    if (st.type == "probe") std::this_thread::sleep_for(milliseconds(300));  // the last probes land
    for (auto& s : w.servers) {
      bool self_ending = st.type == "checkpoint-save" || st.type == "checkpoint-restore";
      if (self_ending) {
        auto grace = Clock::now() + milliseconds(5000);
        while (s.d.running() && Clock::now() < grace) std::this_thread::sleep_for(milliseconds(20));
      }
      if (s.d.running()) (void)s.d.stop(milliseconds(2000));
    }
    w.finished = true;
    marks_[st.str("name") + ".end"] = end;
    WorkloadResult r;
    r.name = st.str("name");
    r.type = st.type;
    r.host = st.str("host", st.str("from"));
    r.start_s = w.start_s;
    r.end_s = end;
    json& f = r.figures;
    if (timed_out) f[tb::interrupted() ? "interrupted" : "timed_out"] = true;
    if (st.type == "checkpoint-save" || st.type == "checkpoint-restore") {
      if (w.hosts.size() == 1) {
        f = transfer_figures(w, 0);
      } else {  // a rack's transfers: their sums, and each host's figures
        uint64_t want = 0, sent = 0, verified = 0, retrans = 0;
        int errors = 0;
        bool ok = true;
        double secs = 0, gbps = 0;
        json per_host = json::array(), notes = json::array();
        for (size_t i = 0; i < w.hosts.size(); ++i) {
          json x = transfer_figures(w, i);
          want += x.value("bytes", uint64_t{0});
          sent += x.value("sent_bytes", uint64_t{0});
          verified += x.value("verified_bytes", uint64_t{0});
          retrans += x.value("retransmits", uint64_t{0});
          errors += x.value("connection_errors", 0);
          ok = ok && x.value("bytes_verified", false);
          secs = std::max(secs, x.value("seconds", 0.0));
          gbps += x.value("sender_gbps", 0.0);
          if (x.contains("verify_note") && notes.size() < 5) notes.push_back(w.hosts[i] + ": " + x["verify_note"].get<std::string>());
          per_host.push_back({{"host", w.hosts[i]}, {"seconds", x.value("seconds", 0.0)},
                              {"verified_bytes", x.value("verified_bytes", uint64_t{0})},
                              {"connection_errors", x.value("connection_errors", 0)},
                              {"retransmits", x.value("retransmits", uint64_t{0})}});
        }
        f["hosts"] = w.hosts;
        f["bytes"] = want;
        f["sent_bytes"] = sent;
        f["verified_bytes"] = verified;
        f["bytes_verified"] = ok;
        if (!ok) f["verify_note"] = notes;
        f["flows"] = st.integer("flows", 16) * static_cast<int>(w.hosts.size());
        f["connection_errors"] = errors;
        f["seconds"] = secs;  // until the last host's transfer ended
        f["sender_gbps"] = gbps;
        f["throughput_gbps"] = gbps;
        f["retransmits"] = retrans;
        f["per_host"] = per_host;
      }
    } else if (st.type == "ingest" || st.type == "bootstrap") {
      int errors = 0, conns = 0, done = 0;
      uint64_t verified = 0, requests = 0;
      double secs = 0;
      bool all = true;
      std::vector<double> lat, setup;  // every request's latency and every connection's setup, all fetchers
      for (const auto& c : w.clients) {
        json j = last_json_line(c.out);
        if (j.is_null()) {
          all = false;
          continue;
        }
        errors += j.value("connection_errors", 0);
        conns += j.value("connections", 0);
        done += j.value("completed", 0);
        verified += j.value("verified_bytes", uint64_t{0});
        requests += j.value("requests", uint64_t{0});
        secs = std::max(secs, j.value("seconds", 0.0));
        all = all && j.value("all_verified", false);
        for (const auto& x : j.value("latency_samples_ms", json::array())) lat.push_back(x.get<double>());
        for (const auto& x : j.value("connect_samples_ms", json::array())) setup.push_back(x.get<double>());
      }
      std::sort(lat.begin(), lat.end());
      std::sort(setup.begin(), setup.end());
      auto pct = [](const std::vector<double>& v, double q) {
        return v.empty() ? 0.0 : v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5))];
      };
      f["connections"] = conns;
      f["completed"] = done;
      f["connection_errors"] = errors + (conns == 0 ? 1 : 0);
      f["requests"] = requests;
      f["verified_bytes"] = verified;
      f["bytes_verified"] = all && conns > 0;
      if (!(all && conns > 0)) f["verify_note"] = fmt::format("{} of {} connections completed", done, conns);
      f["seconds"] = secs;
      f["p50_ms"] = pct(lat, 0.5);
      f["p99_ms"] = pct(lat, 0.99);
      f["max_ms"] = pct(lat, 1.0);
      f["connect_p50_ms"] = pct(setup, 0.5);
      f["connect_p99_ms"] = pct(setup, 0.99);
      f["connect_max_ms"] = pct(setup, 1.0);
      if (st.type == "bootstrap") {
        f["workers"] = conns;
        f["fetching_hosts"] = w.clients.size();
        f["started_in_s"] = w.started_in_s;
      }
    } else if (st.type == "probe") {
      json rv = last_json_line(w.servers[0].out), s = last_json_line(w.clients[0].out);
      uint64_t sent = s.value("sent_per_path", uint64_t{0});
      double worst = 0;
      std::string worst_path = "-";
      uint64_t lost = 0;
      json paths = json::array();
      std::set<uint64_t> seen;
      for (const auto& p : rv.value("paths", json::array())) {
        uint64_t id = p.value("path", uint64_t{0});
        seen.insert(id);
        uint64_t got = p.value("received", uint64_t{0});
        uint64_t l = sent > got ? sent - got : 0;
        lost += l;
        double gap = p.value("longest_gap_ms", 0.0);
        std::string pname = st.flag("per-nic", false) ? fmt::format("nic{}", id) : fmt::format("flow{}", id);
        if (gap > worst) worst = gap, worst_path = pname;
        paths.push_back({{"path", pname}, {"received", got}, {"lost", l}, {"longest_gap_ms", gap},
                         {"gap_started_s", p.value("gap_started_s", 0.0) + 0.0}});
      }
      int want_paths = st.flag("per-nic", false) ? static_cast<int>(N(st.str("from")).nics.size()) : st.integer("paths", 8);
      for (int id = 0; id < want_paths; ++id)
        if (!seen.count(static_cast<uint64_t>(id))) {  // nothing arrived on it at all: blacked out throughout
          double all_ms = (end - w.start_s) * 1000;
          std::string pname = st.flag("per-nic", false) ? fmt::format("nic{}", id) : fmt::format("flow{}", id);
          paths.push_back({{"path", pname}, {"received", 0}, {"lost", sent}, {"longest_gap_ms", all_ms}});
          lost += sent;
          if (all_ms > worst) worst = all_ms, worst_path = pname;
        }
      f["paths"] = paths;
      f["sent_per_path"] = sent;
      f["lost"] = lost;
      f["blackout_ms"] = worst;
      f["worst_path"] = worst_path;
      f["rate_hz"] = st.num("rate", 1000);
    }
    pr_.markers.push_back({end, r.name + " done", "workload"});
    if (sampler_) {
      sampler_->wait_sample_after(t0_ + std::chrono::microseconds(static_cast<int64_t>((end + kSampleS) * 1e6)));
      pr_.series = sampler_->series();
      compute_share(r);
    }
    say(fmt::format("workload {} done in {:.2f} s{}", r.name, end - w.start_s, summary_of(r)));
    pr_.workloads.push_back(std::move(r));
    if (timed_out && tb::interrupted()) throw StepError("interrupted");
    if (timed_out) throw StepError("workload " + st.str("name") + " did not finish within its timeout");
  }

  // The figures of host I's transfer of checkpoint workload W.
  json transfer_figures(const Running& w, size_t i) {
    const Step& st = w.step;
    json f;
    json s = last_json_line(w.clients[i].out), rv = last_json_line(w.servers[i].out);
    uint64_t want = st.bytes("bytes");
    uint64_t sent = s.value("bytes", uint64_t{0}), verified = rv.value("verified_bytes", uint64_t{0});
    uint64_t retrans = 0;
    for (const auto& fl : s.value("flows", json::array())) retrans += fl.value("retransmits", uint64_t{0});
    // per flow: what the sender sent is what the receiver verified
    std::map<uint64_t, uint64_t> sent_per, got_per;
    for (const auto& fl : s.value("flows", json::array())) sent_per[fl.value("flow", uint64_t{0})] = fl.value("bytes", uint64_t{0});
    for (const auto& fl : rv.value("flows", json::array()))
      got_per[fl.value("flow", uint64_t{0})] += fl.value("verified", uint64_t{0});
    bool match = sent_per == got_per;
    bool ok = !s.is_null() && !rv.is_null() && sent == want && verified == want &&
              rv.value("all_complete", false) && match;
    f["bytes"] = want;
    f["sent_bytes"] = sent;
    f["verified_bytes"] = verified;
    f["bytes_verified"] = ok;
    if (!ok)
      f["verify_note"] = s.is_null() || rv.is_null()
                             ? std::string("a traffic endpoint printed no result")
                             : fmt::format("{} of {} bytes sent, {} verified{}", sent, want, verified,
                                           match ? "" : ", per-flow counts differ");
    f["flows"] = st.integer("flows", 16);
    f["connection_errors"] = s.is_null() ? st.integer("flows", 16) : s.value("connection_errors", 0);
    f["seconds"] = s.value("seconds", 0.0);
    f["gbps"] = s.value("gbps", 0.0);
    f["steady_gbps"] = s.value("steady_gbps", 0.0);
    f["sender_gbps"] = s.value("steady_gbps", 0.0) > 0 ? s.value("steady_gbps", 0.0) : s.value("gbps", 0.0);
    f["throughput_gbps"] = f["sender_gbps"];  // until the NIC counters give the wire rate (compute_share)
    f["retransmits"] = retrans;
    // per flow: bytes, time, retransmits, bytes per 100 ms, and where the
    // host's BPF datapath placed it (bpf egress modes; by the flow's port
    // on the far side of the job)
    const std::string& host = w.hosts[i];
    auto nics = bpf_flow_nics(host, st.type == "checkpoint-save" ? w.port + static_cast<int>(i) : w.port);
    std::vector<int> per_nic(N(host).nics.size(), 0);
    json flows = json::array();
    for (const auto& fl : s.value("flows", json::array())) {
      json x = {{"flow", fl.value("flow", 0)},
                {"bytes", fl.value("bytes", uint64_t{0})},
                {"seconds", fl.value("seconds", 0.0)},
                {"retransmits", fl.value("retransmits", 0)},
                {"error", fl.value("error", std::string())},
                {"bytes_per_100ms", fl.value("per_interval", json::array())}};
      auto it = nics.find(fl.value("local_port", 0));
      if (it != nics.end()) {
        x["bpf_nic"] = it->second;
        ++per_nic[static_cast<size_t>(it->second)];
      }
      flows.push_back(x);
    }
    f["flow_records"] = flows;
    if (!nics.empty()) f["bpf_flows_per_nic"] = per_nic;
    return f;
  }

  // HOST's BPF flow table as the host agent last published it: the NIC of
  // each TCP flow to or from PORT, by the flow's other port
  std::map<int, int> bpf_flow_nics(const std::string& host, int port) {
    std::map<int, int> nic_of;
    try {
      std::ifstream in(hostnet::host_agent_files(live_->registry().layout(live_->id()), host).state);
      json st = json::parse(in);
      for (const auto& f : st.value("flows", json::array())) {
        if (f.value("proto", 0) != IPPROTO_TCP) continue;
        int sport = f.value("sport", 0), dport = f.value("dport", 0), nic = f.value("nic", -1);
        if (nic < 0 || static_cast<size_t>(nic) >= N(host).nics.size()) continue;
        if (dport == port) nic_of[sport] = nic;
        else if (sport == port) nic_of[dport] = nic;
      }
    } catch (const std::exception&) {
    }
    return nic_of;
  }

  static std::string summary_of(const WorkloadResult& r) {
    const json& f = r.figures;
    if (r.type == "checkpoint-save" || r.type == "checkpoint-restore")
      return fmt::format(": {:.3f} Gbit/s, {} connection errors, {}", f.value("throughput_gbps", 0.0),
                         f.value("connection_errors", 0), f.value("bytes_verified", false) ? "all bytes verified" : "NOT verified");
    if (r.type == "probe")
      return fmt::format(": longest blackout {:.0f} ms ({}), {} probes lost", f.value("blackout_ms", 0.0),
                         f.value("worst_path", std::string("-")), f.value("lost", uint64_t{0}));
    return fmt::format(": {} connections, {} errors, p50 {:.2f} ms, p99 {:.2f} ms, connect p50 {:.2f} ms p99 {:.2f} ms",
                       f.value("connections", 0), f.value("connection_errors", 0), f.value("p50_ms", 0.0),
                       f.value("p99_ms", 0.0), f.value("connect_p50_ms", 0.0), f.value("connect_p99_ms", 0.0));
  }

  // The workload's NIC figures from the host's counters: each NIC's share
  // of the bytes over the whole workload, and the wire rate over its steady
  // part (after the first second; TCP's start and the socket buffers that
  // fill and drain at the ends are not the line's rate).
  // A rack's transfers (figures "hosts"): NIC k's share is the sum over
  // the hosts' NIC k.
  void compute_share(WorkloadResult& w) {
    if (w.type == "probe") return;
    std::set<std::string> hosts;
    if (!w.host.empty()) hosts.insert(w.host);
    else if (w.figures.contains("hosts") && w.figures["hosts"].is_array())
      for (const auto& h : w.figures["hosts"]) hosts.insert(h.get<std::string>());
    for (const auto& h : hosts)
      if (node(h) < 0 || !N(h).job) return;
    if (hosts.empty()) return;
    std::string dir = w.type == "checkpoint-save" ? "tx" : "rx";
    double from = w.end_s - w.start_s > 2.5 ? w.start_s + 1.0 : w.start_s;
    std::vector<double> sums;
    double wire = 0;
    for (const auto& s : pr_.series) {
      auto at = s.name.find(" nic");
      if (at == std::string::npos || !hosts.count(s.name.substr(0, at)) || s.name.substr(s.name.size() - 2) != dir)
        continue;
      size_t k = static_cast<size_t>(std::atoi(s.name.c_str() + at + 4));
      if (sums.size() <= k) sums.resize(k + 1, 0.0);
      sums[k] += window_mean(s, w.start_s, w.end_s + kSampleS);
      wire += window_mean(s, from, w.end_s);
    }
    double total = 0;
    for (double x : sums) total += x;
    w.nic_share.clear();
    if (total > 0)
      for (double x : sums) w.nic_share.push_back(100.0 * x / total);
    if (w.type == "checkpoint-save" || w.type == "checkpoint-restore") {
      w.figures["wire_gbps"] = wire;
      w.figures["throughput_gbps"] = wire;
    }
  }

  // ---- waits ----

  void wait(const Step& st) {
    if (st.has("workload")) {
      auto& w = running_.at(st.str("workload"));
      if (!w.finished) finish(w, false);
    } else {
      auto hosts = hosts_of(st);
      std::string who = st.has("host") ? st.str("host") + "'s group has" : "the groups of rack " + st.str("rack") + " have";
      size_t count = static_cast<size_t>(st.integer("count"));
      auto t = st.duration("timeout", milliseconds(30'000));
      auto start = Clock::now();
      bool ok = eventually([&] { return all_members(hosts, count); }, t, milliseconds(20));
      double took = std::chrono::duration<double>(Clock::now() - start).count();
      auto missing = [&] {
        size_t n = 0;
        for (const auto& [h, m] : groups(hosts)) n += m.size() != count;
        return n;
      };
      Assertion a;
      a.name = fmt::format("wait {} {} members", who, count);
      a.line = st.line;
      a.expected = fmt::format("within {:.1f} s", t.count() / 1000.0);
      a.measured = ok ? fmt::format("after {:.2f} s", took)
                      : hosts.size() == 1 ? fmt::format("{} members after {:.1f} s", group(hosts[0]).second.size(), took)
                                          : fmt::format("{} of {} groups not at {} after {:.1f} s", missing(), hosts.size(), count, took);
      a.passed = ok;
      report(a);
      if (st.has("mark")) pr_.config["wait_" + st.str("mark") + "_s"] = took;
    }
    if (st.has("mark")) mark(st.str("mark"), "mark");
  }

  // ---- faults ----

  void set_nic(const std::string& host, int nic, bool up) {
    const auto& l = nic_link(host, nic);
    int h = node(host);
    auto idx = live_->tb().ifindex(h, l.b.ifname);
    if (!idx) throw StepError(idx.error().what());
    if (auto s = live_->tb().netlink(h).set_link_up(idx.value(), up, l.b.ifname); !s) throw StepError(s.error().what());
  }

  void nft(int fd, const std::string& script, const std::string& where) {
    tb::ProcessSpec spec{"nft", {"nft", script}};
    spec.netns_fd = fd;
    spec.new_session = false;
    auto r = tb::run_capture(spec, std::chrono::seconds(5));
    if (!r || r.value().status != 0)
      throw StepError("nft in " + where + " failed (" + script + ")" +
                      (r ? ": exit " + std::to_string(r.value().status) : ": " + std::string(r.error().what())));
  }

  void fault(const Step& st) {
    const std::string& t = st.type;
    std::string label = st.has("mark") ? st.str("mark") : t;
    if (t == "nic-down" || t == "nic-up") {
      // on one host, or on every job host of a rack at once
      auto hosts = hosts_of(st);
      int nic = st.integer("nic");
      bool down = t == "nic-down";
      std::map<std::string, std::vector<uint32_t>> before;
      std::map<std::string, size_t> members;
      for (const auto& [h, m] : groups(hosts)) members[h] = m.size();
      if (down) before = buckets_of(hosts);
      auto at = Clock::now();
      set_nics(hosts, nic, !down);
      double applied_ms = std::chrono::duration<double, std::milli>(Clock::now() - at).count();
      mark(label, "fault");
      say(fmt::format("fault: {} nic{} {}", st.has("host") ? st.str("host") : fmt::format("{} hosts of rack {}", hosts.size(), st.str("rack")),
                      nic, down ? "down" : "up"));
      if (down) {
        // the switch drops the NIC's next hop with its port's carrier:
        // every group one member fewer, then each group's buckets compared
        auto shrunk_all = [&] {
          for (const auto& [h, m] : groups(hosts))
            if (m.size() + 1 != members[h]) return false;
          return true;
        };
        // a rack's groups are looked at every 50 ms: each look dumps the
        // switch's routes and nexthops, which holds the lock the kernel's
        // own removal of the next hops needs
        bool shrunk = eventually(shrunk_all, milliseconds(5000 + 500 * static_cast<int64_t>(hosts.size())),
                                 milliseconds(hosts.size() == 1 ? 5 : 50));
        double shrunk_ms = std::chrono::duration<double, std::milli>(Clock::now() - at).count();
        int moved = 0, healthy = 0, total = 0;
        auto now_buckets = buckets_of(hosts);
        for (const auto& h : hosts) {
          const auto& after = now_buckets[h];
          const auto& b4 = before[h];
          total += static_cast<int>(b4.size());
          std::set<uint32_t> kept(after.begin(), after.end()), failed;
          for (auto b : b4)
            if (!kept.count(b)) failed.insert(b);
          for (size_t i = 0; i < b4.size() && i < after.size(); ++i)
            if (!failed.count(b4[i])) {
              ++healthy;
              moved += after[i] != b4[i];
            }
        }
        faults_[label] = {{"groups", hosts.size()}, {"buckets", total}, {"healthy_buckets", healthy},
                          {"moved_healthy", moved}, {"group_shrunk", shrunk}, {"applied_ms", applied_ms}};
        if (shrunk) faults_[label]["shrunk_ms"] = shrunk_ms;
        if (hosts.size() == 1) faults_[label]["members_after"] = group(hosts[0]).second.size();
        pr_.config["fault_" + label] = faults_[label];
        if (hosts.size() > 1)
          say(fmt::format("{} {} groups shrunk {} (the {} NICs went down within {:.0f} ms)", shrunk ? "✓" : "✗",
                          hosts.size(), shrunk ? fmt::format("{:.0f} ms after the first NIC", shrunk_ms) : "not within the wait",
                          hosts.size(), applied_ms));
      }
    } else if (t == "nic-flap") {
      std::string host = st.str("host");
      int nic = st.integer("nic");
      auto half = st.duration("period") / 2;
      int count = st.integer("count", 3);
      for (int i = 0; i < count; ++i) {
        set_nic(host, nic, false);
        mark(fmt::format("{} {}", label, i + 1), "fault");
        if (!sleep_checked(half)) throw StepError("interrupted");
        set_nic(host, nic, true);
        if (!sleep_checked(half)) throw StepError("interrupted");
      }
      say(fmt::format("fault: {} nic{} flapped {} times, period {} ms", host, nic, count, st.duration("period").count()));
    } else if (t == "silent-drop" || t == "clear-drop") {
      // on the switch port: the host's NIC keeps carrier, every frame is lost
      // in both directions (netdev hooks, before and after the switch's
      // routing; the host's BPF fast path cannot bypass them)
      std::string host = st.str("host");
      int nic = st.integer("nic");
      const auto& l = nic_link(host, nic);
      std::string table = fmt::format("lanes_drop_{}_{}", host, nic);
      std::replace(table.begin(), table.end(), '-', '_');
      int fd = live_->tb().netns(l.a.node).fd();
      std::string sw = topo_.nodes[static_cast<size_t>(l.a.node)].name;
      if (t == "silent-drop")
        nft(fd,
            fmt::format("add table netdev {0} ; add chain netdev {0} in {{ type filter hook ingress device \"{1}\" "
                        "priority -500 ; policy drop ; }} ; add chain netdev {0} out {{ type filter hook egress "
                        "device \"{1}\" priority -500 ; policy drop ; }}",
                        table, l.a.ifname),
            sw);
      else
        nft(fd, fmt::format("delete table netdev {}", table), sw);
      mark(label, "fault");
      say(fmt::format("fault: {} on {}:{} (towards {} nic{})", t, sw, l.a.ifname, host, nic));
    } else if (t == "kill") {
      kill_daemon(st, label);
    } else if (t == "rogue-announce") {
      rogue(st, label);
    }
  }

  json supervisor_daemons() {
    std::ifstream in(tb::supervisor_state_path(live_->registry(), live_->id()));
    try {
      return json::parse(in).value("daemons", json::array());
    } catch (const std::exception&) {
      return json::array();
    }
  }
  pid_t daemon_pid(const std::string& node_name, const std::string& daemon) {
    for (const auto& d : supervisor_daemons())
      if (d.value("node", "") == node_name && d.value("name", "") == daemon) return d.value("pid", 0);
    return 0;
  }

  void kill_daemon(const Step& st, const std::string& label) {
    std::string n = st.str("node"), d = st.str("daemon");
    pid_t pid = daemon_pid(n, d);
    if (pid <= 0) throw StepError(fmt::format("no {} runs on {} (supervisor.json)", d, n));
    if (tb::process_start_time(pid) == 0 || ::kill(pid, SIGKILL) != 0)
      throw StepError(fmt::format("cannot kill {} on {} (pid {})", d, n, pid));
    mark(label, "fault");
    auto start = Clock::now();
    bool back = eventually(
        [&] {
          pid_t p = daemon_pid(n, d);
          return p > 0 && p != pid && tb::process_start_time(p) != 0;
        },
        milliseconds(30'000), milliseconds(20));
    double took = std::chrono::duration<double>(Clock::now() - start).count();
    pr_.config["restart_" + label + "_s"] = took;
    say(fmt::format("fault: {} on {} killed (pid {}); {}", d, n, pid,
                    back ? fmt::format("restarted by the supervisor in {:.2f} s", took) : "NOT restarted in 30 s"));
    if (!back) throw StepError(fmt::format("{} on {} was not restarted", d, n));
  }

  // HOST's job claims VICTIM's task IP: the address on its container and in
  // its injector's configuration; the injector restarts with it and
  // announces it to the rack switch.
  void rogue(const Step& st, const std::string& label) {
    std::string host = st.str("host"), victim = st.str("victim");
    const auto& vj = *N(victim).job;
    auto nl = tb::Netlink::open_in(job_fd(host), host + " container");
    if (!nl) throw StepError(nl.error().what());
    auto lo = nl.value().ifindex("lo");
    if (!lo) throw StepError(lo.error().what());
    (void)nl.value().add_address(lo.value(), tb::IfAddr4{vj.task_ip4, 32}, "lo");
    (void)nl.value().add_address(lo.value(), tb::IfAddr6{vj.task_ip6, 128}, "lo");
    if (auto claimed = lanes::vip::claim_task_ips(live_->registry().layout(live_->id()), host,
                                                  vj.task_ip4.to_string(), vj.task_ip6.to_string());
        !claimed)
      throw StepError(claimed.error().what());
    Step k = st;
    k.attrs = {{"node", host}, {"daemon", "vip-injector"}};
    kill_daemon(k, label);
    say(fmt::format("fault: {}'s job now announces {}'s task IP {}", host, victim, vj.task_ip4.to_string()));
  }

  // ---- assertions on the live testbed ----

  // An assertion on the live run: its plug-in, over this run's fabric.
  Assertion live_assert(const Step& st, const LiveAssertion& plugin) {
    LiveFabric fabric(*live_);
    LiveContext ctx{topo_,
                    fabric,
                    marks_,
                    [this] { return sampler_ ? sampler_->series() : std::vector<Series>{}; },
                    faults_,
                    [](const std::function<bool()>& pred, milliseconds timeout, milliseconds every) {
                      return eventually(pred, timeout, every);
                    },
                    {}};
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
    for (const auto& e : std::filesystem::directory_iterator(live_->dir() + "/logs", ec))
      std::filesystem::copy_file(e.path(), dir_ + "/logs/" + e.path().filename().string(),
                                 std::filesystem::copy_options::overwrite_existing, ec);
    std::filesystem::copy_file(tb::events_path(live_->registry(), live_->id()), dir_ + "/events.jsonl",
                               std::filesystem::copy_options::overwrite_existing, ec);
  }

  const Scenario& sc_;
  const Phase& ph_;
  const RunOptions& opt_;
  ScenarioResult& result_;
  PhaseResult& pr_;
  const tb::Topology& topo_;
  std::ofstream* steps_;
  std::string dir_;
  std::optional<tb::LiveRun> live_;
  std::map<std::string, tb::Netns> job_ns_;
  std::optional<Sampler> sampler_;
  Clock::time_point t0_;
  std::map<std::string, double> marks_ = {{"start", 0.0}};
  std::map<std::string, Running> running_;
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
