// lanes-traffic trace: one rank of a Chakra trace's replay
// (lanes/scenarios/trace_replay.hpp).
//
//   lanes-traffic trace --trace FILE --rank R --ranks N --to NEXT --port P
//       [--channels C] [--iterations I] [--scale X] [--seed SEED]
//       [--timeout SECONDS] [--wait-go] [--next-port Q] [--listen-fd FD]
//       [--peers A0,A1,... --mesh-port M] [--peer-ports M0,M1,...]
//       [--mesh-listen-fd FD]
//   Reads its rank's trace, plans it, opens the ring's channels (C to the
//   next rank, C from the previous: rank.hpp) and replays the graph I
//   times: compute nodes as waits of their traced duration times X on the
//   rank's CPU or GPU stream, collectives as lanes' ring collectives over
//   the channels, one at a time in node id order, each node once every
//   node it depends on ended. A trace with all-to-all, gather, scatter or
//   point-to-point nodes also opens direct connections to every other
//   rank (mesh.hpp: rank r at --peers' r-th address, on --mesh-port or
//   --peer-ports' r-th; ceil(C / (N-1)) to each) and moves those over
//   them. Every collective's output is checked word by word as it ends,
//   every direct message as it arrives. Prints one JSON line
//   (traffic::TraceResult). A trace that cannot be replayed is refused
//   (exit 2) before any connection.

#include <sys/prctl.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "lanes/scenarios/chakra.hpp"
#include "lanes/scenarios/trace_replay.hpp"
#include "lanes/scenarios/pattern.hpp"
#include "mesh.hpp"
#include "rank.hpp"

namespace lanes::traffic_engine {

namespace replay = lanes::scenarios::replay;
namespace chakra = lanes::scenarios::chakra;

namespace {

// the keys of direct messages: an exchange's, a transfer's (its tag and place)
constexpr uint64_t kExchangeKey = 1ull << 62;
constexpr uint64_t kTransferKey = 1ull << 63;

class Replay {
 public:
  Replay(const replay::Plan& plan, const chakra::Trace& trace, Rank& ring, Mesh* mesh, int iterations, double scale)
      : plan_(plan), ring_(ring), mesh_(mesh), iterations_(iterations), scale_(scale) {
    size_t n = plan.collectives.size();
    coll_pos_.assign(plan.ops.size(), 0);
    for (size_t k = 0; k < n; ++k) {
      size_t i = plan.collectives[k];
      coll_pos_[i] = k;
      const auto& node = trace.nodes[i];
      comm_types_.push_back(node.comm_type ? chakra::comm_name(static_cast<chakra::CommType>(*node.comm_type)) : "");
      if (coll::is_direct(plan.ops[i].coll)) coll_pos_[i] = direct_count_++;
      else ring_colls_.push_back(k);
    }
    for (size_t i : plan.transfers) ++per_iteration_[{plan.ops[i].kind, plan.ops[i].peer, plan.ops[i].tag}];
    ring_.on_ready = [this] {
      ring_up_ = true;
      maybe_start();
    };
    if (mesh_) mesh_->on_ready = [this] { maybe_start(); };
    size_t nr = ring_colls_.size();
    ring_.may_begin = [this, nr](int i) {
      return nr > 0 && sched_ && static_cast<size_t>(i) / nr == static_cast<size_t>(iteration_) &&
             sched_->collective_started(ring_colls_[static_cast<size_t>(i) % nr]);
    };
    ring_.keep_running = [this] { return !all_done_; };
    ring_.after_step = [this, nr](int i) {
      size_t k = ring_colls_[static_cast<size_t>(i) % nr];
      double begin = ring_.begin_s().at(static_cast<size_t>(i));
      collective_ended(k, begin, replayed_bytes(plan_.ops[plan_.collectives[k]]));
    };
  }

  void fill(scenarios::traffic::TraceResult& r) const {
    r.ready_s = start_s_;
    r.iteration_end_s = iteration_end_;
    r.end_s = end_s_;
    r.gpu_busy_s = replay::covered(gpu_);
    r.cpu_busy_s = replay::covered(cpu_);
    r.comm_s = replay::covered(comm_);
    r.exposed_comm_s = replay::uncovered(comm_, gpu_);
    r.collectives = collectives_;
    r.transfers = transfers_;
    r.transfer_bytes = transfer_bytes_;
  }
  // the bytes this rank's direct messages were to carry out
  uint64_t direct_send_bytes() const { return direct_send_bytes_; }

  bool done() const { return all_done_; }

 private:
  uint64_t replayed_bytes(const replay::Op& op) const {
    auto unit = 8 * static_cast<uint64_t>(coll::chunks(op.coll, ranks()));
    return std::max(unit, (op.bytes + unit - 1) / unit * unit);
  }
  int ranks() const { return ring_.result().ranks; }
  int rank() const { return ring_.result().rank; }

  // the ring's channels up, and the direct connections where the trace has any
  void maybe_start() {
    if (started_ || !ring_up_ || (mesh_ && !mesh_->ready())) return;
    started_ = true;
    start_s_ = cpu_free_ = gpu_free_ = mono_s();
    due_.assign(plan_.ops.size(), start_s_);
    sched_ = std::make_unique<replay::Scheduler>(plan_);
    pump();
  }

  // the collective stream's K-th collective ended (it began at BEGIN)
  void collective_ended(size_t k, double begin, uint64_t bytes) {
    double end = mono_s();
    comm_.push_back({begin, end});
    due_[plan_.collectives[k]] = end;
    const replay::Op& op = plan_.ops[plan_.collectives[k]];
    scenarios::traffic::TraceCollective c;
    c.op = coll::op_name(op.coll);
    c.comm_type = comm_types_[k];
    c.traced_bytes = op.bytes;
    c.bytes = bytes;
    c.iteration = iteration_;
    c.start_s = begin;
    c.end_s = end;
    collectives_.push_back(c);
    sched_->finish(plan_.collectives[k]);
    pump();
  }

  // an all-to-all, gather or scatter: a block to every rank it owes one,
  // one from every rank that owes it one; ends when all are sent and came
  void start_direct(size_t i) {
    const replay::Op& op = plan_.ops[i];
    int n = ranks(), me = rank();
    uint64_t block = coll::direct_block(op.bytes, n);
    uint64_t key = kExchangeKey | (static_cast<uint64_t>(iteration_) * direct_count_ + coll_pos_[i]);
    auto left = std::make_shared<int>(0);
    double begin = mono_s();
    size_t k = 0;
    for (size_t x = 0; x < plan_.collectives.size(); ++x)
      if (plan_.collectives[x] == i) k = x;
    auto one_done = [this, left, k, begin, block, n] {
      if (--*left == 0) collective_ended(k, begin, block * static_cast<uint64_t>(n));
    };
    for (int p = 0; p < n; ++p) {
      if (coll::direct_sends(op.coll, n, me, p, op.root)) {
        ++*left;
        direct_send_bytes_ += block;
        mesh_->send(p, key, block, one_done);
      }
      if (coll::direct_sends(op.coll, n, p, me, op.root)) {
        ++*left;
        mesh_->expect(p, key, block, one_done);
      }
    }
    if (*left == 0) {
      ++*left;
      ring_.loop().at(EventLoop::Clock::now(), one_done);
    }
  }

  // a send or a receive: its message named by its tag and its place
  void start_transfer(size_t i) {
    const replay::Op& op = plan_.ops[i];
    uint64_t seq = op.ordinal + static_cast<uint64_t>(iteration_) * per_iteration_[{op.kind, op.peer, op.tag}];
    // the tag and the place hashed together (62 bits: no two of a run meet)
    uint64_t key = kTransferKey | (scenarios::splitmix64(scenarios::splitmix64(static_cast<uint64_t>(op.tag)) ^ seq) &
                                   (kExchangeKey - 1));
    uint64_t bytes = std::max<uint64_t>(8, (op.bytes + 7) / 8 * 8);
    double begin = mono_s();
    auto done = [this, i, begin, bytes] {
      comm_.push_back({begin, mono_s()});
      due_[i] = mono_s();
      ++transfers_;
      transfer_bytes_ += bytes;
      sched_->finish(i);
      pump();
    };
    if (op.kind == replay::Kind::send) {
      direct_send_bytes_ += bytes;
      mesh_->send(op.peer, key, bytes, done);
    } else {
      mesh_->expect(op.peer, key, bytes, done);
    }
  }

  // starts what may start; a whole graph done starts the next iteration's.
  // A compute node's time is the trace's, not the event loop's: it begins
  // when what it waits for ended (a compute node: at its due end, a
  // collective: at its real end) and its stream was free, and ends its
  // duration later. A timer that fires late (the loop busy with a
  // collective's pieces, the machine's other ranks) delays what follows it
  // only as far as the network does, never adds its lateness to the GPU's.
  void pump() {
    for (;;) {
      for (size_t i : sched_->start()) {
        const replay::Op& op = plan_.ops[i];
        if (op.kind == replay::Kind::collective) {
          if (coll::is_direct(op.coll)) start_direct(i);
          else ring_.release();
          continue;
        }
        if (op.kind == replay::Kind::send || op.kind == replay::Kind::recv) {
          start_transfer(i);
          continue;
        }
        bool gpu = op.kind == replay::Kind::gpu;
        double begin = gpu ? gpu_free_ : cpu_free_;
        for (size_t d : op.deps) begin = std::max(begin, due_[d]);
        double end = begin + op.duration_s * scale_;
        due_[i] = end;
        (gpu ? gpu_free_ : cpu_free_) = end;
        (gpu ? gpu_ : cpu_).push_back({begin, end});
        auto wait = std::chrono::nanoseconds(static_cast<int64_t>(std::max(0.0, end - mono_s()) * 1e9));
        ring_.loop().at(EventLoop::Clock::now() + wait, [this, i] {
          sched_->finish(i);
          pump();
        });
      }
      if (!sched_->done()) return;
      iteration_end_.push_back(mono_s());
      if (++iteration_ >= iterations_) {
        all_done_ = true;
        end_s_ = mono_s();
        if (mesh_) mesh_->finish();
        if (ring_.done()) ring_.stop();
        return;
      }
      // the next iteration begins where this one ended, its first ops on the next turn
      double now = iteration_end_.back();
      sched_ = std::make_unique<replay::Scheduler>(plan_);
      due_.assign(plan_.ops.size(), now);
      cpu_free_ = std::max(cpu_free_, now);
      gpu_free_ = std::max(gpu_free_, now);
    }
  }

  const replay::Plan& plan_;
  Rank& ring_;
  Mesh* mesh_;
  int iterations_;
  double scale_;
  std::vector<std::string> comm_types_;
  std::vector<size_t> coll_pos_;    // a collective op's place: among the direct ones (those), or the stream's
  std::vector<size_t> ring_colls_;  // the stream's collectives on the ring, by their place on the stream
  uint64_t direct_count_ = 0;       // direct exchanges an iteration
  std::map<std::tuple<replay::Kind, int, int64_t>, uint64_t> per_iteration_;  // transfers an iteration, by direction, peer, tag
  bool ring_up_ = false, started_ = false;
  uint64_t transfers_ = 0, transfer_bytes_ = 0, direct_send_bytes_ = 0;
  std::unique_ptr<replay::Scheduler> sched_;
  int iteration_ = 0;
  bool all_done_ = false;
  double start_s_ = 0, end_s_ = 0;
  std::vector<double> due_;          // each op's end as the trace has it (a collective's: its real end)
  double cpu_free_ = 0, gpu_free_ = 0;  // each stream's last op's due end
  std::vector<double> iteration_end_;
  replay::Intervals gpu_, cpu_, comm_;
  std::vector<scenarios::traffic::TraceCollective> collectives_;
};

}  // namespace

int trace_main(const scenarios::traffic::TraceArgs& a) {
  std::string why;
  if (a.trace.empty()) why = "--trace FILE (this rank's Chakra trace) is required";
  else if (a.ranks < 2) why = "--ranks must be at least 2";
  else if (a.rank < 0 || a.rank >= a.ranks) why = "--rank must be in 0..ranks-1";
  else if (a.channels < 1 || a.channels > 256) why = "--channels must be in 1..256";
  else if (a.iterations < 1 || a.iterations > 10000) why = "--iterations must be in 1..10000";
  else if (!(a.scale >= 0) || a.scale > 1000) why = "--scale must be in 0..1000";
  sockaddr_storage next{};
  socklen_t nlen = 0;
  if (why.empty() && a.to.empty()) why = "--to NEXT (the next rank's address) is required";
  if (why.empty() && !make_addr(a.to, a.next_port.value_or(a.port), next, nlen)) why = "bad address " + a.to;
  chakra::Trace trace;
  replay::Plan plan;
  if (why.empty()) {
    try {
      trace = chakra::read(a.trace);
      plan = replay::plan(trace, a.ranks);
      if (auto stuck = replay::runnable(plan); !stuck.empty()) why = a.trace + ": cannot be replayed: " + stuck;
    } catch (const chakra::TraceError& e) {
      why = e.what();
    }
  }
  if (!why.empty()) {
    std::cerr << "lanes-traffic trace: " << why << "\n";
    return 2;
  }
  // the direct connections: where the job has what goes over them (--peers
  // given: every rank opens them, whether its own trace sends or not)
  bool direct = replay::needs_direct(plan);
  std::vector<Mesh::Addr> peers;
  if (direct && a.peers.empty())
    why = a.trace + ": its all-to-all, gather, scatter or point-to-point nodes need --peers, every rank's address";
  direct = direct || !a.peers.empty();
  if (direct) {
    if (why.empty() && a.peers.size() != static_cast<size_t>(a.ranks))
      why = "--peers must give every rank's address (" + std::to_string(a.peers.size()) + " given, " +
            std::to_string(a.ranks) + " ranks)";
    else if (!a.peer_ports.empty() && a.peer_ports.size() != static_cast<size_t>(a.ranks))
      why = "--peer-ports must give every rank's port";
    for (size_t r = 0; why.empty() && r < a.peers.size(); ++r) {
      int port = a.mesh_port;
      if (!a.peer_ports.empty()) {
        try {
          port = std::stoi(a.peer_ports[r]);
        } catch (const std::exception&) {
          port = -1;
        }
      }
      Mesh::Addr m;
      if (port <= 0 || port > 65535 || !make_addr(a.peers[r], port, m.ss, m.len))
        why = "bad peer " + a.peers[r] + " (port " + std::to_string(port) + ")";
      peers.push_back(m);
    }
    if (!why.empty()) {
      std::cerr << "lanes-traffic trace: " << why << "\n";
      return 2;
    }
  }
  // timers to the microsecond: the trace's kernels are often a few long
  ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  // the direct listener before the ring's: whoever sees the ring's port
  // listening may connect to both
  int mls = -1;
  if (direct) {
    int port = a.mesh_port;
    if (!a.peer_ports.empty()) port = std::stoi(a.peer_ports[static_cast<size_t>(a.rank)]);  // (checked above)
    mls = a.mesh_listen_fd >= 0 ? a.mesh_listen_fd : listen_tcp(port);
    if (mls < 0) return 1;
  }
  int ls = a.listen_fd >= 0 ? a.listen_fd : listen_tcp(a.port);
  if (ls < 0) return 1;
  std::vector<CollectiveSpec> seq;
  for (int it = 0; it < a.iterations; ++it)
    for (size_t i : plan.collectives)
      if (!coll::is_direct(plan.ops[i].coll)) seq.push_back({plan.ops[i].coll, plan.ops[i].bytes, plan.ops[i].root});
  Rank ring(seq, a.rank, a.ranks, a.channels, 262144, a.seed);
  ring.prepare();
  std::unique_ptr<Mesh> mesh;
  if (direct) {
    int per_peer = (a.channels + a.ranks - 2) / (a.ranks - 1);
    mesh = std::make_unique<Mesh>(ring.loop(), a.rank, a.ranks, per_peer, 262144, a.seed);
    mesh->on_fail = [&ring](const std::string& w) { ring.abort("direct connections: " + w); };
  }
  Replay rp(plan, trace, ring, mesh.get(), a.iterations, a.scale);
  if (!wait_for_go(a.wait_go)) return 1;
  // (a mesh that could not start: the result says why)
  bool ok = mesh && !mesh->start(peers, mls) ? false : ring.run(next, nlen, ls, a.timeout);
  ring.verify();
  const auto& cr = ring.result();
  scenarios::traffic::TraceResult r;
  r.trace = a.trace;
  r.rank = a.rank;
  r.ranks = a.ranks;
  r.channels = a.channels;
  r.iterations = a.iterations;
  r.scale = a.scale;
  r.collective_nodes = plan.collectives.size();
  r.transfer_nodes = plan.transfers.size();
  for (const auto& op : plan.ops) r.compute_nodes += op.kind == replay::Kind::cpu || op.kind == replay::Kind::gpu;
  rp.fill(r);
  r.sent_bytes = cr.sent_bytes;
  r.received_bytes = cr.received_bytes;
  r.expected_bytes = cr.expected_bytes;
  r.checked_bytes = cr.checked_bytes;
  r.first_bad_offset = cr.first_bad_offset;
  r.connection_errors = cr.connection_errors;
  r.errors = cr.errors;
  r.retransmits = cr.retransmits;
  r.channel_bytes = cr.channel_bytes;
  bool mesh_ok = true;
  if (mesh) {
    r.sent_bytes += mesh->sent_bytes();
    r.received_bytes += mesh->received_bytes();
    r.expected_bytes += rp.direct_send_bytes();
    r.checked_bytes += mesh->checked_bytes();
    if (r.first_bad_offset < 0) r.first_bad_offset = mesh->first_bad_offset();
    for (const auto& e : mesh->errors())
      if (std::find(r.errors.begin(), r.errors.end(), "direct connections: " + e) == r.errors.end())
        r.errors.push_back("direct connections: " + e);
    r.retransmits += mesh->retransmits();
    r.direct_bytes = mesh->connection_bytes();
    mesh_ok = mesh->verified() && mesh->sent_bytes() == rp.direct_send_bytes();
    if (ok && !mesh_ok && r.errors.empty())
      r.errors.push_back("direct connections: " + std::to_string(mesh->received_bytes()) + " of " +
                         std::to_string(mesh->expected_bytes()) + " bytes expected came");
  }
  if (ok && !rp.done()) r.errors.push_back("the replay stopped before its last node");
  r.verified = ok && rp.done() && cr.verified && mesh_ok;
  std::cout << scenarios::traffic::line_of(r) << "\n";
  return r.verified ? 0 : 1;
}

}  // namespace lanes::traffic_engine
