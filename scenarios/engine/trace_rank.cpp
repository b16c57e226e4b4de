// lanes-traffic trace: one rank of a Chakra trace's replay
// (lanes/scenarios/trace_replay.hpp).
//
//   lanes-traffic trace --trace FILE --rank R --ranks N --to NEXT --port P
//       [--channels C] [--iterations I] [--scale X] [--seed SEED]
//       [--timeout SECONDS] [--wait-go] [--next-port Q] [--listen-fd FD]
//   Reads its rank's trace, plans it, opens the ring's channels (C to the
//   next rank, C from the previous: rank.hpp) and replays the graph I
//   times: compute nodes as waits of their traced duration times X on the
//   rank's CPU or GPU stream, collectives as lanes' ring collectives over
//   the channels, one at a time in node id order, each node once every
//   node it depends on ended. Every collective's output is checked word by
//   word as it ends. Prints one JSON line (traffic::TraceResult). A trace
//   that cannot be replayed is refused (exit 2) before any connection.

#include <sys/prctl.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <string>

#include "lanes/scenarios/chakra.hpp"
#include "lanes/scenarios/trace_replay.hpp"
#include "rank.hpp"

namespace lanes::traffic_engine {

namespace replay = lanes::scenarios::replay;
namespace chakra = lanes::scenarios::chakra;

namespace {

class Replay {
 public:
  Replay(const replay::Plan& plan, const chakra::Trace& trace, Rank& ring, int iterations, double scale)
      : plan_(plan), ring_(ring), iterations_(iterations), scale_(scale) {
    size_t n = plan.collectives.size();
    for (size_t k = 0; k < n; ++k) {
      const auto& node = trace.nodes[plan.collectives[k]];
      comm_types_.push_back(node.comm_type ? chakra::comm_name(static_cast<chakra::CommType>(*node.comm_type)) : "");
    }
    ring_.on_ready = [this] {
      start_s_ = cpu_free_ = gpu_free_ = mono_s();
      due_.assign(plan_.ops.size(), start_s_);
      sched_ = std::make_unique<replay::Scheduler>(plan_);
      pump();
    };
    ring_.may_begin = [this, n](int i) {
      return n > 0 && sched_ && static_cast<size_t>(i) / n == static_cast<size_t>(iteration_) &&
             sched_->collective_started(static_cast<size_t>(i) % n);
    };
    ring_.keep_running = [this] { return !all_done_; };
    ring_.after_step = [this, n](int i) {
      size_t k = static_cast<size_t>(i) % n;
      double begin = ring_.begin_s().at(static_cast<size_t>(i)), end = mono_s();
      comm_.push_back({begin, end});
      due_[plan_.collectives[k]] = end;
      const replay::Op& op = plan_.ops[plan_.collectives[k]];
      scenarios::traffic::TraceCollective c;
      c.op = coll::op_name(op.coll);
      c.comm_type = comm_types_[k];
      c.traced_bytes = op.bytes;
      c.bytes = replayed_bytes(op);
      c.iteration = iteration_;
      c.start_s = begin;
      c.end_s = end;
      collectives_.push_back(c);
      sched_->finish(plan_.collectives[k]);
      pump();
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
  }

  bool done() const { return all_done_; }

 private:
  uint64_t replayed_bytes(const replay::Op& op) const {
    auto unit = 8 * static_cast<uint64_t>(coll::chunks(op.coll, ranks()));
    return std::max(unit, (op.bytes + unit - 1) / unit * unit);
  }
  int ranks() const { return ring_.result().ranks; }

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
          ring_.release();
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
  int iterations_;
  double scale_;
  std::vector<std::string> comm_types_;
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
  // timers to the microsecond: the trace's kernels are often a few long
  ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  int ls = a.listen_fd >= 0 ? a.listen_fd : listen_tcp(a.port);
  if (ls < 0) return 1;
  std::vector<CollectiveSpec> seq;
  for (int it = 0; it < a.iterations; ++it)
    for (size_t i : plan.collectives) seq.push_back({plan.ops[i].coll, plan.ops[i].bytes, plan.ops[i].root});
  Rank ring(seq, a.rank, a.ranks, a.channels, 262144, a.seed);
  ring.prepare();
  Replay rp(plan, trace, ring, a.iterations, a.scale);
  if (!wait_for_go(a.wait_go)) return 1;
  bool ok = ring.run(next, nlen, ls, a.timeout);
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
  if (ok && !rp.done()) r.errors.push_back("the replay stopped before its last node");
  r.verified = ok && rp.done() && cr.verified;
  std::cout << scenarios::traffic::line_of(r) << "\n";
  return r.verified ? 0 : 1;
}

}  // namespace lanes::traffic_engine
