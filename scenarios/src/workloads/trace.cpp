#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>

#include "lanes/scenarios/chakra.hpp"
#include "lanes/scenarios/steady.hpp"
#include "lanes/scenarios/trace_replay.hpp"
#include "workloads.hpp"

namespace lanes::scenarios {

using nlohmann::json;
namespace coll = collective;

const char* Trace::type() const { return "trace"; }

const Attrs& Trace::attrs() const {
  static const Attrs a = {{"trace", Kind::file, true},
                          {"hosts", Kind::hosts},
                          {"replicate-rank", Kind::integer},
                          {"iterations", Kind::count},
                          {"scale", Kind::number},
                          {"channels", Kind::count},
                          {"wait", Kind::boolean},
                          {"timeout", Kind::duration},
                          kFamilyAttr};
  return a;
}

std::vector<std::string> trace_files(const Step& st, size_t ranks) {
  auto files = chakra::rank_files(st.str("trace"));
  if (st.has("replicate-rank")) {
    size_t r = static_cast<size_t>(st.integer("replicate-rank"));
    if (r >= files.size())
      throw chakra::TraceError(fmt::format("{}: replicate-rank={}, but the trace has {} rank file{}", st.str("trace"),
                                           r, files.size(), files.size() == 1 ? "" : "s"));
    return std::vector<std::string>(ranks, files[r]);
  }
  if (files.size() != ranks)
    throw chakra::TraceError(fmt::format(
        "{}: the trace has {} rank{} ({} to {}), the job {} host{}; give as many hosts (hosts=), or "
        "replicate-rank=\"R\" to have every host replay rank R's file (a data-parallel job's ranks run one graph)",
        st.str("trace"), files.size(), files.size() == 1 ? "" : "s", files.front(), files.back(), ranks,
        ranks == 1 ? "" : "s"));
  return files;
}

std::string Trace::check(const Step& st, const testbed::Topology& topo) const {
  auto hosts = job_hosts(st, topo);
  if (hosts.size() < 2)
    return fmt::format("a trace replay needs at least 2 job hosts, {} has {}", st.has("hosts") ? "hosts=" : "the topology",
                       hosts.size());
  if (st.has("scale") && (st.num("scale") < 0 || st.num("scale") > 1000)) return "scale= must be 0 to 1000";
  if (st.integer("iterations", 1) > 10000) return "iterations= must be at most 10000";
  if (auto why = job_family_problem(st, topo, hosts); !why.empty()) return why;
  // every rank's file read and planned now: a trace lanes cannot replay is
  // refused before anything is built
  try {
    auto files = trace_files(st, hosts.size());
    std::vector<replay::Plan> plans;
    std::map<std::string, size_t> seen;  // a replicated file is planned once
    for (const auto& f : files) {
      if (auto it = seen.find(f); it != seen.end()) {
        plans.push_back(plans[it->second]);
        continue;
      }
      seen[f] = plans.size();
      plans.push_back(replay::plan(chakra::read(f), static_cast<int>(hosts.size())));
      if (auto stuck = replay::runnable(plans.back()); !stuck.empty()) return f + ": cannot be replayed: " + stuck;
    }
    if (auto why = replay::mismatch(plans); !why.empty()) return st.str("trace") + ": " + why;
  } catch (const chakra::TraceError& e) {
    return e.what();
  }
  return "";
}

std::vector<std::string> Trace::sampled_hosts(const Step& st, const testbed::Topology& topo) const {
  return job_hosts(st, topo);
}

// One rank per host in the order of hosts=, each replaying its file (or
// replicate-rank='s) and sending to the next host's task IP (and, for
// direct exchanges and transfers, to every host's on the port after);
// held until every one listens, then all at once.
void Trace::start(WorkloadRun& w, StepContext& ctx) const {
  const Step& st = w.step;
  const auto& topo = ctx.topo();
  w.hosts = job_hosts(st, topo);
  int n = static_cast<int>(w.hosts.size());
  std::vector<std::string> files;
  try {
    files = trace_files(st, w.hosts.size());
  } catch (const chakra::TraceError& e) {
    throw StepError(e.what());
  }
  w.port = ctx.take_ports(2);
  bool v6 = job_wants_v6(st, topo, w.hosts);
  // the direct connections, when any rank's trace has what goes over them:
  // then every rank opens them (a rank that only receives included)
  bool direct = false;
  try {
    std::map<std::string, bool> seen;
    for (const auto& f : files)
      if (seen.emplace(f, false).second)
        direct = direct || replay::needs_direct(replay::plan(chakra::read(f), static_cast<int>(w.hosts.size())));
  } catch (const chakra::TraceError& e) {
    throw StepError(e.what());
  }
  std::vector<std::string> peers;
  for (const auto& h : w.hosts) {
    if (!direct) break;
    const auto& node = topo.nodes.at(static_cast<size_t>(topo.find_node(h)));
    peers.push_back(v6 ? node.job->task_ip6.to_string() : node.job->task_ip4.to_string());
  }
  start_ring(w, ctx, "trace", [&](int r, const std::string& next) {
    traffic::TraceArgs a;
    a.trace = files[static_cast<size_t>(r)];
    a.rank = r;
    a.ranks = n;
    a.to = next;
    a.port = w.port;
    a.peers = peers;
    a.mesh_port = w.port + 1;
    a.channels = st.integer("channels", 8);
    a.iterations = st.integer("iterations", 1);
    a.scale = st.num("scale", 1.0);
    a.seed = ctx.seed();
    a.timeout = static_cast<double>(
        std::max<int64_t>(1, st.duration("timeout", std::chrono::milliseconds(600'000)).count() / 1000));
    a.wait_go = true;
    return traffic::to_argv(a);
  });
}

namespace {
constexpr uint64_t kBusbwMinBytes = 1 << 20;
}  // namespace

json trace_figures(const std::vector<std::optional<traffic::TraceResult>>& ranks, const std::vector<std::string>& hosts,
                   double line_bps) {
  json f;
  int n = static_cast<int>(ranks.size());
  f["ranks"] = n;
  f["hosts"] = hosts;
  int errors = 0;
  uint64_t checked = 0, sent = 0, retrans = 0;
  bool ok = n >= 2;
  json notes = json::array(), per_rank = json::array();
  double first = std::numeric_limits<double>::max(), last = 0;
  double gpu = 0, cpu = 0, comm = 0, exposed = 0;
  uint64_t transfers = 0, transfer_bytes = 0;
  for (int r = 0; r < n; ++r) {
    const auto& x = ranks[static_cast<size_t>(r)];
    const std::string host = r < static_cast<int>(hosts.size()) ? hosts[static_cast<size_t>(r)] : "";
    if (!x) {
      ok = false;
      ++errors;
      notes.push_back(host + ": printed no result");
      continue;
    }
    if (f.find("trace") == f.end()) {
      f["trace"] = x->trace;
      f["iterations"] = x->iterations;
      f["scale"] = x->scale;
      f["compute_nodes"] = x->compute_nodes;
      f["collective_nodes"] = x->collective_nodes;
      f["transfer_nodes"] = x->transfer_nodes;
    }
    transfers += x->transfers;
    transfer_bytes += x->transfer_bytes;
    errors += x->connection_errors;
    retrans += x->retransmits;
    sent += x->sent_bytes;
    if (x->verified) checked += x->checked_bytes;
    ok = ok && x->verified;
    if (!x->verified && notes.size() < 5)
      notes.push_back(fmt::format("{}: {}", host,
                                  !x->errors.empty()         ? x->errors.front()
                                  : x->first_bad_offset >= 0 ? fmt::format("wrong word at offset {}", x->first_bad_offset)
                                                             : fmt::format("{} of {} bytes sent, {} received",
                                                                           x->sent_bytes, x->expected_bytes,
                                                                           x->received_bytes)));
    first = std::min(first, x->ready_s);
    last = std::max(last, x->end_s);
    gpu += x->gpu_busy_s;
    cpu += x->cpu_busy_s;
    comm += x->comm_s;
    exposed += x->exposed_comm_s;
    per_rank.push_back({{"rank", r},
                        {"host", host},
                        {"verified", x->verified},
                        {"compute_s", x->gpu_busy_s},
                        {"comm_s", x->comm_s},
                        {"exposed_comm_s", x->exposed_comm_s},
                        {"channel_bytes", x->channel_bytes}});
  }
  f["bytes_verified"] = ok;
  if (!ok) f["verify_note"] = notes;
  f["connection_errors"] = errors;
  f["verified_bytes"] = checked;
  f["sent_bytes"] = sent;
  f["retransmits"] = retrans;
  f["per_rank"] = per_rank;
  // point-to-point: the sends and receives every rank did, and their bytes
  // (each transfer counted at both ends)
  f["transfers"] = transfers;
  f["transfer_bytes"] = transfer_bytes;
  double jct = ok && last > first ? last - first : 0;
  f["jct_s"] = jct;
  f["seconds"] = jct;
  double k = n > 0 ? 1.0 / n : 0;
  f["compute_s"] = gpu * k;  // the GPU's replayed kernels, per rank
  f["cpu_s"] = cpu * k;
  f["comm_s"] = comm * k;
  f["exposed_comm_s"] = exposed * k;  // collectives while the GPU had nothing to run
  f["gpu_idle"] = jct > 0 ? std::clamp(1.0 - gpu * k / jct, 0.0, 1.0) : 0.0;
  // per iteration: from the previous one's end on every rank (the start) to this one's
  std::vector<double> iters;
  if (ok) {
    size_t its = ranks[0]->iteration_end_s.size();
    double prev = first;
    for (size_t i = 0; i < its; ++i) {
      double end = 0;
      for (const auto& x : ranks) end = x->iteration_end_s.size() > i ? std::max(end, x->iteration_end_s[i]) : 1e300;
      if (end >= 1e300) break;
      iters.push_back(end - prev);
      prev = end;
    }
  }
  f["iteration_s"] = iters;
  std::vector<double> sorted = iters;
  std::sort(sorted.begin(), sorted.end());
  f["iteration_p50_s"] = sorted.empty() ? 0.0 : sorted[sorted.size() / 2];
  // each collective: from when the last rank began it to when the last
  // ended it; busbw per (collective, size) over its instances, median
  std::map<std::pair<std::string, uint64_t>, std::vector<double>> times;
  std::map<std::pair<std::string, uint64_t>, std::string> comm_types;
  if (ok) {
    size_t m = ranks[0]->collectives.size();
    for (size_t c = 0; c < m; ++c) {
      double b = 0, e = 0;
      bool all = true;
      for (const auto& x : ranks) {
        if (x->collectives.size() <= c) {
          all = false;
          break;
        }
        b = std::max(b, x->collectives[c].start_s);
        e = std::max(e, x->collectives[c].end_s);
      }
      if (!all) break;
      const auto& c0 = ranks[0]->collectives[c];
      times[{c0.op, c0.traced_bytes}].push_back(e - b);
      comm_types[{c0.op, c0.traced_bytes}] = c0.comm_type;
    }
  }
  json colls = json::array();
  for (auto& [key, ts] : times) {
    std::sort(ts.begin(), ts.end());
    double t = ts[ts.size() / 2];
    auto op = coll::Op::allreduce;
    for (auto o : {coll::Op::allreduce, coll::Op::reducescatter, coll::Op::allgather, coll::Op::broadcast,
                   coll::Op::reduce, coll::Op::alltoall, coll::Op::gather, coll::Op::scatter})
      if (key.first == coll::op_name(o)) op = o;
    json c = {{"op", key.first}, {"comm_type", comm_types[key]}, {"bytes", key.second}, {"count", ts.size()},
              {"time_s", t}};
    // below a MiB a collective fits in the sockets' buffers before its last
    // rank joins it: its time says when that rank took it, not what the
    // network carries, so it has no busbw
    if (key.second >= kBusbwMinBytes) {
      double bus = coll::busbw(op, n, key.second, t);
      c["algbw_gbps"] = coll::algbw(key.second, t) * 8 / 1e9;
      c["busbw_gbps"] = bus * 8 / 1e9;
      if (line_bps > 0) c["efficiency"] = bus * 8 / line_bps;
    }
    colls.push_back(c);
  }
  f["collectives"] = colls;
  if (line_bps > 0) f["line_gbps"] = line_bps / 1e9;
  return f;
}

json Trace::figures(const WorkloadRun& w, double, StepContext& ctx) const {
  std::vector<std::optional<traffic::TraceResult>> ranks;
  for (const auto& p : w.clients) ranks.push_back(traffic::read_result<traffic::TraceResult>(p.out));
  const auto& topo = ctx.topo();
  double line = std::numeric_limits<double>::max();
  for (const auto& h : w.hosts) line = std::min(line, host_line_bps(topo.nodes.at(static_cast<size_t>(topo.find_node(h)))));
  if (w.hosts.empty() || line == std::numeric_limits<double>::max()) line = 0;
  return trace_figures(ranks, w.hosts, line);
}

std::string Trace::summary(const json& f) const {
  // the biggest collective's busbw: where the network shows
  std::string big;
  uint64_t most = 0;
  for (const auto& c : f.value("collectives", json::array()))
    if (c.value("bytes", uint64_t{0}) >= most) {
      most = c.value("bytes", uint64_t{0});
      big = fmt::format(" · {} of {:.1f} MiB busbw {:.3f} Gbit/s", c.value("op", std::string()),
                        static_cast<double>(most) / (1 << 20), c.value("busbw_gbps", 0.0));
    }
  return fmt::format("JCT {:.2f} s · {} iteration(s), p50 {:.3f} s · compute {:.2f} s, communication {:.2f} s, "
                     "exposed {:.2f} s · GPUs idle {:.0f}%{} · {} errors · {}",
                     f.value("jct_s", 0.0), f.value("iterations", 0), f.value("iteration_p50_s", 0.0),
                     f.value("compute_s", 0.0), f.value("comm_s", 0.0), f.value("exposed_comm_s", 0.0),
                     100 * f.value("gpu_idle", 0.0), big, f.value("connection_errors", 0), verified_words(f));
}

std::vector<reports::FigureDecl> Trace::declared_figures() const {
  using C = reports::FigureDecl::Combine;
  return verified_figures({{"jct_s", "s"},
                           {"seconds", "s", C::median_run, false},
                           {"iteration_p50_s", "s"},
                           {"compute_s", "s"},
                           {"comm_s", "s"},
                           {"exposed_comm_s", "s"},
                           {"gpu_idle", ""},
                           {"retransmits", ""}});
}

std::string Trace::matrix_steps() const {
  return fmt::format(R"(<workload name="w" type="trace" trace="{}/traces/chakra-feeder/chakra" replicate-rank="0" scale="0.2" channels="4"/>)",
                     shipped_dir());
}

}  // namespace lanes::scenarios
