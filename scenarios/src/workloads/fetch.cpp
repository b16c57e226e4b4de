// What the fetching workloads (ingest, bootstrap) share: starting servers
// and fetchers, and their figures.

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "workloads.hpp"

namespace lanes::scenarios {

using nlohmann::json;
using std::chrono::milliseconds;

void start_fetchers(WorkloadRun& w, StepContext& ctx, const FetchPlan& plan) {
  const Step& st = w.step;
  std::string base = ctx.out_base(st.str("name"));
  w.port = ctx.take_ports(1);
  traffic::ServeArgs serve;
  serve.port = w.port;
  serve.seed = ctx.seed();
  for (const auto& server : plan.servers)
    w.servers.push_back(
        ctx.start_traffic("serve " + server, ctx.node_ns(server), serve, fmt::format("{}.serve-{}.json", base, server)));
  for (const auto& server : plan.servers) ctx.wait_listening(ctx.node_ns(server), w.port, false, server);
  double starting = ctx.now_s();
  w.start_s = starting;
  for (size_t i = 0; i < plan.hosts.size(); ++i) {
    if (plan.conns[i] == 0) continue;
    traffic::FetchArgs a;
    const auto& h = ctx.topo().nodes.at(static_cast<size_t>(ctx.topo().find_node(plan.hosts[i])));
    const bool v6 = wants_v6(st, &h);
    a.to = ctx.server_addr(plan.servers[i % plan.servers.size()], v6);
    a.port = w.port;
    a.conns = plan.conns[i];
    a.bytes = plan.bytes;
    a.seed = ctx.seed();
    a.timeout = static_cast<double>(st.duration("timeout", milliseconds(120'000)).count() / 1000);
    a.wait_go = plan.burst;
    // egress bind, the road the seed did not take: the reader binds each
    // connection to a NIC's address in turn
    if (auto nics = bound_nic_addresses(h, v6); !nics.empty()) a.bind = nics;
    if (plan.rate > 0) {
      a.rate = plan.rate;
      a.duration = plan.duration_s;
      a.arrival = plan.arrival;
    } else {
      a.requests = plan.requests;
    }
    w.hosts.push_back(plan.hosts[i]);
    w.clients.push_back(ctx.start_traffic("fetch " + plan.hosts[i], ctx.job_ns(plan.hosts[i]), a,
                                          fmt::format("{}.fetch-{}.json", base, plan.hosts[i]), plan.burst));
  }
  if (plan.burst) {
    w.start_s = ctx.now_s();
    w.started_in_s = w.start_s - starting;
    ctx.go(w.clients);
  }
}

std::vector<std::optional<traffic::FetchResult>> fetch_results(const WorkloadRun& w) {
  std::vector<std::optional<traffic::FetchResult>> out;
  for (const auto& c : w.clients) out.push_back(traffic::read_result<traffic::FetchResult>(c.out));
  return out;
}

json fetch_figures(const std::vector<std::optional<traffic::FetchResult>>& fetchers) {
  int errors = 0, conns = 0, done = 0;
  uint64_t verified = 0, requests = 0;
  double secs = 0;
  bool all = true;
  std::vector<double> lat, setup;  // every request's latency and every connection's setup, all fetchers
  for (const auto& j : fetchers) {
    if (!j) {
      all = false;
      continue;
    }
    errors += j->connection_errors;
    conns += j->connections;
    done += j->completed;
    verified += j->verified_bytes;
    requests += j->requests;
    secs = std::max(secs, j->seconds);
    all = all && j->all_verified;
    lat.insert(lat.end(), j->latency_samples_ms.begin(), j->latency_samples_ms.end());
    setup.insert(setup.end(), j->connect_samples_ms.begin(), j->connect_samples_ms.end());
  }
  std::sort(lat.begin(), lat.end());
  std::sort(setup.begin(), setup.end());
  auto pct = [](const std::vector<double>& v, double q) {
    return v.empty() ? 0.0 : v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5))];
  };
  json f;
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
  return f;
}

std::string fetch_summary(const json& f) {
  std::string setup = f.contains("connect_p99_ms") ? fmt::format(" · connect p50 {:.2f} ms · p99 {:.2f} ms",
                                                                 f.value("connect_p50_ms", 0.0), f.value("connect_p99_ms", 0.0))
                                                   : "";
  return fmt::format("{} connections · {} errors · p50 {:.2f} ms · p99 {:.2f} ms{} · {:.2f} s · {}",
                     f.value("connections", 0), f.value("connection_errors", 0), f.value("p50_ms", 0.0),
                     f.value("p99_ms", 0.0), setup, f.value("seconds", 0.0), verified_words(f));
}

std::vector<reports::FigureDecl> fetch_declared() {
  using C = reports::FigureDecl::Combine;
  return verified_figures({{"seconds", "s"},
                           {"p50_ms", "ms", C::median_run, false},
                           {"p99_ms", "ms"},
                           {"connect_p99_ms", "ms", C::median_run, false}});
}

std::vector<std::string> job_hosts(const Step& st, const testbed::Topology& topo) {
  std::vector<std::string> hosts;
  if (st.has("hosts")) {
    std::stringstream ss(st.str("hosts"));
    for (std::string h; std::getline(ss, h, ',');)
      if (topo.is_job_host(h)) hosts.push_back(h);
  } else {
    for (const auto& n : topo.nodes)
      if (n.kind == testbed::NodeKind::host && n.job) hosts.push_back(n.name);
  }
  return hosts;
}

bool job_wants_v6(const Step& st, const testbed::Topology& topo, const std::vector<std::string>& hosts) {
  if (st.has("family")) return st.str("family") == "ipv6";
  for (const auto& h : hosts) {
    const auto& n = topo.nodes.at(static_cast<size_t>(topo.find_node(h)));
    if (n.job && !n.job->has4()) return true;
  }
  return false;
}

std::string job_family_problem(const Step& st, const testbed::Topology& topo, const std::vector<std::string>& hosts) {
  bool v6 = job_wants_v6(st, topo, hosts);
  std::string lacking;
  int n = 0;
  for (const auto& h : hosts) {
    const auto& node = topo.nodes.at(static_cast<size_t>(topo.find_node(h)));
    if (!node.job || (v6 ? node.job->has6() : node.job->has4())) continue;
    if (++n <= 3) lacking += (lacking.empty() ? "" : ", ") + h;
  }
  if (n == 0) return "";
  if (n > 3) lacking += fmt::format(" and {} more", n - 3);
  return fmt::format("the job hosts it connects must share one address family, and {} {} no {}{}", lacking, n == 1 ? "has" : "have",
                     v6 ? "IPv6" : "IPv4",
                     st.has("family") ? fmt::format(" (family=\"{}\")", st.str("family"))
                                      : " (some of its hosts are IPv6-only: family=\"ipv6\" on every <job>, or "
                                        "hosts= of one family)");
}

}  // namespace lanes::scenarios
