#include <fmt/format.h>
#include <signal.h>
#include <time.h>

#include <algorithm>

#include "lanes/scenarios/training.hpp"
#include "workloads.hpp"

namespace lanes::scenarios {

using nlohmann::json;
using std::chrono::milliseconds;

const char* Training::type() const { return "training"; }

const Attrs& Training::attrs() const {
  static const Attrs a = {{"hosts", Kind::hosts},
                          {"gradient", Kind::size, true},
                          {"steps", Kind::count, true},
                          {"compute", Kind::duration, true},
                          {"checkpoint-every", Kind::integer},
                          {"checkpoint", Kind::size},
                          {"checkpoint-flows", Kind::count},
                          {"server", Kind::server},
                          {"channels", Kind::count},
                          {"spare", Kind::host},
                          {"wait", Kind::boolean},
                          {"timeout", Kind::duration},
                          kFamilyAttr};
  return a;
}

std::string Training::check(const Step& st, const testbed::Topology& topo) const {
  size_t n = job_hosts(st, topo).size();
  if (n < 2) return fmt::format("a training job needs at least 2 job hosts, {} has {}", st.has("hosts") ? "hosts=" : "the topology", n);
  if (auto why = job_family_problem(st, topo, job_hosts(st, topo)); !why.empty()) return why;
  if (st.has("checkpoint-every") && st.integer("checkpoint-every") < 0) return "checkpoint-every= must be 0 or more";
  if (st.integer("checkpoint-every", 0) > 0 && (!st.has("server") || !st.has("checkpoint")))
    return "checkpoints (checkpoint-every=) need server= (the storage server) and checkpoint= (the size of each rank's)";
  if (st.integer("steps") > 30000) return "steps= must be at most 30000";
  if (st.integer("checkpoint-flows", 1) > 64) return "checkpoint-flows= must be at most 64";
  if (st.has("spare")) {
    auto hosts = job_hosts(st, topo);
    if (std::find(hosts.begin(), hosts.end(), st.str("spare")) != hosts.end())
      return fmt::format("spare={} is one of the job's hosts: a hot spare stands by beside them (give hosts= without it)",
                         st.str("spare"));
    if (st.integer("checkpoint-every", 0) <= 0)
      return "a hot spare (spare=) keeps the job's checkpoints: it needs checkpoint-every=, checkpoint= and server=";
    hosts.push_back(st.str("spare"));
    if (auto why = job_family_problem(st, topo, hosts); !why.empty()) return why;
  }
  return "";
}

// the job's hosts and its spare's: the spare's NICs carry the checkpoints it keeps
std::vector<std::string> Training::sampled_hosts(const Step& st, const testbed::Topology& topo) const {
  auto hosts = job_hosts(st, topo);
  if (st.has("spare")) hosts.push_back(st.str("spare"));
  return hosts;
}

namespace {

milliseconds st_timeout(const Step& st) { return st.duration("timeout", milliseconds(600'000)); }
int64_t timeout_s(const Step& st) { return std::max<int64_t>(1, st_timeout(st).count() / 1000); }

double mono_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// the hot spare's address in the job's family, and whether it still stands by (not yet in the job)
std::string spare_addr(const WorkloadRun& w, StepContext& ctx, bool v6) {
  const auto& topo = ctx.topo();
  const auto& node = topo.nodes.at(static_cast<size_t>(topo.find_node(w.step.str("spare"))));
  return v6 ? node.job->task_ip6.to_string() : node.job->task_ip4.to_string();
}
bool spare_stands_by(const WorkloadRun& w) {
  return w.step.has("spare") && std::find(w.hosts.begin(), w.hosts.end(), w.step.str("spare")) == w.hosts.end();
}

// How the ranks resume: from the latest checkpoint the storage server holds
// whole, or (a takeover by the hot spare) from STEP (-1: nothing, they
// start over), the spare's rank reading it from its own store
struct Resume {
  bool resume = false;
  int step = -1;
  bool from_spare = false;
};

// Starts the job's ranks (held, then all at once): incarnation W.incarnations - 1.
void start_ranks(WorkloadRun& w, StepContext& ctx, const Resume& how) {
  const Step& st = w.step;
  const auto& topo = ctx.topo();
  int n = static_cast<int>(w.hosts.size()), inc = w.incarnations - 1;
  std::string base = ctx.out_base(st.str("name"));
  // the ring and the store in the job's one family: an IPv6-only job's
  // ranks have no IPv4 route to the store
  bool v6 = job_wants_v6(st, topo, w.hosts);
  std::string store = st.has("server") ? ctx.server_addr(st.str("server"), v6) : "";
  for (int r = 0; r < n; ++r) {
    const std::string& host = w.hosts[static_cast<size_t>(r)];
    const auto& next = topo.nodes.at(static_cast<size_t>(topo.find_node(w.hosts[static_cast<size_t>((r + 1) % n)])));
    traffic::TrainingArgs a;
    a.rank = r;
    a.ranks = n;
    a.to = v6 ? next.job->task_ip6.to_string() : next.job->task_ip4.to_string();
    a.port = w.port;
    a.gradient = st.bytes("gradient");
    a.steps = st.integer("steps");
    a.compute_ms = static_cast<double>(st.duration("compute").count());
    a.channels = st.integer("channels", 8);
    a.incarnation = inc;
    a.seed = ctx.seed();
    a.timeout = static_cast<double>(timeout_s(st));
    a.wait_go = true;
    if (!store.empty()) {
      a.store = store;
      a.store_port = w.port + 1;
      a.checkpoint_every = st.integer("checkpoint-every", 0);
      a.checkpoint = st.has("checkpoint") ? st.bytes("checkpoint") : 0;
      a.checkpoint_flows = st.integer("checkpoint-flows", 1);
    }
    a.resume = how.resume;
    if (how.from_spare) {
      a.resume = how.step >= 0;  // a spare that held nothing: the job starts over
      a.restore_step = how.step;
      if (host == st.str("spare")) {  // its own copy, in its own container
        a.restore_from = spare_addr(w, ctx, v6);
        a.restore_port = w.port + 2;
      }
    }
    if (spare_stands_by(w)) {
      a.spare = spare_addr(w, ctx, v6);
      a.spare_port = w.port + 2;
    }
    w.clients.push_back(ctx.start_traffic("training " + host, ctx.job_ns(host), a,
                                          fmt::format("{}.rank-{}.{}.jsonl", base, r, inc), true));
  }
  for (const auto& h : w.hosts) ctx.wait_listening(ctx.job_ns(h), w.port, false, h + "'s job");
  ctx.go(w.clients);
}

}  // namespace

// The store on the storage server first (when the job checkpoints), then
// one rank per host in the order of hosts=, each sending to the next
// host's task IP.
void Training::start(WorkloadRun& w, StepContext& ctx) const {
  const Step& st = w.step;
  w.hosts = job_hosts(st, ctx.topo());
  w.port = ctx.take_ports(st.has("spare") ? 3 : 2);  // the ring's, the store's, the spare's store
  auto start_store = [&](const std::string& role, int ns, int port, const std::string& file, const std::string& who) {
    traffic::StoreArgs store;
    store.port = port;
    store.ranks = static_cast<int>(w.hosts.size());
    store.seed = ctx.seed();
    w.servers.push_back(ctx.start_traffic(role, ns, store, ctx.out_base(st.str("name")) + file));
    ctx.wait_listening(ns, port, false, who);
  };
  if (st.has("server"))
    start_store("store " + st.str("server"), ctx.node_ns(st.str("server")), w.port + 1, ".store.json", st.str("server"));
  if (st.has("spare"))  // the hot spare: a store of the job's checkpoints in its container
    start_store("spare " + st.str("spare"), ctx.job_ns(st.str("spare")), w.port + 2, ".spare.json",
                st.str("spare") + "'s job");
  w.start_s = ctx.now_s();
  start_ranks(w, ctx, {});
}

std::string Training::fail(WorkloadRun& w, StepContext& ctx, const JobFailure& f) const {
  // at a step, not at a time: what the failure costs is then the same in
  // every run (the steps since the last checkpoint, done again)
  if (f.after_step >= 0) {
    if (f.after_step >= w.step.integer("steps"))
      return fmt::format("after-step={} is past the job's last step ({})", f.after_step, w.step.integer("steps") - 1);
    int run = w.incarnations - 1;
    auto done = [&] {
      for (const auto& c : w.clients) {
        bool past = false;
        for (const auto& e : training::read_events(c.out))
          past = past || (e.event == "step" && e.incarnation == run && e.step >= f.after_step);
        if (!past) return false;
      }
      return true;
    };
    if (!ctx.eventually(done, st_timeout(w.step), milliseconds(20)))
      throw StepError(fmt::format("job-fail: the job did not reach step {} in time", f.after_step));
  }
  std::string failed_host = f.host.empty() ? w.hosts.back() : f.host;
  if (f.onto_spare) {
    if (!w.step.has("spare")) return "onto-spare=\"true\" needs the job's spare= (a hot spare)";
    if (!spare_stands_by(w)) return "its hot spare has taken a failed host's place already";
    if (std::find(w.hosts.begin(), w.hosts.end(), failed_host) == w.hosts.end())
      return fmt::format("host={} is not one of the job's hosts", failed_host);
  }
  // every rank at once, as a job dies when one of its GPUs or hosts does:
  // nothing is flushed or closed cleanly
  w.failed_at_s.push_back(mono_now());
  ctx.mark(f.mark, "fault");
  for (auto& c : w.clients)
    if (c.d.running()) ::kill(c.d.pid(), SIGKILL);
  for (auto& c : w.clients) {
    c.d.wait();
    w.failed.push_back(std::move(c));
  }
  w.clients.clear();
  ctx.say(fmt::format("job-fail: the {} ranks of {} killed{}; it restarts from its last checkpoint in {:.1f} s",
                      w.hosts.size(), w.step.str("name"),
                      f.after_step >= 0 ? fmt::format(" after step {}", f.after_step) : "",
                      f.restart_after.count() / 1000.0));
  Resume how{true};
  if (f.onto_spare) {
    // what the spare held whole when the failure struck: the job goes on from there, on it
    int held = training::held_at(w.failed_at_s.back(), training::read_progress(w.servers.at(1).out));
    std::replace(w.hosts.begin(), w.hosts.end(), failed_host, w.step.str("spare"));
    how = {true, held, true};
    ctx.say(fmt::format("job-fail: {} takes {}'s place from the checkpoint it holds ({})", w.step.str("spare"),
                        failed_host, held >= 0 ? fmt::format("step {}", held) : "none: the job starts over"));
  }
  if (!ctx.sleep(f.restart_after)) throw StepError("interrupted");
  ++w.incarnations;
  start_ranks(w, ctx, how);
  return "";
}

json Training::figures(const WorkloadRun& w, double, StepContext&) const {
  const Step& st = w.step;
  std::vector<training::Event> events;
  for (const auto* procs : {&w.failed, &w.clients})
    for (const auto& p : *procs) {
      auto e = training::read_events(p.out);
      events.insert(events.end(), e.begin(), e.end());
    }
  int n = static_cast<int>(w.hosts.size());
  json f = training::figures(events, n, st.integer("steps"),
                             static_cast<double>(st.duration("compute").count()) / 1000);
  f["hosts"] = w.hosts;
  f["gradient_bytes"] = st.bytes("gradient");
  f["checkpoint_every"] = st.integer("checkpoint-every", 0);
  f["seconds"] = f.value("jct_s", 0.0);  // what completion ratios compare
  // a rank of the last run that failed (a killed run's ranks may see their
  // ring break in the instant before their own end: that is the fault's)
  // and every save or restore that failed: a connection to the store
  int errors = f.value("checkpoint_failures", 0);
  for (const auto& e : events)
    if (e.event == "failed" && e.incarnation == w.incarnations - 1) ++errors;
  if (!w.servers.empty()) {
    auto store = traffic::last_object_line(w.servers.front().out);
    if (!store || store->value("role", "") != "store") {
      f["bytes_verified"] = false;
      f["verify_note"] = "the store printed no result";
    } else {
      f["store"] = *store;
      f["verified_bytes"] = f.value("verified_bytes", uint64_t{0}) + store->value("verified_bytes", uint64_t{0});
      int bad = store->value("bad", 0);
      errors += bad;
      if (bad > 0) {
        f["bytes_verified"] = false;
        f["verify_note"] = store->value("errors", json::array());
      }
    }
  }
  if (st.has("spare") && w.servers.size() > 1) {
    auto spare = training::spare_figures(events, training::read_progress(w.servers[1].out),
                                         training::read_progress(w.servers[0].out), w.failed_at_s, n);
    for (auto it = spare.begin(); it != spare.end(); ++it) f[it.key()] = it.value();
    f["spare"] = st.str("spare");
    errors += f.value("spare_push_failures", 0);
    if (auto held = traffic::last_object_line(w.servers[1].out); held && held->value("role", "") == "store") {
      int bad = held->value("bad", 0);
      errors += bad;
      if (bad > 0) {
        f["bytes_verified"] = false;
        f["verify_note"] = held->value("errors", json::array());
      }
      f["verified_bytes"] = f.value("verified_bytes", uint64_t{0}) + held->value("verified_bytes", uint64_t{0});
    } else {
      f["bytes_verified"] = false;
      f["verify_note"] = "the spare's store printed no result";
    }
  }
  if (!f.value("completed", false) && errors == 0) ++errors;  // it ended short, and nothing above says why
  f["connection_errors"] = errors;
  return f;
}

std::string Training::summary(const json& f) const {
  std::string failures = f.value("failures", 0) > 0
                             ? fmt::format(" · {} failure(s): {:.2f} s of work lost, recovery {:.2f} s, restore {:.2f} s",
                                           f.value("failures", 0), f.value("lost_s", 0.0),
                                           f.value("recovery_s", 0.0), f.value("restore_s", 0.0))
                             : "";
  std::string saves = f.value("saves", 0) > 0
                          ? fmt::format(" · {} checkpoints (mean {:.2f} s)", f.value("saves", 0), f.value("save_mean_s", 0.0))
                          : "";
  std::string spare = !f.contains("spare") ? ""
                      : f.contains("spare_staleness_steps")
                          ? fmt::format(" · the spare {} step(s), {:.2f} s behind at the failure (storage {})",
                                        f.value("spare_staleness_steps", 0), f.value("spare_staleness_s", 0.0),
                                        f.value("storage_staleness_steps", 0))
                          : fmt::format(" · the spare {:.1f} step(s), {:.2f} s behind on average",
                                        f.value("spare_lag_steps_mean", 0.0), f.value("spare_lag_s_mean", 0.0));
  return fmt::format("JCT {:.2f} s · {} of {} steps · step p50 {:.3f} s · GPUs idle {:.0f}%{}{}{} · {} steps lost · "
                     "{} errors · {}",
                     f.value("jct_s", 0.0), f.value("steps_done", 0), f.value("steps", 0), f.value("step_p50_s", 0.0),
                     100 * f.value("wait_fraction", 0.0), saves, failures, spare, f.value("steps_lost", 0),
                     f.value("connection_errors", 0), verified_words(f));
}

std::vector<reports::FigureDecl> Training::declared_figures() const {
  using C = reports::FigureDecl::Combine;
  return verified_figures({{"jct_s", "s"},
                           {"seconds", "s", C::median_run, false},  // its JCT again, for the completion chart
                           {"step_p50_s", "s"},
                           {"wait_fraction", ""},
                           {"save_mean_s", "s"},
                           {"steps_lost", ""},
                           {"recovery_s", "s", C::median_run, false},
                           {"spare_staleness_steps", ""},
                           {"spare_staleness_s", "s"},
                           {"spare_lag_steps_mean", ""}});
}

std::string Training::matrix_steps() const {
  return R"(<workload name="w" type="training" gradient="1M" steps="4" compute="50ms" channels="4" checkpoint-every="2" checkpoint="1M" server="storage"/>)";
}

}  // namespace lanes::scenarios
