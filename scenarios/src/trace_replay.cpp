#include "lanes/scenarios/trace_replay.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <queue>
#include <set>
#include <tuple>

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
    case Kind::send: return "send";
    case Kind::recv: return "recv";
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
          case CommType::broadcast: op.coll = collective::Op::broadcast; break;
          case CommType::reduce: op.coll = collective::Op::reduce; break;
          case CommType::all_to_all: op.coll = collective::Op::alltoall; break;
          case CommType::gather: op.coll = collective::Op::gather; break;
          case CommType::scatter: op.coll = collective::Op::scatter; break;
          case CommType::barrier:
            op.coll = collective::Op::allreduce;
            op.bytes = 8 * static_cast<uint64_t>(ranks);
            break;
          default: refuse_node(t.file, n, fmt::format("comm_type {} is not a Chakra collective", *n.comm_type));
        }
        if (op.coll == collective::Op::broadcast || op.coll == collective::Op::reduce ||
            op.coll == collective::Op::gather || op.coll == collective::Op::scatter) {
          op.root = static_cast<int>(n.root.value_or(0));
          if (n.root && (*n.root < 0 || *n.root >= ranks))
            refuse_node(t.file, n, fmt::format("a {} with root rank {}, in a job of {} ranks",
                                               chakra::comm_name(static_cast<CommType>(*n.comm_type)), *n.root, ranks));
        }
        break;
      case NodeType::comm_send:
      case NodeType::comm_recv: {
        bool send = type == NodeType::comm_send;
        op.kind = send ? Kind::send : Kind::recv;
        const auto& peer = send ? n.comm_dst : n.comm_src;
        if (!peer) refuse_node(t.file, n, fmt::format("a {} without {}", send ? "send" : "receive", send ? "comm_dst" : "comm_src"));
        if (*peer < 0 || *peer >= ranks)
          refuse_node(t.file, n, fmt::format("a {} {} rank {}, in a job of {} ranks", send ? "send" : "receive",
                                             send ? "to" : "from", *peer, ranks));
        if (!n.comm_size || *n.comm_size <= 0) refuse_node(t.file, n, "a transfer without a comm_size of at least 1 byte");
        op.peer = static_cast<int>(*peer);
        op.tag = n.comm_tag.value_or(0);
        op.bytes = static_cast<uint64_t>(*n.comm_size);
        break;
      }
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
    if (p.ops[i].kind == Kind::send || p.ops[i].kind == Kind::recv) p.transfers.push_back(i);
  }
  auto by_id = [&](size_t a, size_t b) { return p.ops[a].id < p.ops[b].id; };
  std::sort(p.collectives.begin(), p.collectives.end(), by_id);
  std::sort(p.transfers.begin(), p.transfers.end(), by_id);
  // each transfer's place among those of its direction, peer and tag
  std::map<std::tuple<Kind, int, int64_t>, uint64_t> seen;
  for (size_t i : p.transfers) p.ops[i].ordinal = seen[{p.ops[i].kind, p.ops[i].peer, p.ops[i].tag}]++;
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
  // every send met by the receive its peer has for it, and no more receives
  // (FROM, TO, TAG) → the sizes in order, as the senders and as the receivers have them
  std::map<std::tuple<int, int, int64_t>, std::vector<std::pair<uint64_t, uint64_t>>> sends, recvs;
  for (size_t r = 0; r < plans.size(); ++r)
    for (size_t i : plans[r].transfers) {
      const Op& op = plans[r].ops[i];
      if (op.peer == static_cast<int>(r))
        return fmt::format("rank {}'s node {} ({}) {} rank {} itself", r, op.id, op.name,
                           op.kind == Kind::send ? "sends to" : "receives from", r);
      if (op.kind == Kind::send) sends[{static_cast<int>(r), op.peer, op.tag}].push_back({op.bytes, op.id});
      else recvs[{op.peer, static_cast<int>(r), op.tag}].push_back({op.bytes, op.id});
    }
  for (const auto& [key, list] : sends) {
    auto [from, to, tag] = key;
    auto it = recvs.find(key);
    size_t have = it == recvs.end() ? 0 : it->second.size();
    for (size_t k = 0; k < list.size(); ++k) {
      if (k >= have)
        return fmt::format("rank {}'s node {} sends {} to rank {} (tag {}), which has no receive for it: {} send(s), {} receive(s)",
                           from, list[k].second, size_text(list[k].first), to, tag, list.size(), have);
      if (it->second[k].first != list[k].first)
        return fmt::format("rank {}'s node {} sends {} to rank {} (tag {}), whose node {} receives {}", from, list[k].second,
                           size_text(list[k].first), to, tag, it->second[k].second, size_text(it->second[k].first));
    }
  }
  for (const auto& [key, list] : recvs) {
    auto [from, to, tag] = key;
    auto it = sends.find(key);
    size_t have = it == sends.end() ? 0 : it->second.size();
    if (list.size() > have)
      return fmt::format("rank {}'s node {} receives {} from rank {} (tag {}), which has no send for it", to,
                         list[have].second, size_text(list[have].first), from, tag);
  }
  return "";
}

bool needs_direct(const Plan& p) {
  if (!p.transfers.empty()) return true;
  for (size_t i : p.collectives)
    if (collective::is_direct(p.ops[i].coll)) return true;
  return false;
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
  } else if (op.kind == Kind::send || op.kind == Kind::recv) {
    ready_transfers_.insert({op.id, i});
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
    for (auto [id, i] : ready_transfers_) {  // no stream: every one that may
      started_[i] = true;
      out.push_back(i);
    }
    ready_transfers_.clear();
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
    case Kind::send:
    case Kind::recv:
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
                 : op.kind == Kind::send || op.kind == Kind::recv ? 0.0
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
