#pragma once
// The workload types (one .cpp each), for the registry and the tests, and
// the pure functions their figures are computed by.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lanes/scenarios/traffic_results.hpp"
#include "lanes/scenarios/workload.hpp"

namespace lanes::scenarios {

// family="ipv4|ipv6" of every workload: the addresses its transfers use
// (the task IP, the servers' and the NICs' addresses of that family);
// without it, IPv4 unless the job host it runs for is IPv6-only
inline constexpr Attr kFamilyAttr = {"family", Kind::choice, false, "ipv4|ipv6"};
inline bool wants_v6(const Step& st, const testbed::Node* job_host) {
  if (st.has("family")) return st.str("family") == "ipv6";
  return job_host && job_host->job && !job_host->job->has4();
}
// egress bind: the job's NIC addresses of the family, "a,b,..." in NIC
// order, for lanes-traffic's --bind (a flow or connection from each in
// turn) or --to; empty on any other egress
inline std::string bound_nic_addresses(const testbed::Node& h, bool v6) {
  std::string nics;
  if (!h.job || h.job->egress != testbed::EgressMode::bind) return nics;
  for (const auto& nic : h.nics)
    nics += (nics.empty() ? "" : ",") + (v6 ? nic.job_addr6.addr.to_string() : nic.job_addr4.addr.to_string());
  return nics;
}
// The family of a job whose ranks all talk to each other and to its
// servers (collective, training): family= where given, else IPv4 when
// every host has it, else IPv6. One family for the whole job: a ring that
// went IPv4 towards a dual host and IPv6 towards an IPv6-only one would
// have ranks dial a family their own container lacks.
bool job_wants_v6(const Step& st, const testbed::Topology& topo, const std::vector<std::string>& hosts);
// "" when every host of HOSTS has the family job_wants_v6 picks; else why not
// (a job of IPv4-only and IPv6-only hosts, or family= that a host lacks).
std::string job_family_problem(const Step& st, const testbed::Topology& topo, const std::vector<std::string>& hosts);

// checkpoint-save (the job sends to a storage server) and
// checkpoint-restore (the server sends to the job): one transfer per host
class Checkpoint final : public Workload {
 public:
  explicit Checkpoint(bool save) : save_(save) {}
  const char* type() const override;
  const Attrs& attrs() const override;
  bool servers_end() const override { return true; }
  const char* nic_direction() const override { return save_ ? "tx" : "rx"; }
  bool wire_rate() const override { return true; }
  void start(WorkloadRun& w, StepContext& ctx) const override;
  nlohmann::json figures(const WorkloadRun& w, double end_s, StepContext& ctx) const override;
  std::string summary(const nlohmann::json& f) const override;
  std::vector<reports::FigureDecl> declared_figures() const override;
  std::string matrix_steps() const override;

 private:
  bool save_;
};

// ingest: one host's job fetches from a server over many connections
class Ingest final : public Workload {
 public:
  const char* type() const override;
  const Attrs& attrs() const override;
  void start(WorkloadRun& w, StepContext& ctx) const override;
  nlohmann::json figures(const WorkloadRun& w, double end_s, StepContext& ctx) const override;
  std::string summary(const nlohmann::json& f) const override;
  std::vector<reports::FigureDecl> declared_figures() const override;
  std::string matrix_steps() const override;
};

// dataload: a data loader in one host's job, open loop — requests of size=
// arrive at rate= a second (arrival= poisson or constant) for duration=,
// whatever the answers do, and queue for the next of conns= connections;
// latency runs from arrival, so an offered load above what the NICs carry
// shows as latency that grows through the run
class Dataload final : public Workload {
 public:
  const char* type() const override;
  const Attrs& attrs() const override;
  void start(WorkloadRun& w, StepContext& ctx) const override;
  nlohmann::json figures(const WorkloadRun& w, double end_s, StepContext& ctx) const override;
  std::string summary(const nlohmann::json& f) const override;
  std::vector<reports::FigureDecl> declared_figures() const override;
  std::string matrix_steps() const override;
};

// collective: a ring all-reduce, reduce-scatter or all-gather (op=) of
// size= bytes among the jobs of hosts= (every job host without it), over
// their task IPs, channels= connections to each next rank; warmup= then
// iterations= collectives, timed as nccl-tests does
class Collective final : public Workload {
 public:
  const char* type() const override;
  const Attrs& attrs() const override;
  std::string check(const Step& st, const testbed::Topology& topo) const override;
  std::vector<std::string> sampled_hosts(const Step& st, const testbed::Topology& topo) const override;
  const char* nic_direction() const override { return "tx"; }
  void start(WorkloadRun& w, StepContext& ctx) const override;
  nlohmann::json figures(const WorkloadRun& w, double end_s, StepContext& ctx) const override;
  std::string summary(const nlohmann::json& f) const override;
  std::vector<reports::FigureDecl> declared_figures() const override;
  std::string matrix_steps() const override;
};

// training: a training job (lanes/scenarios/training.hpp) among the jobs
// of hosts= (every job host without it): steps= steps of compute= and a
// ring all-reduce of gradient= bytes over channels= connections, a
// checkpoint of checkpoint= bytes per rank to server= after every
// checkpoint-every= steps; a job-fail fault kills it and it resumes from
// its latest checkpoint
class Training final : public Workload {
 public:
  const char* type() const override;
  const Attrs& attrs() const override;
  std::string check(const Step& st, const testbed::Topology& topo) const override;
  std::vector<std::string> sampled_hosts(const Step& st, const testbed::Topology& topo) const override;
  const char* nic_direction() const override { return "tx"; }
  void start(WorkloadRun& w, StepContext& ctx) const override;
  nlohmann::json figures(const WorkloadRun& w, double end_s, StepContext& ctx) const override;
  std::string summary(const nlohmann::json& f) const override;
  std::vector<reports::FigureDecl> declared_figures() const override;
  std::string matrix_steps() const override;
  std::string fail(WorkloadRun& w, StepContext& ctx, const JobFailure& f) const override;
};

// trace: a Chakra execution trace (trace=, the path of its rank files
// without `.<rank>.et`) replayed among the jobs of hosts= (every job host
// without it), rank r on the r-th host, iterations= times, compute scaled
// by scale=, collectives over channels= connections to each next rank
// (lanes/scenarios/trace_replay.hpp); replicate-rank="R": every host
// replays rank R's file
class Trace final : public Workload {
 public:
  const char* type() const override;
  const Attrs& attrs() const override;
  std::string check(const Step& st, const testbed::Topology& topo) const override;
  std::vector<std::string> sampled_hosts(const Step& st, const testbed::Topology& topo) const override;
  const char* nic_direction() const override { return "tx"; }
  void start(WorkloadRun& w, StepContext& ctx) const override;
  nlohmann::json figures(const WorkloadRun& w, double end_s, StepContext& ctx) const override;
  std::string summary(const nlohmann::json& f) const override;
  std::vector<reports::FigureDecl> declared_figures() const override;
  std::string matrix_steps() const override;
};
// The rank files a trace step replays, one per host of a job of RANKS
// (chakra::TraceError when they do not match).
std::vector<std::string> trace_files(const Step& st, size_t ranks);
// A replay's figures from its ranks' results (hosts[r] ran rank r): JCT,
// per-iteration time, compute, communication and exposed communication per
// rank, the GPUs' idle share, busbw per collective and size (against
// LINE_BPS where known). A missing result fails the check.
nlohmann::json trace_figures(const std::vector<std::optional<traffic::TraceResult>>& ranks,
                             const std::vector<std::string>& hosts, double line_bps);

// bootstrap: every job host (or hosts=) fetches at one moment (a burst)
class Bootstrap final : public Workload {
 public:
  const char* type() const override;
  const Attrs& attrs() const override;
  std::vector<std::string> sampled_hosts(const Step& st, const testbed::Topology& topo) const override;
  void start(WorkloadRun& w, StepContext& ctx) const override;
  nlohmann::json figures(const WorkloadRun& w, double end_s, StepContext& ctx) const override;
  std::string summary(const nlohmann::json& f) const override;
  std::vector<reports::FigureDecl> declared_figures() const override;
  std::string matrix_steps() const override;
};

// probe: sequence-numbered UDP probes on several paths until stopped
class Probe final : public Workload {
 public:
  const char* type() const override;
  const Attrs& attrs() const override;
  std::string check(const Step& st, const testbed::Topology& topo) const override;
  bool open_ended() const override { return true; }
  bool verifies_bytes() const override { return false; }  // its datagrams are counted
  const char* nic_direction() const override { return ""; }
  void start(WorkloadRun& w, StepContext& ctx) const override;
  nlohmann::json figures(const WorkloadRun& w, double end_s, StepContext& ctx) const override;
  std::string summary(const nlohmann::json& f) const override;
  std::vector<reports::FigureDecl> declared_figures() const override;
  std::string matrix_steps() const override;
};

// CMD with each ${addr:NODE} and ${addr6:NODE} replaced by the node's
// address of that family (a job host's task IP, a server's address);
// any other ${...} is left to the shell. StepError for an unknown node or
// a family it lacks.
std::string expand_addresses(const std::string& cmd, StepContext& ctx);
// "" when expect-exit= is absent or 0..255; otherwise what is wrong
std::string exit_problem(const Step& st);

// exec: the user's own command (sh -c cmd=) in a node's namespace or a job
// host's container, judged by its exit status
class Exec final : public Workload {
 public:
  const char* type() const override;
  const Attrs& attrs() const override;
  std::string check(const Step& st, const testbed::Topology& topo) const override;
  std::vector<std::string> sampled_hosts(const Step& st, const testbed::Topology& topo) const override;
  const char* nic_direction() const override { return "tx"; }  // direction= of each step (figure nic_direction)
  bool verifies_bytes() const override { return false; }
  void start(WorkloadRun& w, StepContext& ctx) const override;
  nlohmann::json figures(const WorkloadRun& w, double end_s, StepContext& ctx) const override;
  std::string summary(const nlohmann::json& f) const override;
  std::vector<reports::FigureDecl> declared_figures() const override;
  // the matrix has no command of the user's to run
  std::string matrix_steps() const override { return ""; }
  std::optional<reports::Assertion> verdict(const reports::WorkloadResult& r) const override;

 private:
  bool in_job(const Step& st, const testbed::Topology& topo) const;
};

// What a workload that moves verified bytes declares besides its own
// figures: its connection errors and verified bytes, added over repeated
// runs, and whether every byte of every run was verified.
std::vector<reports::FigureDecl> verified_figures(std::vector<reports::FigureDecl> own);
// "all bytes verified" or "NOT verified"
std::string verified_words(const nlohmann::json& f);

// One host's transfer: what was asked (WANT bytes over FLOWS flows), what
// the sender sent and the receiver verified, flow by flow, and where the
// host's BPF datapath placed each flow (NIC_OF_PORT: source port → NIC of
// NICS). A missing result (the process printed none) fails the check.
nlohmann::json transfer_figures(const std::optional<traffic::SendResult>& sent,
                                const std::optional<traffic::RecvResult>& received, uint64_t want, int flows,
                                const std::map<int, int>& nic_of_port, size_t nics);
// Egress mptcp: host H's transfer's subflows (SENT's flows') by the job's
// address on them (JOB_LOCAL: the sender is the job): pinned to a NIC by
// its address, or the task IP's (pinned to none); the flows that had all.
nlohmann::json mptcp_figures(const traffic::SendResult& sent, const testbed::Node& h, bool job_local);
// A rack's transfers: the sums over its hosts' figures, and each host's.
nlohmann::json rack_transfer_figures(const std::vector<std::string>& hosts, const std::vector<nlohmann::json>& each,
                                     int flows_per_host);
// The fetchers' results together: connections, errors, latency and
// connection-setup percentiles over every sample (a missing result counts
// as a fetcher that completed nothing).
nlohmann::json fetch_figures(const std::vector<std::optional<traffic::FetchResult>>& fetchers);
// A probe's paths: received, lost and the longest gap of each; a path
// nothing arrived on is blacked out for all of DURATION_S, and one whose
// last probes never arrived for as long as they took to send at RATE_HZ.
nlohmann::json probe_figures(const std::optional<traffic::ProbeSendResult>& sent,
                             const std::optional<traffic::ProbeRecvResult>& received, int paths, bool per_nic,
                             double duration_s, double rate_hz);

// A collective's figures from its ranks' results (hosts[r] ran rank r):
// the time per collective, algbw and busbw (bytes/s and Gbit/s), the
// efficiency against LINE_BPS (the slowest host's NICs together; 0: not
// known), and whether every rank verified its output. A missing result
// fails the check.
nlohmann::json collective_figures(const std::vector<std::optional<traffic::CollectiveResult>>& ranks,
                                  const std::vector<std::string>& hosts, const std::string& op, double line_bps);

// What ingest and bootstrap share: serve on each of SERVERS, then one
// fetcher per host of HOSTS (CONNS[i] connections, REQUESTS of BYTES each;
// a host with no connection gets none), host i from server i mod servers.
// BURST: the fetchers start held and go together.
struct FetchPlan {
  std::vector<std::string> servers, hosts;
  std::vector<int> conns;
  int requests = 1;
  uint64_t bytes = 0;
  bool burst = false;
  // open loop (dataload): requests a second (0: closed loop), for how long, and how they arrive
  double rate = 0, duration_s = 0;
  std::string arrival = "poisson";
};
// dataload's figures: fetch_figures and the latency trend (arrivals.hpp)
// over the run: p99 per second of issue, its slope, first and final p99,
// and the requests left unanswered
nlohmann::json dataload_figures(const std::optional<traffic::FetchResult>& r, double duration_s);
void start_fetchers(WorkloadRun& w, StepContext& ctx, const FetchPlan& plan);
std::vector<std::optional<traffic::FetchResult>> fetch_results(const WorkloadRun& w);
std::string fetch_summary(const nlohmann::json& f);
// what a fetching workload declares (fetch_figures' keys)
std::vector<reports::FigureDecl> fetch_declared();

// A ring's ranks, one per host of W.hosts in order (ROLE "collective",
// "trace"): rank r's arguments from ARGS(r, the next host's task IP), its
// output <out_base>.rank-<r>.json; all held until every one listens on
// W.port, then released at once.
void start_ring(WorkloadRun& w, StepContext& ctx, const std::string& role,
                const std::function<std::vector<std::string>(int rank, const std::string& next)>& args);

// The job hosts of a comma-separated hosts= list (those with a job), or
// every job host when the step has none.
std::vector<std::string> job_hosts(const Step& st, const testbed::Topology& topo);

}  // namespace lanes::scenarios
