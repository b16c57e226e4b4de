// The trace replay's plan and order, on a fake clock: what each Chakra node
// becomes, what is refused and why, and that no op ever starts before what
// it depends on ended or while its stream is busy — on hand-made traces,
// on random graphs and on the real PyTorch job's trace.

#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <string>

#include "lanes/scenarios/chakra.hpp"
#include "lanes/scenarios/trace_replay.hpp"

using namespace lanes::scenarios;
namespace coll = lanes::scenarios::collective;

namespace {

using chakra::CommType;
using chakra::NodeType;

chakra::Node comp(uint64_t id, uint64_t us, bool cpu, std::vector<uint64_t> deps = {}) {
  chakra::Node n;
  n.id = id;
  n.name = "op" + std::to_string(id);
  n.type = static_cast<int>(NodeType::comp);
  n.duration_us = us;
  n.is_cpu_op = cpu;
  n.data_deps = std::move(deps);
  return n;
}

chakra::Node coll_node(uint64_t id, CommType type, int64_t bytes, std::vector<uint64_t> deps = {}) {
  chakra::Node n;
  n.id = id;
  n.name = "coll" + std::to_string(id);
  n.type = static_cast<int>(NodeType::comm_coll);
  n.comm_type = static_cast<int64_t>(type);
  n.comm_size = bytes;
  n.ctrl_deps = std::move(deps);
  return n;
}

chakra::Trace trace_of(std::vector<chakra::Node> nodes) {
  chakra::Trace t;
  t.file = "job.0.et";
  t.nodes = std::move(nodes);
  return t;
}

std::string refusal(std::vector<chakra::Node> nodes, int ranks = 4) {
  try {
    replay::plan(trace_of(std::move(nodes)), ranks);
  } catch (const chakra::TraceError& e) {
    return e.what();
  }
  return "";
}

// Every op started after each of its dependencies ended, no two ops of one
// stream overlapped, and the collectives ran in id order.
void check_order(const replay::Plan& p, const replay::Timed& t) {
  for (size_t i = 0; i < p.ops.size(); ++i) {
    INFO("op " << p.ops[i].id);
    REQUIRE(t.start[i] >= 0);
    CHECK(t.end[i] >= t.start[i]);
    for (size_t d : p.ops[i].deps) CHECK(t.start[i] >= t.end[d]);
  }
  for (auto kind : {replay::Kind::cpu, replay::Kind::gpu, replay::Kind::collective}) {
    std::vector<std::pair<double, double>> spans;
    for (size_t i = 0; i < p.ops.size(); ++i)
      if (p.ops[i].kind == kind && t.end[i] > t.start[i]) spans.push_back({t.start[i], t.end[i]});
    std::sort(spans.begin(), spans.end());
    for (size_t k = 1; k < spans.size(); ++k) CHECK(spans[k].first >= spans[k - 1].second);
  }
  for (size_t k = 1; k < p.collectives.size(); ++k)
    CHECK(t.start[p.collectives[k]] >= t.end[p.collectives[k - 1]]);
}

}  // namespace

TEST_CASE("trace replay: what each node becomes", "[unit]") {
  auto cpu_coll = coll_node(5, CommType::all_reduce, 0);
  cpu_coll.is_cpu_op = true;  // c10d's call: CPU time, whatever it says
  cpu_coll.comm_type.reset();
  cpu_coll.duration_us = 40;
  chakra::Node meta;
  meta.id = 6;
  meta.type = static_cast<int>(NodeType::metadata);
  auto bcast = coll_node(7, CommType::broadcast, 424);
  bcast.root = 2;
  auto p = replay::plan(trace_of({comp(1, 1500, false), comp(2, 250, true, {1}), coll_node(3, CommType::all_gather, 1 << 20, {1}),
                                  coll_node(4, CommType::barrier, 1), cpu_coll, meta, bcast,
                                  coll_node(8, CommType::reduce_scatter_block, 4096)}),
                        4);
  REQUIRE(p.ops.size() == 8);
  CHECK(p.ops[0].kind == replay::Kind::gpu);
  CHECK(p.ops[0].duration_s == Approx(0.0015));
  CHECK(p.ops[1].kind == replay::Kind::cpu);
  CHECK(p.ops[1].deps == std::vector<size_t>{0});
  CHECK(p.ops[2].kind == replay::Kind::collective);
  CHECK(p.ops[2].coll == coll::Op::allgather);
  CHECK(p.ops[2].bytes == 1u << 20);
  CHECK(p.ops[3].coll == coll::Op::allreduce);  // a barrier: 8 bytes a rank
  CHECK(p.ops[3].bytes == 32);
  CHECK(p.ops[4].kind == replay::Kind::cpu);
  CHECK(p.ops[5].kind == replay::Kind::skip);
  CHECK(p.ops[6].coll == coll::Op::broadcast);
  CHECK(p.ops[6].root == 2);
  CHECK(p.ops[7].coll == coll::Op::reducescatter);
  CHECK(p.collectives == std::vector<size_t>{2, 3, 6, 7});
  CHECK(p.cpu_s == Approx(0.00029));
  CHECK(p.gpu_s == Approx(0.0015));
}

chakra::Node transfer(uint64_t id, bool send, int peer, int64_t bytes, int64_t tag, std::vector<uint64_t> deps = {}) {
  chakra::Node n;
  n.id = id;
  n.name = (send ? "send" : "recv") + std::to_string(id);
  n.type = static_cast<int>(send ? NodeType::comm_send : NodeType::comm_recv);
  (send ? n.comm_dst : n.comm_src) = peer;
  n.comm_size = bytes;
  n.comm_tag = tag;
  n.data_deps = std::move(deps);
  return n;
}

TEST_CASE("trace replay: reduce, all-to-all, gather, scatter, sends and receives", "[unit]") {
  auto red = coll_node(1, CommType::reduce, 4096);
  red.root = 3;
  auto gat = coll_node(3, CommType::gather, 4096);
  gat.root = 1;
  auto p = replay::plan(trace_of({red, coll_node(2, CommType::all_to_all, 1 << 20), gat,
                                  coll_node(4, CommType::scatter, 64), transfer(9, true, 2, 100, 7),
                                  transfer(6, true, 2, 50, 7), transfer(7, false, 2, 8, 7), transfer(8, true, 2, 8, 5)}),
                        4);
  CHECK(p.ops[0].coll == coll::Op::reduce);
  CHECK(p.ops[0].root == 3);
  CHECK(p.ops[1].coll == coll::Op::alltoall);
  CHECK(p.ops[2].coll == coll::Op::gather);
  CHECK(p.ops[2].root == 1);
  CHECK(p.ops[3].coll == coll::Op::scatter);
  CHECK(p.ops[3].root == 0);  // none given
  CHECK(p.collectives == std::vector<size_t>{0, 1, 2, 3});
  // transfers in id order, each with its place among its direction, peer and tag
  CHECK(p.transfers == std::vector<size_t>{5, 6, 7, 4});
  CHECK(p.ops[5].kind == replay::Kind::send);
  CHECK(p.ops[5].ordinal == 0);  // node 6: the first send to 2 with tag 7
  CHECK(p.ops[4].ordinal == 1);  // node 9: the second
  CHECK(p.ops[6].kind == replay::Kind::recv);
  CHECK(p.ops[6].ordinal == 0);
  CHECK(p.ops[7].ordinal == 0);  // another tag
  CHECK(p.ops[4].peer == 2);
  CHECK(p.ops[4].tag == 7);
  CHECK(p.ops[4].bytes == 100);
}

TEST_CASE("trace replay: every send must meet its receive, of the same size, on another rank", "[unit]") {
  auto plans = [](std::vector<std::vector<chakra::Node>> ranks) {
    std::vector<replay::Plan> out;
    for (auto& r : ranks) out.push_back(replay::plan(trace_of(std::move(r)), static_cast<int>(ranks.size())));
    return out;
  };
  // a pipeline 0 → 1 → 2, tag 3, twice
  CHECK(replay::mismatch(plans({{transfer(1, true, 1, 64, 3), transfer(2, true, 1, 32, 3)},
                                {transfer(1, false, 0, 64, 3), transfer(2, true, 2, 16, 3), transfer(3, false, 0, 32, 3)},
                                {transfer(5, false, 1, 16, 3)}}))
            .empty());
  CHECK(replay::mismatch(plans({{transfer(1, true, 1, 64, 3)}, {transfer(1, false, 0, 48, 3)}})) ==
        "rank 0's node 1 sends 64 B to rank 1 (tag 3), whose node 1 receives 48 B");
  CHECK_THAT(replay::mismatch(plans({{transfer(1, true, 1, 64, 3)}, {transfer(1, false, 0, 64, 4)}})),
             Catch::Contains("rank 0's node 1 sends 64 B to rank 1 (tag 3), which has no receive for it"));
  CHECK(replay::mismatch(plans({{comp(1, 1, false)}, {transfer(4, false, 0, 64, 4)}})) ==
        "rank 1's node 4 receives 64 B from rank 0 (tag 4), which has no send for it");
  CHECK(replay::mismatch(plans({{transfer(1, true, 0, 64, 3)}, {comp(1, 1, false)}})) ==
        "rank 0's node 1 (send1) sends to rank 0 itself");
}

TEST_CASE("trace replay: sends and receives take no stream, start as their dependencies end", "[unit]") {
  // kernel 1 (2 ms) feeds send 2 and receive 3 at once; kernel 4 needs the receive
  auto p = replay::plan(trace_of({comp(1, 2000, false), transfer(2, true, 1, 64, 0, {1}), transfer(3, false, 1, 64, 0, {1}),
                                  comp(4, 1000, false, {3}), coll_node(5, CommType::all_reduce, 1 << 20)}),
                        2);
  replay::Scheduler s(p);
  auto first = s.start();
  CHECK(std::find(first.begin(), first.end(), size_t{1}) == first.end());  // the send waits for kernel 1
  s.finish(0);
  auto next = s.start();
  CHECK(std::find(next.begin(), next.end(), size_t{1}) != next.end());
  CHECK(std::find(next.begin(), next.end(), size_t{2}) != next.end());  // both at once, beside the collective
  auto t = replay::simulate(p, 1.0, {0.010});
  check_order(p, t);
  CHECK(t.start[3] == Approx(0.002));
}

TEST_CASE("trace replay: what it refuses, with the node and the reason", "[unit]") {
  chakra::Node odd = comp(3, 1, false);
  odd.type = 9;
  CHECK(refusal({comp(1, 1, false), odd}) == "job.0.et: node 3 (op3): type 9 is not a Chakra node type");
  chakra::Node mem = comp(2, 1, false);
  mem.type = static_cast<int>(NodeType::mem_load);
  CHECK_THAT(refusal({mem}), Catch::Contains("node 2 (op2): MEM_LOAD_NODE: memory nodes are not replayed"));
  chakra::Node send = comp(2, 1, false);
  send.type = static_cast<int>(NodeType::comm_send);
  send.comm_size = 64;
  CHECK_THAT(refusal({send}), Catch::Contains("node 2 (op2): a send without comm_dst"));
  send.comm_dst = 4;
  CHECK_THAT(refusal({send}, 4), Catch::Contains("a send to rank 4, in a job of 4 ranks"));
  send.comm_dst = 1;
  send.comm_size.reset();
  CHECK_THAT(refusal({send}), Catch::Contains("a transfer without a comm_size"));
  chakra::Node recv = comp(2, 1, false);
  recv.type = static_cast<int>(NodeType::comm_recv);
  recv.comm_size = 64;
  CHECK_THAT(refusal({recv}), Catch::Contains("a receive without comm_src"));
  recv.comm_src = -1;
  CHECK_THAT(refusal({recv}), Catch::Contains("a receive from rank -1"));
  chakra::Node invalid = comp(2, 1, false);
  invalid.type = 0;
  CHECK_THAT(refusal({invalid}), Catch::Contains("an INVALID_NODE"));
  auto far_gather = coll_node(4, CommType::gather, 100);
  far_gather.root = 9;
  CHECK_THAT(refusal({far_gather}), Catch::Contains("a GATHER with root rank 9, in a job of 4 ranks"));
  CHECK_THAT(refusal({coll_node(4, static_cast<CommType>(42), 100)}),
             Catch::Contains("comm_type 42 is not a Chakra collective"));
  auto nosize = coll_node(4, CommType::all_reduce, 0);
  nosize.comm_size.reset();
  CHECK_THAT(refusal({nosize}), Catch::Contains("without a comm_size"));
  auto notype = coll_node(4, CommType::all_reduce, 8);
  notype.comm_type.reset();
  CHECK_THAT(refusal({notype}), Catch::Contains("without comm_type"));
  auto far = coll_node(4, CommType::broadcast, 8);
  far.root = 4;
  CHECK_THAT(refusal({far}, 4), Catch::Contains("a BROADCAST with root rank 4, in a job of 4 ranks"));
  CHECK_THAT(refusal({comp(1, 1, false, {7})}),
             Catch::Contains("node 1 (op1): needs the data of node 7, which the trace does not have"));
  auto orphan = comp(1, 1, false);
  orphan.ctrl_deps = {7};  // its caller, outside the trace: no refusal
  CHECK(replay::plan(trace_of({orphan}), 2).outside_ctrl_deps == 1);
  CHECK_THAT(refusal({comp(1, 1, false), comp(1, 1, true)}), Catch::Contains("a second node with this id"));
  CHECK_THAT(refusal({comp(1, 1, false, {3}), comp(2, 1, false, {1}), comp(3, 1, true, {2})}),
             Catch::Contains("data dependencies run in a cycle"));
  auto self = comp(1, 1, false, {1});
  CHECK_THAT(refusal({self}), Catch::Contains("needs its own data"));
  // a control dependency against the data's order is dropped (counted), one along it kept
  auto against = comp(1, 1, true);
  against.ctrl_deps = {2};
  auto along = comp(3, 1, true);
  along.ctrl_deps = {2};
  auto q = replay::plan(trace_of({against, comp(2, 1, false, {1}), along}), 2);
  CHECK(q.backward_ctrl_deps == 1);
  CHECK(q.ctrl_deps == 1);
  CHECK(q.ops[0].deps.empty());
  CHECK(q.ops[2].deps == std::vector<size_t>{1});
}

TEST_CASE("trace replay: streams one op at a time, dependencies first, on a fake clock", "[unit]") {
  // GPU kernel 1 (2 ms) feeds collective 3; CPU op 2 (1 ms) runs beside it;
  // GPU kernel 4 (5 ms) overlaps the collective (10 ms); 5 needs both
  auto p = replay::plan(trace_of({comp(1, 2000, false), comp(2, 1000, true), coll_node(3, CommType::all_reduce, 1 << 20, {1}),
                                  comp(4, 5000, false), comp(5, 1000, false, {3, 4})}),
                        2);
  auto t = replay::simulate(p, 1.0, {0.010});
  check_order(p, t);
  CHECK(t.start[1] == 0);                     // CPU beside the GPU
  CHECK(t.start[2] == Approx(0.002));         // the collective once kernel 1 ended
  CHECK(t.start[3] == Approx(0.002));         // kernel 4 after kernel 1 (one GPU stream), beside the collective
  CHECK(t.start[4] == Approx(0.012));         // both ended
  CHECK(t.makespan == Approx(0.013));
  auto half = replay::simulate(p, 0.5, {0.010});  // compute scaled: the collective is not
  CHECK(half.makespan == Approx(0.0115));  // kernel 1 in 1 ms, the collective 10 ms, 5 in 0.5 ms
}

TEST_CASE("trace replay: random graphs never run an op before its dependencies", "[unit]") {
  std::mt19937_64 rng(20261207);
  for (int g = 0; g < 200; ++g) {
    std::vector<chakra::Node> nodes;
    int n = 5 + static_cast<int>(rng() % 60);
    for (int i = 0; i < n; ++i) {
      std::vector<uint64_t> deps;
      for (int d = 0; d < i; ++d)
        if (rng() % 6 == 0) deps.push_back(static_cast<uint64_t>(d + 1));  // only earlier nodes: no cycle
      int what = static_cast<int>(rng() % 4);
      if (what == 0) nodes.push_back(coll_node(static_cast<uint64_t>(i + 1), CommType::all_reduce, 1024, deps));
      else nodes.push_back(comp(static_cast<uint64_t>(i + 1), rng() % 5000, what == 1, deps));
    }
    auto p = replay::plan(trace_of(nodes), 4);
    REQUIRE(replay::runnable(p).empty());
    std::vector<double> cs;
    for (size_t k = 0; k < p.collectives.size(); ++k) cs.push_back(static_cast<double>(rng() % 1000) / 1e5);
    auto t = replay::simulate(p, 1.0, cs);
    check_order(p, t);
  }
}

TEST_CASE("trace replay: a collective that waits for a later one is refused, not run forever", "[unit]") {
  // the collective stream runs 2 before 3, but 2 needs kernel 4, which needs 3
  auto first = coll_node(2, CommType::all_reduce, 64);
  first.data_deps = {4};
  auto p = replay::plan(trace_of({first, coll_node(3, CommType::all_reduce, 64), comp(4, 10, false, {3})}), 2);
  CHECK_THAT(replay::runnable(p), Catch::Contains("collective node 2 (coll2) waits for node 4 (op4)"));
}

TEST_CASE("trace replay: the ranks' collectives must agree", "[unit]") {
  auto a = replay::plan(trace_of({coll_node(1, CommType::all_reduce, 1 << 20), coll_node(2, CommType::all_gather, 4096)}), 2);
  auto b = replay::plan(trace_of({coll_node(7, CommType::all_reduce, 1 << 20), coll_node(9, CommType::all_gather, 4096)}), 2);
  CHECK(replay::mismatch({a, b}).empty());  // ids may differ
  auto c = replay::plan(trace_of({coll_node(1, CommType::all_reduce, 1 << 20), coll_node(2, CommType::all_gather, 8192)}), 2);
  CHECK(replay::mismatch({a, c}) ==
        "collective 1 of the job: rank 0's node 2 is allgather of 4.0 KiB, rank 1's node 2 is allgather of 8.0 KiB");
  auto d = replay::plan(trace_of({coll_node(1, CommType::all_reduce, 1 << 20)}), 2);
  CHECK_THAT(replay::mismatch({a, d}), Catch::Contains("rank 0 has 2 collectives, rank 1 has 1"));
}

TEST_CASE("trace replay: the real PyTorch job's trace plans and runs", "[unit]") {
  auto t = chakra::read(std::string(LANES_TRACES_DIR) + "/chakra-feeder/chakra.0.et.gz");
  auto p = replay::plan(t, 4);
  CHECK(p.ops.size() == 3664);
  CHECK(p.collectives.size() == 7);
  CHECK(p.outside_ctrl_deps == 1277);  // the profiler's root and the callers it left out
  CHECK(p.self_ctrl_deps == 383);
  CHECK(p.backward_ctrl_deps > 0);
  CHECK(p.ctrl_deps + p.outside_ctrl_deps + p.self_ctrl_deps + p.backward_ctrl_deps == 3664);
  CHECK(replay::runnable(p).empty());
  auto timed = replay::simulate(p, 1.0, std::vector<double>(7, 0.01));
  check_order(p, timed);
  CHECK(timed.makespan > 0.07);  // at least the 7 collectives, one after the other
  WARN("makespan " << timed.makespan << " cpu " << p.cpu_s << " gpu " << p.gpu_s << " zero-comm " << replay::simulate(p, 1.0, {}).makespan);
}

TEST_CASE("trace replay: intervals covered and left uncovered", "[unit]") {
  CHECK(replay::covered({{0, 2}, {1, 3}, {5, 6}}) == Approx(4));
  CHECK(replay::covered({}) == 0);
  CHECK(replay::uncovered({{0, 10}}, {{2, 4}, {3, 5}, {9, 12}}) == Approx(6));
  CHECK(replay::uncovered({{0, 1}}, {}) == Approx(1));
  CHECK(replay::uncovered({{0, 1}}, {{-1, 2}}) == Approx(0));
}
