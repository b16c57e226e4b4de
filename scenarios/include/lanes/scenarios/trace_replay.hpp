#pragma once
// A Chakra trace replayed among the job's ranks (the trace workload):
// what each node becomes, the order the nodes may run in, and the job's
// figures. Pure: lanes-traffic's trace mode runs it on its event loop, the
// workload checks traces with it before anything is built, the unit tests
// run it on a fake clock.
//
// Nodes, as astra-sim replays them:
//   COMP_NODE, and a COMM_COLL_NODE that is a CPU op (is_cpu_op: PyTorch's
//     c10d call around a NCCL kernel) — a wait of the traced duration times
//     the scenario's scale, on the rank's CPU (is_cpu_op) or its GPU
//   COMM_COLL_NODE on the GPU — lanes' collective of comm_size bytes over
//     the task IPs: on the ring, ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER
//     (and its _BLOCK form), BROADCAST and REDUCE (from or to root=, or
//     0), BARRIER (an all-reduce of 8 bytes a rank); as direct exchanges
//     between the ranks (collective.hpp), ALL_TO_ALL, GATHER and SCATTER
//   COMM_SEND_NODE / COMM_RECV_NODE — a point-to-point transfer of
//     comm_size bytes to comm_dst / from comm_src, matched by comm_tag:
//     a rank's K-th send to a peer with a tag is that peer's K-th receive
//     from the rank with the tag, of the same size
//   METADATA_NODE — nothing (it ends as it starts)
// Everything else is refused with the node and the reason: INVALID_NODE and
// types the schema does not have, memory nodes, a collective without
// comm_type or comm_size, a root or a peer outside the job, a data
// dependency on a node the trace lacks or on the node itself, data
// dependencies in a cycle.
// A control dependency holds where the trace does not contradict it, and
// the plan counts the ones it drops: on a node the trace lacks (PyTorch's
// converter makes a node's caller its control parent, and the profiler's
// root is not in the trace: what ran before the trace began), on the node
// itself, and against the order the data dependencies give (the real job's
// trace names the kernel a CPU op launches as that op's control parent,
// though the kernel needs the op's data; honoured, they close cycles).
// Chakra's own feeder (and astra-sim with it) follows data dependencies
// only.
//
// Order: a node starts once every node it depends on (data and control)
// ended, and its stream is free. A rank has three streams, each one node at
// a time: the CPU, the GPU's compute, the GPU's collectives — the last in
// node id order, so that every rank runs the same collectives in the same
// order whatever its timing (the ranks' k-th collectives must agree).
// Sends and receives take no stream: each starts once what it depends on
// ended (NCCL's point-to-point calls in a group), and a receive takes what
// came before it started (the engine reads eagerly: no pair of ranks can
// block each other on a full socket).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lanes/scenarios/chakra.hpp"
#include "lanes/scenarios/collective.hpp"

namespace lanes::scenarios::replay {

enum class Kind { cpu, gpu, collective, send, recv, skip };
const char* kind_name(Kind k);

struct Op {
  uint64_t id = 0;
  std::string name;
  Kind kind = Kind::skip;
  double duration_s = 0;  // as traced (compute)
  collective::Op coll = collective::Op::allreduce;
  uint64_t bytes = 0;  // as traced (a collective)
  int root = 0;        // a broadcast's, a reduce's, a gather's, a scatter's
  // a send's or a receive's: the peer rank, the tag, and its place among
  // this rank's transfers with that peer, that tag and that direction
  int peer = -1;
  int64_t tag = 0;
  uint64_t ordinal = 0;
  std::vector<size_t> deps;  // the ops (indexes) it waits for
};

struct Plan {
  std::string file;
  std::vector<Op> ops;              // in the trace's order
  std::vector<size_t> collectives;  // the collective ops in node id order: the collective stream's order
  std::vector<size_t> transfers;    // the sends and receives, in node id order
  double cpu_s = 0, gpu_s = 0;      // traced compute, summed per stream
  // control dependencies honoured, and those not: on a node the trace
  // does not have, on the node itself, against the data dependencies' order
  size_t ctrl_deps = 0, outside_ctrl_deps = 0, self_ctrl_deps = 0, backward_ctrl_deps = 0;
};

// The plan of one rank's trace for a job of RANKS ranks. Throws
// chakra::TraceError: "FILE: node ID (NAME): why".
Plan plan(const chakra::Trace& t, int ranks);
// "" when the ranks' plans (plans[r] rank r's) agree: as many collectives,
// the k-th of each the same collective of the same size (and root); every
// send met by its peer's receive of the same size, no rank its own peer;
// otherwise the first that does not.
std::string mismatch(const std::vector<Plan>& plans);

// Whether P has what goes over the direct connections between ranks:
// an all-to-all, a gather, a scatter, a send or a receive.
bool needs_direct(const Plan& p);

// One rank's order: which ops may start, as ops end.
class Scheduler {
 public:
  explicit Scheduler(const Plan& p);
  // The ops that start now (marked started): each free stream's next whose
  // dependencies all ended, the lowest id first on the CPU and GPU, the
  // next in order on the collective stream. An op of nothing (METADATA)
  // ends as it starts and is not returned.
  std::vector<size_t> start();
  void finish(size_t op);
  bool done() const { return ended_ == plan_.ops.size(); }
  // the collective stream's I-th collective has started
  bool collective_started(size_t i) const { return i < next_coll_; }
  size_t ended() const { return ended_; }
  // what the unstarted ops wait for, for an error: "node 12 (x) waits for node 40 (y)"
  std::string stuck() const;

 private:
  void ready_check(size_t op);
  const Plan& plan_;
  std::vector<size_t> waiting_;  // deps not yet ended, per op
  std::vector<std::vector<size_t>> dependents_;
  std::vector<bool> started_, ended_flags_;
  std::set<std::pair<uint64_t, size_t>> ready_cpu_, ready_gpu_, ready_transfers_;  // (id, op)
  std::vector<bool> ready_coll_;
  bool cpu_busy_ = false, gpu_busy_ = false, coll_busy_ = false;
  size_t next_coll_ = 0, ended_ = 0;
};

// A plan every op of which can run: "" or why not (a collective that waits
// for a later one on its stream: the ranks would wait forever).
std::string runnable(const Plan& p);

// What one run of a plan takes on a fake clock: each op's start and end,
// compute ops taking their traced duration times SCALE, collective I
// taking COLLECTIVE_S[I] (0 where it has no entry), transfers none.
struct Timed {
  std::vector<double> start, end;
  double makespan = 0;
};
Timed simulate(const Plan& p, double scale, const std::vector<double>& collective_s);

// Intervals [a, b): their union's length, and the length of A's union not covered by B's.
using Intervals = std::vector<std::pair<double, double>>;
double covered(Intervals a);
double uncovered(Intervals a, Intervals b);

}  // namespace lanes::scenarios::replay
