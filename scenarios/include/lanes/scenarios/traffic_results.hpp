#pragma once
// What each lanes-traffic mode prints when it ends: one JSON object on one
// line, written and read through these structs (lanes-traffic writes them,
// the runner's workloads read them), so the field names exist once.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lanes::scenarios::traffic {

// send: F flows to one receiver
// an MPTCP connection's subflow as the sender saw it last: its two
// addresses and what of the flow it carried (acknowledged bytes)
struct Subflow {
  std::string local, remote;
  int local_port = 0, remote_port = 0;
  uint64_t bytes_acked = 0;
  uint64_t retransmits = 0;
};
struct SendFlow {
  uint32_t flow = 0;
  int local_port = 0;  // the flow's source port (the BPF flow table's key)
  uint64_t bytes = 0;
  uint64_t retransmits = 0;
  std::string error;
  double seconds = 0;
  std::vector<uint64_t> per_interval;  // bytes sent per --interval-ms
  std::vector<Subflow> subflows;  // --mptcp: its subflows
};
struct SendResult {
  std::string role = "send";
  std::vector<SendFlow> flows;
  uint64_t bytes = 0;
  double steady_gbps = 0;  // after the first second, without the last interval
  std::vector<uint64_t> interval_bytes;
  double seconds = 0;
  double gbps = 0;  // bytes over seconds
  int connection_errors = 0;
  int interval_ms = 100;
  std::string to;  // the address it sent to
  std::string congestion;  // the TCP congestion control its flows ran
  uint64_t socket_buffer = 0;  // --window only: a flow's send buffer as the kernel keeps it (SO_SNDBUF: twice it)
};

// recv: what arrived and was verified, per flow
struct RecvFlow {
  uint32_t flow = 0;
  uint64_t expected = 0;  // the header's length (~0: until the sender closes)
  uint64_t verified = 0;
  bool complete = false;
  double seconds = 0;
  std::optional<uint64_t> first_bad_offset;
};
struct RecvResult {
  std::string role = "recv";
  std::vector<RecvFlow> flows;
  uint64_t verified_bytes = 0;
  bool all_complete = false;
};

// serve: the server side of fetch
struct ServeResult {
  std::string role = "serve";
  uint64_t connections = 0;
  uint64_t requests = 0;
  uint64_t bytes = 0;
};

struct Percentiles {
  double p50 = 0, p99 = 0, max = 0;
};
// fetch: C connections of R requests each
struct FetchResult {
  std::string role = "fetch";
  int connections = 0;
  int completed = 0;
  int connection_errors = 0;
  int connect_failures = 0;
  uint64_t requests = 0;
  uint64_t verified_bytes = 0;
  bool all_verified = false;
  double seconds = 0;
  Percentiles latency_ms, connect_ms;
  // every sample, so that percentiles over many fetchers are true ones
  std::vector<double> latency_samples_ms, connect_samples_ms;
  std::vector<std::string> errors;  // the first few failed connections' reasons
  // open loop (--rate): requests issued, those never answered, and when
  // each answered one was issued (seconds, aligned with latency_samples_ms)
  uint64_t issued = 0, outstanding = 0;
  std::vector<double> issue_s;
};

// probe-recv: per path what arrived
struct ProbePath {
  uint64_t path = 0;
  uint64_t received = 0;
  uint64_t lost = 0;  // below the highest sequence number seen
  double longest_gap_ms = 0;
  double gap_started_s = 0;
};
struct ProbeRecvResult {
  std::string role = "probe-recv";
  std::vector<ProbePath> paths;
};
struct ProbeSendResult {
  std::string role = "probe-send";
  int paths = 0;
  uint64_t sent_per_path = 0;
  uint64_t send_errors = 0;
  std::string to;  // the address it probed
};

// collective: one rank of a ring collective (collective.hpp)
struct CollectiveResult {
  std::string role = "collective";
  std::string op;
  int rank = 0, ranks = 0, channels = 0, iterations = 0, warmup = 0;
  uint64_t bytes = 0;  // the buffer (rounded to the layout)
  // the monotonic clock (shared by every namespace of the machine), in
  // seconds: when the rank's channels were up both ways, and when it
  // finished each iteration (warm-up ones first)
  double ready_s = 0;
  std::vector<double> iteration_end_s;
  uint64_t sent_bytes = 0, received_bytes = 0;  // pieces' payload, every iteration
  uint64_t expected_bytes = 0;                  // what the schedule moves each way, every iteration
  bool verified = false;  // the last iteration's output is every word it must be
  uint64_t checked_bytes = 0;
  int64_t first_bad_offset = -1;  // the first wrong byte's offset in the buffer (-1: none)
  int connection_errors = 0;
  std::vector<std::string> errors;
  uint64_t retransmits = 0;
  std::vector<uint64_t> channel_bytes;   // payload each send channel carried
};

// trace: one rank's replay of a Chakra trace (trace_replay.hpp), ITERATIONS
// times its graph. Times on the monotonic clock, in seconds.
struct TraceCollective {
  std::string op;  // lanes' collective: allreduce, allgather, reducescatter, broadcast, reduce, alltoall, gather, scatter
  std::string comm_type;  // the trace's: ALL_REDUCE, BARRIER, ...
  uint64_t traced_bytes = 0, bytes = 0;  // the trace's size, and the ring's (rounded to 8 bytes a rank)
  int iteration = 0;
  double start_s = 0, end_s = 0;  // released on this rank, ended on it
};
struct TraceResult {
  std::string role = "trace";
  std::string trace;  // the file
  int rank = 0, ranks = 0, channels = 0, iterations = 0;
  double scale = 1;        // compute durations times this
  uint64_t compute_nodes = 0, collective_nodes = 0, transfer_nodes = 0;  // per iteration
  double ready_s = 0;      // the ring's channels up both ways: the replay's start
  std::vector<double> iteration_end_s;
  double end_s = 0;
  double gpu_busy_s = 0, cpu_busy_s = 0;  // replayed compute, each stream's union
  double comm_s = 0;          // the collectives' union
  double exposed_comm_s = 0;  // collectives with no GPU kernel running (the GPU idle, waiting on the network)
  std::vector<TraceCollective> collectives;
  uint64_t transfers = 0, transfer_bytes = 0;  // point-to-point sends and receives done, their bytes
  uint64_t sent_bytes = 0, received_bytes = 0, expected_bytes = 0;
  bool verified = false;  // every collective's output every word it must be, every byte moved
  uint64_t checked_bytes = 0;
  int64_t first_bad_offset = -1;
  int connection_errors = 0;
  std::vector<std::string> errors;
  uint64_t retransmits = 0;
  std::vector<uint64_t> channel_bytes;
  std::vector<uint64_t> direct_bytes;  // each direct connection's, out (peer by peer)
};

// Missing fields read as their defaults (an older lanes-traffic, or a field
// this one leaves out); a field of the wrong type makes the read fail.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Subflow, local, remote, local_port, remote_port, bytes_acked,
                                                retransmits)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(SendFlow, flow, local_port, bytes, retransmits, error, seconds,
                                                per_interval, subflows)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(SendResult, role, flows, bytes, steady_gbps, interval_bytes, seconds,
                                                gbps, connection_errors, interval_ms, to, congestion,
                                                socket_buffer)
void to_json(nlohmann::json& j, const RecvFlow& x);  // first_bad_offset only when there is one
void from_json(const nlohmann::json& j, RecvFlow& x);
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(RecvResult, role, flows, verified_bytes, all_complete)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ServeResult, role, connections, requests, bytes)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Percentiles, p50, p99, max)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(FetchResult, role, connections, completed, connection_errors,
                                                connect_failures, requests, verified_bytes, all_verified, seconds,
                                                latency_ms, connect_ms, latency_samples_ms, connect_samples_ms, errors, issued, outstanding, issue_s)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(CollectiveResult, role, op, rank, ranks, channels, iterations, warmup,
                                                bytes, ready_s, iteration_end_s, sent_bytes, received_bytes,
                                                expected_bytes, verified, checked_bytes, first_bad_offset,
                                                connection_errors, errors, retransmits, channel_bytes)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(TraceCollective, op, comm_type, traced_bytes, bytes, iteration,
                                                start_s, end_s)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(TraceResult, role, trace, rank, ranks, channels, iterations, scale,
                                                compute_nodes, collective_nodes, transfer_nodes, ready_s,
                                                iteration_end_s, end_s, gpu_busy_s, cpu_busy_s, comm_s, exposed_comm_s,
                                                collectives, transfers, transfer_bytes, sent_bytes, received_bytes,
                                                expected_bytes, verified, checked_bytes, first_bad_offset,
                                                connection_errors, errors, retransmits, channel_bytes, direct_bytes)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ProbePath, path, received, lost, longest_gap_ms, gap_started_s)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ProbeRecvResult, role, paths)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ProbeSendResult, role, paths, sent_per_path, send_errors, to)

// One result as the line lanes-traffic prints.
template <typename T>
std::string line_of(const T& result) {
  return nlohmann::json(result).dump();
}

// The last JSON object line of a lanes-traffic output file, as T; nullopt
// when the process printed none (it died, or was killed before its end) or
// the line is not T (its role differs, or a field has the wrong type).
std::optional<nlohmann::json> last_object_line(const std::string& path);
template <typename T>
std::optional<T> read_result(const std::string& path) {
  auto j = last_object_line(path);
  if (!j) return std::nullopt;
  try {
    T x = j->template get<T>();
    if (x.role != T{}.role) return std::nullopt;
    return x;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

}  // namespace lanes::scenarios::traffic
