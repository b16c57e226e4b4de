#include "lanes/scenarios/trace_replay.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <queue>
#include <set>

namespace lanes::scenarios::replay {

namespace {

using chakra::CommType;
using chakra::NodeType;

std::string node_ref(const chakra::Node& n) {
  return n.name.empty() ? fmt::format("node {}", n.id) : fmt::format("node {} ({})", n.id, n.name);
}

[[noreturn]] void refuse_node(const std::string& file, const chakra::Node& n, const std::string& why) {
  throw chakra::TraceError(fmt::format("{}: {}: {}", file, node_ref(n), why));
}

std::string size_text(uint64_t b) {
  if (b >= (1u << 20)) return fmt::format("{:.1f} MiB", static_cast<double>(b) / (1 << 20));
  if (b >= 1024) return fmt::format("{:.1f} KiB", static_cast<double>(b) / 1024);
  return fmt::format("{} B", b);
}

}  // namespace

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::cpu: return "cpu";
    case Kind::gpu: return "gpu";
    case Kind::collective: return "collective";
    case Kind::skip: break;
  }
  return "skip";
}

Plan plan(const chakra::Trace& t, int ranks) {
  Plan p;
  p.file = t.file;
  std::map<uint64_t, size_t> index;
  for (const auto& n : t.nodes) {
    if (!index.emplace(n.id, p.ops.size()).second) refuse_node(t.file, n, "a second node with this id");
    Op op;
    op.id = n.id;
    op.name = n.name;
    op.duration_s = static_cast<double>(n.duration_us) / 1e6;
    if (n.type < 0 || n.type > static_cast<int>(NodeType::comm_coll))
      refuse_node(t.file, n, fmt::format("type {} is not a Chakra node type", n.type));
    auto type = static_cast<NodeType>(n.type);
    switch (type) {
      case NodeType::metadata: op.kind = Kind::skip; break;
      case NodeType::comp: op.kind = n.is_cpu_op ? Kind::cpu : Kind::gpu; break;
      case NodeType::comm_coll:
        if (n.is_cpu_op) {  // the CPU-side call around a kernel: CPU time, as astra-sim counts it
          op.kind = Kind::cpu;
          break;
        }
        op.kind = Kind::collective;
        if (!n.comm_type) refuse_node(t.file, n, "a collective on the GPU without comm_type");
        if (!n.comm_size || *n.comm_size <= 0) refuse_node(t.file, n, "a collective without a comm_size of at least 1 byte");
        op.bytes = static_cast<uint64_t>(*n.comm_size);
        switch (static_cast<CommType>(*n.comm_type)) {
          case CommType::all_reduce: op.coll = collective::Op::allreduce; break;
          case CommType::all_gather: op.coll = collective::Op::allgather; break;
          case CommType::reduce_scatter:
          case CommType::reduce_scatter_block: op.coll = collective::Op::reducescatter; break;
          case CommType::broadcast:
            op.coll = collective::Op::broadcast;
            op.root = static_cast<int>(n.root.value_or(0));
            if (n.root && (*n.root < 0 || *n.root >= ranks))
              refuse_node(t.file, n, fmt::format("a broadcast from rank {}, in a job of {} ranks", *n.root, ranks));
            break;
          case CommType::barrier:
            op.coll = collective::Op::allreduce;
            op.bytes = 8 * static_cast<uint64_t>(ranks);
            break;
          case CommType::all_to_all:
          case CommType::reduce:
          case CommType::gather:
          case CommType::scatter:
            refuse_node(t.file, n, fmt::format("{} is not replayed by lanes yet (it replays ALL_REDUCE, ALL_GATHER, "
                                  "REDUCE_SCATTER, BROADCAST and BARRIER)",
                                  chakra::comm_name(static_cast<CommType>(*n.comm_type))));
          default: refuse_node(t.file, n, fmt::format("comm_type {} is not a Chakra collective", *n.comm_type));
        }
        break;
      case NodeType::comm_send:
      case NodeType::comm_recv:
        refuse_node(t.file, n, fmt::format("{}: point-to-point sends and receives are not replayed by lanes yet",
                              chakra::type_name(type)));
      case NodeType::mem_load:
      case NodeType::mem_store:
        refuse_node(t.file, n, fmt::format("{}: memory nodes are not replayed by lanes", chakra::type_name(type)));
      case NodeType::invalid: refuse_node(t.file, n, "an INVALID_NODE");
    }
    if (op.kind == Kind::cpu) p.cpu_s += op.duration_s;
    if (op.kind == Kind::gpu) p.gpu_s += op.duration_s;
    p.ops.push_back(std::move(op));
  }
  // data dependencies: each must be in the trace, the graph without a cycle
  size_t m = p.ops.size();
  std::vector<std::set<size_t>> deps(m);
  for (size_t i = 0; i < m; ++i)
    for (uint64_t d : t.nodes[i].data_deps) {
      auto it = index.find(d);
      if (it == index.end())
        refuse_node(t.file, t.nodes[i], fmt::format("needs the data of node {}, which the trace does not have", d));
      if (it->second == i) refuse_node(t.file, t.nodes[i], "needs its own data");
      deps[i].insert(it->second);
    }
  // their order (Kahn's, the file's order among the ready): a cycle leaves nodes out
  std::vector<size_t> indeg(m), pos(m, m);
  std::vector<std::vector<size_t>> out(m);
  for (size_t i = 0; i < m; ++i)
    for (size_t d : deps[i]) {
      ++indeg[i];
      out[d].push_back(i);
    }
  std::set<size_t> ready;
  for (size_t i = 0; i < m; ++i)
    if (indeg[i] == 0) ready.insert(i);
  for (size_t k = 0; !ready.empty(); ++k) {
    size_t i = *ready.begin();
    ready.erase(ready.begin());
    pos[i] = k;
    for (size_t j : out[i])
      if (--indeg[j] == 0) ready.insert(j);
  }
  for (size_t i = 0; i < m; ++i)
    if (pos[i] == m) refuse_node(t.file, t.nodes[i], "its data dependencies run in a cycle back to it");
  // control dependencies, where the trace does not contradict them
  for (size_t i = 0; i < m; ++i)
    for (uint64_t d : t.nodes[i].ctrl_deps) {
      auto it = index.find(d);
      if (it == index.end()) ++p.outside_ctrl_deps;
      else if (it->second == i) ++p.self_ctrl_deps;
      else if (pos[it->second] > pos[i]) ++p.backward_ctrl_deps;
      else {
        deps[i].insert(it->second);  // (often a data dependency already)
        ++p.ctrl_deps;
      }
    }
  for (size_t i = 0; i < m; ++i) {
    p.ops[i].deps.assign(deps[i].begin(), deps[i].end());
    if (p.ops[i].kind == Kind::collective) p.collectives.push_back(i);
  }
  std::sort(p.collectives.begin(), p.collectives.end(),
            [&](size_t a, size_t b) { return p.ops[a].id < p.ops[b].id; });
  return p;
}

std::string mismatch(const std::vector<Plan>& plans) {
  if (plans.empty()) return "";
  const Plan& a = plans[0];
  for (size_t r = 1; r < plans.size(); ++r) {
    const Plan& b = plans[r];
    if (a.collectives.size() != b.collectives.size())
      return fmt::format("rank 0 has {} collectives, rank {} has {}: every rank must run the same ones",
                         a.collectives.size(), r, b.collectives.size());
    for (size_t k = 0; k < a.collectives.size(); ++k) {
      const Op& x = a.ops[a.collectives[k]];
      const Op& y = b.ops[b.collectives[k]];
      if (x.coll != y.coll || x.bytes != y.bytes || x.root != y.root)
        return fmt::format("collective {} of the job: rank 0's node {} is {} of {}, rank {}'s node {} is {} of {}", k,
                           x.id, collective::op_name(x.coll), size_text(x.bytes), r, y.id, collective::op_name(y.coll),
                           size_text(y.bytes));
    }
  }
  return "";
}

Scheduler::Scheduler(const Plan& p)
    : plan_(p),
      waiting_(p.ops.size()),
      dependents_(p.ops.size()),
      started_(p.ops.size()),
      ended_flags_(p.ops.size()),
      ready_coll_(p.collectives.size()) {
  for (size_t i = 0; i < p.ops.size(); ++i) {
    waiting_[i] = p.ops[i].deps.size();
    for (size_t d : p.ops[i].deps) dependents_[d].push_back(i);
  }
  for (size_t i = 0; i < p.ops.size(); ++i) ready_check(i);
}

void Scheduler::ready_check(size_t i) {
  if (waiting_[i] > 0 || started_[i]) return;
  const Op& op = plan_.ops[i];
  if (op.kind == Kind::cpu) ready_cpu_.insert({op.id, i});
  else if (op.kind == Kind::gpu) ready_gpu_.insert({op.id, i});
  else if (op.kind == Kind::collective) {
    auto it = std::find(plan_.collectives.begin(), plan_.collectives.end(), i);
    ready_coll_[static_cast<size_t>(it - plan_.collectives.begin())] = true;
  } else {
    // nothing to do: it ends now (start() finishes it)
    ready_cpu_.insert({op.id, i});
  }
}

std::vector<size_t> Scheduler::start() {
  std::vector<size_t> out;
  for (bool more = true; more;) {
    more = false;
    // ops of nothing end at once, wherever they are in the CPU's queue
    for (auto it = ready_cpu_.begin(); it != ready_cpu_.end();) {
      size_t i = it->second;
      if (plan_.ops[i].kind != Kind::skip) {
        ++it;
        continue;
      }
      it = ready_cpu_.erase(it);
      started_[i] = true;
      finish(i);
      more = true;
    }
    if (!cpu_busy_ && !ready_cpu_.empty()) {
      size_t i = ready_cpu_.begin()->second;
      ready_cpu_.erase(ready_cpu_.begin());
      started_[i] = true;
      cpu_busy_ = true;
      out.push_back(i);
    }
    if (!gpu_busy_ && !ready_gpu_.empty()) {
      size_t i = ready_gpu_.begin()->second;
      ready_gpu_.erase(ready_gpu_.begin());
      started_[i] = true;
      gpu_busy_ = true;
      out.push_back(i);
    }
    if (!coll_busy_ && next_coll_ < plan_.collectives.size() && ready_coll_[next_coll_]) {
      size_t i = plan_.collectives[next_coll_++];
      started_[i] = true;
      coll_busy_ = true;
      out.push_back(i);
    }
  }
  return out;
}

void Scheduler::finish(size_t i) {
  if (i >= plan_.ops.size() || ended_flags_[i] || !started_[i]) return;
  ended_flags_[i] = true;
  ++ended_;
  switch (plan_.ops[i].kind) {
    case Kind::cpu: cpu_busy_ = false; break;
    case Kind::gpu: gpu_busy_ = false; break;
    case Kind::collective: coll_busy_ = false; break;
    case Kind::skip: break;
  }
  for (size_t j : dependents_[i]) {
    --waiting_[j];
    ready_check(j);
  }
}

std::string Scheduler::stuck() const {
  if (next_coll_ < plan_.collectives.size() && !coll_busy_) {
    size_t i = plan_.collectives[next_coll_];
    for (size_t d : plan_.ops[i].deps)
      if (!ended_flags_[d])
        return fmt::format("collective node {} ({}) waits for node {} ({}), which cannot end before it", plan_.ops[i].id,
                           plan_.ops[i].name, plan_.ops[d].id, plan_.ops[d].name);
  }
  for (size_t i = 0; i < plan_.ops.size(); ++i)
    if (!started_[i])
      for (size_t d : plan_.ops[i].deps)
        if (!ended_flags_[d])
          return fmt::format("node {} ({}) waits for node {} ({})", plan_.ops[i].id, plan_.ops[i].name,
                             plan_.ops[d].id, plan_.ops[d].name);
  return "nothing left to start";
}

Timed simulate(const Plan& p, double scale, const std::vector<double>& collective_s) {
  Timed t;
  t.start.assign(p.ops.size(), -1);
  t.end.assign(p.ops.size(), -1);
  Scheduler s(p);
  // (time, op) of the ops running
  std::priority_queue<std::pair<double, size_t>, std::vector<std::pair<double, size_t>>, std::greater<>> running;
  double now = 0;
  std::map<size_t, size_t> coll_index;
  for (size_t k = 0; k < p.collectives.size(); ++k) coll_index[p.collectives[k]] = k;
  for (;;) {
    for (size_t i : s.start()) {
      t.start[i] = now;
      const Op& op = p.ops[i];
      double d = op.kind == Kind::collective
                     ? (coll_index[i] < collective_s.size() ? collective_s[coll_index[i]] : 0.0)
                     : op.duration_s * scale;
      running.push({now + d, i});
    }
    if (running.empty()) break;
    auto [when, i] = running.top();
    running.pop();
    now = when;
    t.end[i] = now;
    s.finish(i);
  }
  // ops of nothing: they ended as their last dependency did
  for (size_t i = 0; i < p.ops.size(); ++i)
    if (t.start[i] < 0 && p.ops[i].kind == Kind::skip && s.done()) {
      double at = 0;
      for (size_t d : p.ops[i].deps) at = std::max(at, t.end[d]);
      t.start[i] = t.end[i] = at;
    }
  t.makespan = now;
  return t;
}

std::string runnable(const Plan& p) {
  Scheduler s(p);
  for (;;) {
    auto started = s.start();
    if (started.empty()) break;
    for (size_t i : started) s.finish(i);
  }
  return s.done() ? "" : s.stuck();
}

double covered(Intervals a) {
  std::sort(a.begin(), a.end());
  double total = 0, lo = 0, hi = 0;
  bool open = false;
  for (const auto& [x, y] : a) {
    if (y <= x) continue;
    if (!open || x > hi) {
      if (open) total += hi - lo;
      lo = x;
      hi = y;
      open = true;
    } else {
      hi = std::max(hi, y);
    }
  }
  if (open) total += hi - lo;
  return total;
}

double uncovered(Intervals a, Intervals b) {
  // |A| - |A ∩ B| = |A ∪ B| - |B|
  double ua = covered(a), ub = covered(b);
  Intervals both = a;
  both.insert(both.end(), b.begin(), b.end());
  return std::max(0.0, std::min(ua, covered(both) - ub));
}

}  // namespace lanes::scenarios::replay
