#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "lanes/scenarios/collective.hpp"
#include "lanes/scenarios/steady.hpp"
#include "workloads.hpp"

namespace lanes::scenarios {

using nlohmann::json;
namespace coll = collective;

const char* Collective::type() const { return "collective"; }

const Attrs& Collective::attrs() const {
  static const Attrs a = {{"op", Kind::choice, false, "allreduce|reducescatter|allgather"},
                          {"hosts", Kind::hosts},
                          {"size", Kind::size, true},
                          {"channels", Kind::count},
                          {"piece", Kind::size},
                          {"iterations", Kind::count},
                          {"warmup", Kind::integer},
                          {"wait", Kind::boolean},
                          {"timeout", Kind::duration},
                          kFamilyAttr};
  return a;
}

std::string Collective::check(const Step& st, const testbed::Topology& topo) const {
  size_t n = job_hosts(st, topo).size();
  if (n < 2) return fmt::format("a collective needs at least 2 job hosts, {} has {}", st.has("hosts") ? "hosts=" : "the topology", n);
  if (st.has("warmup") && st.integer("warmup") < 0) return "warmup= must be 0 or more";
  if (st.has("piece") && (st.bytes("piece") < 4096 || st.bytes("piece") > (16u << 20)))
    return "piece= must be 4K to 16Mi (what a channel carries at a time)";
  return job_family_problem(st, topo, job_hosts(st, topo));
}

std::vector<std::string> Collective::sampled_hosts(const Step& st, const testbed::Topology& topo) const {
  return job_hosts(st, topo);
}

void start_ring(WorkloadRun& w, StepContext& ctx, const std::string& role,
                const std::function<std::vector<std::string>(int rank, const std::string& next)>& args) {
  const Step& st = w.step;
  const auto& topo = ctx.topo();
  int n = static_cast<int>(w.hosts.size());
  std::string base = ctx.out_base(st.str("name"));
  bool v6 = job_wants_v6(st, topo, w.hosts);
  for (int r = 0; r < n; ++r) {
    const auto& next = topo.nodes.at(static_cast<size_t>(topo.find_node(w.hosts[static_cast<size_t>((r + 1) % n)])));
    const std::string& host = w.hosts[static_cast<size_t>(r)];
    w.clients.push_back(ctx.start_traffic(
        role + " " + host, ctx.job_ns(host),
        args(r, v6 ? next.job->task_ip6.to_string() : next.job->task_ip4.to_string()),
        fmt::format("{}.rank-{}.json", base, r), true));
  }
  for (const auto& h : w.hosts) ctx.wait_listening(ctx.job_ns(h), w.port, false, h + "'s job");
  w.start_s = ctx.now_s();
  ctx.go(w.clients);
}

// One rank per host, in the order of hosts=, each sending to the next
// host's task IP; all start held and get their go together once every one
// listens.
void Collective::start(WorkloadRun& w, StepContext& ctx) const {
  const Step& st = w.step;
  w.hosts = job_hosts(st, ctx.topo());
  w.port = ctx.take_ports(1);
  int n = static_cast<int>(w.hosts.size());
  start_ring(w, ctx, "collective", [&](int r, const std::string& next) {
    traffic::CollectiveArgs a;
    a.op = st.str("op", "allreduce");
    a.rank = r;
    a.ranks = n;
    a.to = next;
    a.port = w.port;
    a.bytes = st.bytes("size");
    a.channels = st.integer("channels", 8);
    a.iterations = st.integer("iterations", 3);
    a.warmup = st.integer("warmup", 1);
    a.piece = st.bytes("piece", 256 * 1024);
    a.seed = ctx.seed();
    a.timeout = static_cast<double>(
        std::max<int64_t>(1, st.duration("timeout", std::chrono::milliseconds(600'000)).count() / 1000));
    a.wait_go = true;
    return traffic::to_argv(a);
  });
}

json collective_figures(const std::vector<std::optional<traffic::CollectiveResult>>& ranks,
                        const std::vector<std::string>& hosts, const std::string& op_text, double line_bps) {
  json f;
  auto op = coll::parse_op(op_text).value_or(coll::Op::allreduce);
  int n = static_cast<int>(ranks.size());
  f["op"] = coll::op_name(op);
  f["ranks"] = n;
  f["hosts"] = hosts;
  int errors = 0, iterations = 0, warmup = 0;
  uint64_t bytes = 0, retrans = 0, sent = 0, received = 0, checked = 0;
  bool ok = n >= 2;
  json per_rank = json::array(), notes = json::array();
  for (int r = 0; r < n; ++r) {
    const auto& x = ranks[static_cast<size_t>(r)];
    const std::string& host = r < static_cast<int>(hosts.size()) ? hosts[static_cast<size_t>(r)] : "";
    if (!x) {
      ok = false;
      ++errors;
      notes.push_back(host + ": printed no result");
      per_rank.push_back({{"rank", r}, {"host", host}, {"verified", false}});
      continue;
    }
    bytes = x->bytes;
    iterations = x->iterations;
    warmup = x->warmup;
    errors += x->connection_errors;
    retrans += x->retransmits;
    sent += x->sent_bytes;
    received += x->received_bytes;
    if (x->verified) checked += x->checked_bytes;
    ok = ok && x->verified;
    if (!x->verified && notes.size() < 5)
      notes.push_back(fmt::format("{}: {}", host,
                                  !x->errors.empty()       ? x->errors.front()
                                  : x->first_bad_offset >= 0 ? fmt::format("wrong word at offset {}", x->first_bad_offset)
                                                             : fmt::format("{} of {} bytes sent, {} received",
                                                                           x->sent_bytes, x->expected_bytes,
                                                                           x->received_bytes)));
    per_rank.push_back({{"rank", r},
                        {"host", host},
                        {"verified", x->verified},
                        {"checked_bytes", x->checked_bytes},
                        {"sent_bytes", x->sent_bytes},
                        {"received_bytes", x->received_bytes},
                        {"retransmits", x->retransmits},
                        {"channel_bytes", x->channel_bytes}});
  }
  f["bytes"] = bytes;
  f["iterations"] = iterations;
  f["warmup"] = warmup;
  f["sent_bytes"] = sent;
  f["received_bytes"] = received;
  f["verified_bytes"] = checked;  // the output words every rank checked, over the ranks
  f["bytes_verified"] = ok;
  if (!ok) f["verify_note"] = notes;
  f["connection_errors"] = errors;
  f["retransmits"] = retrans;
  f["per_rank"] = per_rank;
  // a collective ends when its last rank is done: the time of the timed
  // ones runs from when every rank had ended the warm-up (or was ready)
  // until every rank had ended the last
  auto latest = [&](int it) {
    double t = 0;
    for (const auto& x : ranks) {
      if (!x) return 0.0;
      if (it < 0) t = std::max(t, x->ready_s);
      else if (static_cast<size_t>(it) < x->iteration_end_s.size()) t = std::max(t, x->iteration_end_s[static_cast<size_t>(it)]);
      else return 0.0;
    }
    return t;
  };
  std::vector<double> each;
  for (int i = 0; ok && i < iterations; ++i) {
    double a = latest(warmup + i - 1), b = latest(warmup + i);
    if (a <= 0 || b <= 0) break;
    each.push_back(b - a);
  }
  double total = 0;
  for (double s : each) total += s;
  double t = each.size() == static_cast<size_t>(iterations) && iterations > 0 ? total / iterations : 0;
  f["iteration_s"] = each;
  f["time_s"] = t;
  double alg = coll::algbw(bytes, t), bus = coll::busbw(op, n, bytes, t);
  f["algbw_gbps"] = alg * 8 / 1e9;
  f["busbw_gbps"] = bus * 8 / 1e9;
  f["algbw_GBps"] = alg / 1e9;  // nccl-tests' unit
  f["busbw_GBps"] = bus / 1e9;
  f["bus_factor"] = coll::bus_factor(op, n);
  if (line_bps > 0) {
    f["line_gbps"] = line_bps / 1e9;
    f["efficiency"] = bus * 8 / line_bps;
  }
  return f;
}

json Collective::figures(const WorkloadRun& w, double, StepContext& ctx) const {
  std::vector<std::optional<traffic::CollectiveResult>> ranks;
  for (const auto& p : w.clients) ranks.push_back(traffic::read_result<traffic::CollectiveResult>(p.out));
  // the ring is as fast as its slowest host's NICs together
  const auto& topo = ctx.topo();
  double line = std::numeric_limits<double>::max();
  for (const auto& h : w.hosts) {
    const auto& node = topo.nodes.at(static_cast<size_t>(topo.find_node(h)));
    line = std::min(line, host_line_bps(node));
  }
  if (w.hosts.empty() || line == std::numeric_limits<double>::max()) line = 0;
  return collective_figures(ranks, w.hosts, w.step.str("op", "allreduce"), line);
}

std::string Collective::summary(const json& f) const {
  std::string eff = f.contains("efficiency") ? fmt::format(" ({:.0f}% of the line)", 100 * f.value("efficiency", 0.0)) : "";
  return fmt::format("{} of {} MiB among {} ranks in {:.3f} s · algbw {:.3f} Gbit/s · busbw {:.3f} Gbit/s{} · "
                     "{} errors · {} · {} retransmits",
                     f.value("op", std::string("collective")), f.value("bytes", uint64_t{0}) >> 20, f.value("ranks", 0),
                     f.value("time_s", 0.0), f.value("algbw_gbps", 0.0), f.value("busbw_gbps", 0.0), eff,
                     f.value("connection_errors", 0), verified_words(f), f.value("retransmits", 0));
}

std::vector<reports::FigureDecl> Collective::declared_figures() const {
  return verified_figures({{"time_s", "s"},
                           {"algbw_gbps", "Gbit/s"},
                           {"busbw_gbps", "Gbit/s"},
                           {"efficiency", ""},
                           {"retransmits", ""}});
}

std::string Collective::matrix_steps() const {
  return R"(<workload name="w" type="collective" size="2M" iterations="2" warmup="1" channels="4"/>)";
}

}  // namespace lanes::scenarios
