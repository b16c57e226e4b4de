#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "workloads.hpp"

namespace lanes::scenarios {

using nlohmann::json;

const char* Checkpoint::type() const { return save_ ? "checkpoint-save" : "checkpoint-restore"; }

const Attrs& Checkpoint::attrs() const {
  static const Attrs a = {{"host", Kind::host},          {"rack", Kind::rack},      {"server", Kind::server, true},
                          {"bytes", Kind::size, true},   {"flows", Kind::count},    {"wait", Kind::boolean},
                          {"timeout", Kind::duration},   {"repeat", Kind::integer}, {"window", Kind::size},
                          kFamilyAttr};
  return a;
}

namespace {

bool on_mptcp(const testbed::Node& h) { return h.on_egress(testbed::EgressMode::mptcp); }

// (The runner makes the sockets of a job on MPTCP egress and of the servers
// MPTCP.) An MPTCP restore is read by the job: its container opens the connection
// (a recv --from the storage server's send --listen). The kernel's path
// manager makes subflows only from the side that connected; measured with
// the job accepting and announcing its NICs' addresses instead, only one
// of three announcements was taken while its endpoints also made subflows.
bool job_connects(bool save, const testbed::Node& h) { return save || on_mptcp(h); }

// MPTCP: each subflow of each flow by the job's address on its job side
// (JOB_LOCAL: the sender is the job). A NIC's address pins its subflow to
// that NIC; the first subflow, the task IP's, is pinned to none: a save's
// leaves by the first NIC with carrier, a restore's comes in by the rack
// switch's hash. Per NIC: the pinned subflows and the bytes they carried
// (acknowledged), the task IP's apart; the flows that had all their
// subflows (the task IP's and one from every NIC the job has an endpoint
// on), and the fewest pinned NICs of any flow.
}  // namespace

json mptcp_figures(const traffic::SendResult& s, const testbed::Node& h, bool job_local) {
  const size_t n = h.nics.size();
  constexpr int kTaskIp = -1, kElsewhere = -2;
  auto nic_of = [&](const std::string& a) -> int {
    if (a == h.job->task_ip4.to_string() || a == h.job->task_ip6.to_string()) return kTaskIp;
    for (const auto& nic : h.nics)
      if (a == nic.job_addr4.addr.to_string() || a == nic.job_addr6.addr.to_string()) return nic.index;
    return kElsewhere;
  };
  const size_t pinnable = testbed::mptcp_endpoint_nics(n, (h.job->has4() ? 1 : 0) + (h.job->has6() ? 1 : 0));
  std::vector<int> subflows(n, 0);
  std::vector<uint64_t> bytes(n, 0);
  uint64_t total = 0, task_bytes = 0;
  int task_subflows = 0, fewest = static_cast<int>(n), whole = 0, elsewhere = 0;
  for (const auto& fl : s.flows) {
    std::vector<bool> pinned(n, false);
    bool task = false;
    for (const auto& sf : fl.subflows) {
      int k = nic_of(job_local ? sf.local : sf.remote);
      total += sf.bytes_acked;
      if (k == kTaskIp) {
        task = true;
        ++task_subflows;
        task_bytes += sf.bytes_acked;
      } else if (k >= 0 && static_cast<size_t>(k) < n) {
        pinned[static_cast<size_t>(k)] = true;
        ++subflows[static_cast<size_t>(k)];
        bytes[static_cast<size_t>(k)] += sf.bytes_acked;
      } else {
        ++elsewhere;
      }
    }
    size_t on = static_cast<size_t>(std::count(pinned.begin(), pinned.end(), true));
    fewest = std::min(fewest, static_cast<int>(on));
    whole += task && on >= pinnable;
  }
  auto pct = [&](uint64_t b) {
    return total ? std::round(1000.0 * static_cast<double>(b) / static_cast<double>(total)) / 10 : 0.0;
  };
  json f;
  f["mptcp_subflows_per_nic"] = subflows;
  f["mptcp_task_ip_subflows"] = task_subflows;
  std::vector<double> share;
  for (auto b : bytes) share.push_back(pct(b));
  f["mptcp_bytes_share_per_nic"] = share;
  f["mptcp_bytes_share_task_ip"] = pct(task_bytes);
  f["mptcp_flows_with_all_subflows"] = whole;
  f["mptcp_min_pinned_nics_per_flow"] = s.flows.empty() ? 0 : fewest;
  if (elsewhere) f["mptcp_subflows_elsewhere"] = elsewhere;  // from or to none of the job's addresses
  return f;
}


// One transfer per host (rack="...": every job host of the rack at once);
// servers[i] and clients[i] are host i's receiver and sender. A save from
// several hosts into one server listens on a port each, as does an MPTCP
// restore's sender.
void Checkpoint::start(WorkloadRun& w, StepContext& ctx) const {
  const Step& st = w.step;
  const auto& topo = ctx.topo();
  std::string server = st.str("server");
  const int flows = st.integer("flows", 16);
  w.hosts = hosts_of(st, topo);
  const auto& hosts = w.hosts;
  auto node = [&](size_t i) -> const testbed::Node& { return topo.nodes.at(static_cast<size_t>(topo.find_node(hosts[i]))); };
  size_t opening = 0;  // hosts whose job opens the connections
  for (size_t i = 0; i < hosts.size(); ++i) opening += job_connects(save_, node(i));
  bool reversed = !save_ && opening > 0;
  if (reversed && opening != hosts.size())
    throw StepError(fmt::format("{}: a restore to hosts of which some are on MPTCP egress and some not: their jobs "
                                "would open some of the connections and the server the others; restore them apart",
                                st.str("name")));
  bool port_each = save_ || reversed;
  w.port = ctx.take_ports(port_each ? static_cast<int>(hosts.size()) : 1);
  std::string base = ctx.out_base(st.str("name"));
  auto file = [&](const char* role, size_t i) {
    return hosts.size() == 1 ? fmt::format("{}.{}.json", base, role) : fmt::format("{}.{}-{}.json", base, role, hosts[i]);
  };
  auto port = [&](size_t i) { return port_each ? w.port + static_cast<int>(i) : w.port; };
  auto receiver_ns = [&](size_t i) { return save_ ? ctx.node_ns(server) : ctx.job_ns(hosts[i]); };
  auto sender_ns = [&](size_t i) { return save_ ? ctx.job_ns(hosts[i]) : ctx.node_ns(server); };
  auto v6_of = [&](size_t i) { return wants_v6(st, &node(i)); };
  auto start_receivers = [&] {
    for (size_t i = 0; i < hosts.size(); ++i) {
      traffic::RecvArgs recv;
      recv.port = port(i);
      recv.flows = flows;
      recv.seed = ctx.seed();
      if (st.has("window")) recv.window = st.bytes("window");
      if (!save_ && job_connects(save_, node(i))) recv.from = ctx.server_addr(server, v6_of(i));
      w.servers.push_back(ctx.start_traffic("recv", receiver_ns(i), recv, file("recv", i)));
    }
  };
  // the senders start held and get their go together: started one after
  // another, the first transfers would starve the starting of the others
  // (64 senders took 8.7 s on 2 cores)
  auto start_senders = [&] {
    for (size_t i = 0; i < hosts.size(); ++i) {
      const auto& h = node(i);
      bool v6 = v6_of(i);
      traffic::SendArgs send;
      send.to = save_ ? ctx.server_addr(server, v6) : (v6 ? h.job->task_ip6.to_string() : h.job->task_ip4.to_string());
      if (auto nics = bound_nic_addresses(h, v6); !nics.empty()) {
        // the road the seed did not take: the application binds each flow to
        // a NIC's address in turn (a save from it, a restore to it)
        if (save_) send.bind = nics;
        else send.to = nics;
      }
      send.listen = !save_ && on_mptcp(h);  // a restore the job opens
      if (send.listen) send.to.clear();
      send.port = port(i);
      send.flows = flows;
      send.total = st.bytes("bytes");
      send.seed = ctx.seed();
      send.wait_go = true;
      if (st.has("window")) send.window = st.bytes("window");
      w.clients.push_back(ctx.start_traffic("send", sender_ns(i), send, file("send", i), true));
    }
  };
  if (reversed) {
    start_senders();
    for (size_t i = 0; i < hosts.size(); ++i) ctx.wait_listening(sender_ns(i), port(i), false, server);
    start_receivers();
  } else {
    start_receivers();
    for (size_t i = 0; i < hosts.size(); ++i)
      ctx.wait_listening(receiver_ns(i), port(i), false, save_ ? server : hosts[i] + "'s job");
    start_senders();
  }
  w.start_s = ctx.now_s();
  ctx.go(w.clients);
}

json Checkpoint::figures(const WorkloadRun& w, double, StepContext& ctx) const {
  const Step& st = w.step;
  const auto& topo = ctx.topo();
  std::vector<json> each;
  for (size_t i = 0; i < w.hosts.size(); ++i) {
    const auto& h = topo.nodes.at(static_cast<size_t>(topo.find_node(w.hosts[i])));
    // the BPF flow table keys a flow by its port on the far side of the job
    int port = save_ || job_connects(save_, h) ? w.port + static_cast<int>(i) : w.port;
    auto sent = traffic::read_result<traffic::SendResult>(w.clients[i].out);
    each.push_back(transfer_figures(sent, traffic::read_result<traffic::RecvResult>(w.servers[i].out),
                                    st.bytes("bytes"), st.integer("flows", 16), ctx.bpf_flow_nics(w.hosts[i], port),
                                    h.nics.size()));
    if (on_mptcp(h) && sent) each.back().update(mptcp_figures(*sent, h, save_));
  }
  if (each.size() == 1) return each[0];
  return rack_transfer_figures(w.hosts, each, st.integer("flows", 16));
}

std::string Checkpoint::summary(const json& f) const {
  std::string placed;
  for (const auto& n : f.value("bpf_flows_per_nic", json::array()))
    placed += (placed.empty() ? " · BPF flows per NIC " : " ") + std::to_string(n.get<int>());
  if (f.contains("mptcp_subflows_per_nic")) {
    placed += fmt::format(" · MPTCP subflows: task IP {}, per NIC", f.value("mptcp_task_ip_subflows", 0));
    for (const auto& n : f["mptcp_subflows_per_nic"]) placed += " " + std::to_string(n.get<int>());
  }
  return fmt::format("{:.3f} Gbit/s · {:.2f} s · {} errors · {} · {} retransmits{}", f.value("throughput_gbps", 0.0),
                     f.value("seconds", 0.0), f.value("connection_errors", 0), verified_words(f),
                     f.value("retransmits", 0), placed);
}

std::vector<reports::FigureDecl> Checkpoint::declared_figures() const {
  return verified_figures({{"throughput_gbps", "Gbit/s"},
                           {"line_share", "%"},
                           {"seconds", "s"},
                           {"retransmits", ""},
                           {"wire_gbps", "Gbit/s", reports::FigureDecl::Combine::median_run, false}});
}

std::string Checkpoint::matrix_steps() const {
  return fmt::format(R"(<workload name="w" type="{}" host="h1" server="storage" bytes="8M" flows="8"/>)", type());
}

json transfer_figures(const std::optional<traffic::SendResult>& s, const std::optional<traffic::RecvResult>& rv,
                      uint64_t want, int flows, const std::map<int, int>& nic_of_port, size_t nics) {
  json f;
  uint64_t sent = s ? s->bytes : 0, verified = rv ? rv->verified_bytes : 0, retrans = 0;
  // per flow: what the sender sent is what the receiver verified
  std::map<uint64_t, uint64_t> sent_per, got_per;
  if (s)
    for (const auto& fl : s->flows) {
      retrans += fl.retransmits;
      sent_per[fl.flow] = fl.bytes;
    }
  if (rv)
    for (const auto& fl : rv->flows) got_per[fl.flow] += fl.verified;
  bool match = sent_per == got_per;
  bool ok = s && rv && sent == want && verified == want && rv->all_complete && match;
  f["bytes"] = want;
  if (s && !s->to.empty()) {
    f["to"] = s->to;
    f["family"] = s->to.find(':') != std::string::npos ? "ipv6" : "ipv4";
  }
  f["sent_bytes"] = sent;
  f["verified_bytes"] = verified;
  f["bytes_verified"] = ok;
  if (!ok)
    f["verify_note"] = !s || !rv ? std::string("a traffic endpoint printed no result")
                                 : fmt::format("{} of {} bytes sent, {} verified{}", sent, want, verified,
                                               match ? "" : ", per-flow counts differ");
  f["flows"] = flows;
  f["connection_errors"] = s ? s->connection_errors : flows;
  f["seconds"] = s ? s->seconds : 0.0;
  f["gbps"] = s ? s->gbps : 0.0;
  f["steady_gbps"] = s ? s->steady_gbps : 0.0;
  f["sender_gbps"] = s && s->steady_gbps > 0 ? s->steady_gbps : (s ? s->gbps : 0.0);
  f["throughput_gbps"] = f["sender_gbps"];  // until the NIC counters give the wire rate
  f["retransmits"] = retrans;
  if (s && s->socket_buffer) f["socket_buffer_bytes"] = s->socket_buffer;  // (window= set)
  // per flow: bytes, time, retransmits, bytes per 100 ms, and where the
  // host's BPF datapath placed it (bpf egress modes)
  std::vector<int> per_nic(nics, 0);
  json records = json::array();
  if (s)
    for (const auto& fl : s->flows) {
      json x = {{"flow", fl.flow},
                {"bytes", fl.bytes},
                {"seconds", fl.seconds},
                {"retransmits", fl.retransmits},
                {"error", fl.error},
                {"bytes_per_100ms", fl.per_interval}};
      auto it = nic_of_port.find(fl.local_port);
      if (it != nic_of_port.end() && it->second >= 0 && static_cast<size_t>(it->second) < nics) {
        x["bpf_nic"] = it->second;
        ++per_nic[static_cast<size_t>(it->second)];
      }
      records.push_back(x);
    }
  f["flow_records"] = records;
  if (!nic_of_port.empty()) f["bpf_flows_per_nic"] = per_nic;
  return f;
}

json rack_transfer_figures(const std::vector<std::string>& hosts, const std::vector<json>& each, int flows_per_host) {
  json f;
  uint64_t want = 0, sent = 0, verified = 0, retrans = 0;
  int errors = 0;
  bool ok = true;
  double secs = 0, gbps = 0;
  json per_host = json::array(), notes = json::array();
  for (size_t i = 0; i < each.size() && i < hosts.size(); ++i) {
    const json& x = each[i];
    want += x.value("bytes", uint64_t{0});
    sent += x.value("sent_bytes", uint64_t{0});
    verified += x.value("verified_bytes", uint64_t{0});
    retrans += x.value("retransmits", uint64_t{0});
    errors += x.value("connection_errors", 0);
    ok = ok && x.value("bytes_verified", false);
    secs = std::max(secs, x.value("seconds", 0.0));
    gbps += x.value("sender_gbps", 0.0);
    if (x.contains("verify_note") && notes.size() < 5)
      notes.push_back(hosts[i] + ": " + x["verify_note"].get<std::string>());
    per_host.push_back({{"host", hosts[i]},
                        {"seconds", x.value("seconds", 0.0)},
                        {"verified_bytes", x.value("verified_bytes", uint64_t{0})},
                        {"connection_errors", x.value("connection_errors", 0)},
                        {"retransmits", x.value("retransmits", uint64_t{0})}});
  }
  f["hosts"] = hosts;
  f["bytes"] = want;
  f["sent_bytes"] = sent;
  f["verified_bytes"] = verified;
  f["bytes_verified"] = ok && each.size() == hosts.size();
  if (!ok) f["verify_note"] = notes;
  f["flows"] = flows_per_host * static_cast<int>(hosts.size());
  f["connection_errors"] = errors;
  f["seconds"] = secs;  // until the last host's transfer ended
  f["sender_gbps"] = gbps;
  f["throughput_gbps"] = gbps;
  f["retransmits"] = retrans;
  f["per_host"] = per_host;
  return f;
}

}  // namespace lanes::scenarios
