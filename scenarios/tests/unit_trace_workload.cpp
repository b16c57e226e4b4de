// The trace workload: its steps checked at load time (a trace that does not
// fit the job refused at file:line), lanes-traffic trace among ranks on the
// loopback (every collective of the real job's trace and of astra-sim's
// microbenchmarks verified), and the job's figures from its ranks' results.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "lanes/scenarios/chakra.hpp"
#include "lanes/scenarios/scenario.hpp"
#include "lanes/scenarios/traffic_results.hpp"
#include "lanes/testbed/input_file.hpp"
#include "support.hpp"
#include "workloads/workloads.hpp"

using namespace lanes::scenarios;

namespace {

const std::string kDir = std::string(LANES_SOURCE_DIR) + "/scenarios";
const std::string kTraces = LANES_TRACES_DIR;

std::string load_problem(const std::string& workload) {
  std::string xml = "<scenario name=\"s\"><topology file=\"../topologies/laptop.xml\"/>\n<phase name=\"p\">\n" +
                    workload + "\n</phase></scenario>";
  try {
    load_scenarios_text(xml, kDir + "/inline.xml");
  } catch (const lanes::testbed::InputError& e) {
    std::string all;
    for (const auto& p : e.problems()) all += p + "\n";
    return all;
  }
  return "";
}

// lanes-traffic trace ranks on 127.0.0.1 (listeners bound here and
// inherited): each one's result and exit status
struct RankRun {
  std::optional<traffic::TraceResult> result;
  int status = -1;
  std::string err;
};
std::vector<RankRun> run_ranks(const std::vector<std::string>& files, const std::string& scale, int iterations) {
  int n = static_cast<int>(files.size());
  lanes::test::TempDir dir;
  std::vector<int> fds, ports, mesh_fds;
  std::string peers, peer_ports;
  auto listener = [](int& port) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);  // no CLOEXEC: the rank inherits it
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 64) == 0);
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port = ntohs(a.sin_port);
    return fd;
  };
  for (int r = 0; r < n; ++r) {
    int port = 0, mport = 0;
    fds.push_back(listener(port));
    ports.push_back(port);
    mesh_fds.push_back(listener(mport));  // the direct connections'
    peers += std::string(r ? "," : "") + "127.0.0.1";
    peer_ports += (r ? "," : "") + std::to_string(mport);
  }
  std::string bin = (std::filesystem::path(lanes::test::lanes_bin()).parent_path() / "lanes-traffic").string();
  std::vector<pid_t> pids;
  std::fflush(nullptr);  // what this process has buffered is not the ranks' to print
  for (int r = 0; r < n; ++r) {
    std::string out = dir.path() + "/rank-" + std::to_string(r);
    pid_t pid = ::fork();
    if (pid == 0) {
      if (!std::freopen((out + ".json").c_str(), "w", stdout) || !std::freopen((out + ".err").c_str(), "w", stderr))
        ::_exit(127);
      std::vector<std::string> a = {bin, "trace", "--trace", files[static_cast<size_t>(r)], "--rank", std::to_string(r),
                                    "--ranks", std::to_string(n), "--to", "127.0.0.1", "--listen-fd",
                                    std::to_string(fds[static_cast<size_t>(r)]), "--next-port",
                                    std::to_string(ports[static_cast<size_t>((r + 1) % n)]), "--channels", "2",
                                    "--iterations", std::to_string(iterations), "--scale", scale, "--timeout", "60",
                                    "--peers", peers, "--peer-ports", peer_ports, "--mesh-listen-fd",
                                    std::to_string(mesh_fds[static_cast<size_t>(r)])};
      std::vector<char*> argv;
      for (auto& x : a) argv.push_back(x.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    pids.push_back(pid);
  }
  for (int fd : fds) ::close(fd);
  for (int fd : mesh_fds) ::close(fd);
  std::vector<RankRun> out;
  for (int r = 0; r < n; ++r) {
    RankRun rr;
    int st = 0;
    ::waitpid(pids[static_cast<size_t>(r)], &st, 0);
    rr.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    std::string base = dir.path() + "/rank-" + std::to_string(r);
    rr.result = traffic::read_result<traffic::TraceResult>(base + ".json");
    std::ifstream e(base + ".err");
    rr.err.assign(std::istreambuf_iterator<char>(e), std::istreambuf_iterator<char>());
    out.push_back(std::move(rr));
  }
  return out;
}

}  // namespace

TEST_CASE("trace workload: a trace that does not fit the job is refused at the step's line", "[unit]") {
  CHECK(load_problem(R"(<workload name="j" type="trace" trace="traces/chakra-feeder/chakra" replicate-rank="0"/>)")
            .empty());
  // 4 rank files, 2 hosts
  CHECK_THAT(load_problem(R"(<workload name="j" type="trace" trace="traces/astra-sim/all_reduce/4npus_1MB/all_reduce"/>)"),
             Catch::Contains("inline.xml:3: ") && Catch::Contains("the trace has 4 ranks") &&
                 Catch::Contains("the job 2 hosts"));
  CHECK_THAT(load_problem(R"(<workload name="j" type="trace" trace="traces/chakra-feeder/chakra" replicate-rank="3"/>)"),
             Catch::Contains("replicate-rank=3, but the trace has 1 rank file"));
  CHECK_THAT(load_problem(R"(<workload name="j" type="trace" trace="traces/nowhere/x"/>)"),
             Catch::Contains("no such folder"));
  // replicated, astra-sim's all-to-all
  CHECK(load_problem(R"(<workload name="j" type="trace" trace="traces/astra-sim/all_to_all/4npus_1MB/all_to_all" replicate-rank="0"/>)")
            .empty());
  CHECK_THAT(load_problem(R"(<workload name="j" type="trace" trace="traces/chakra-feeder/chakra" replicate-rank="0" scale="-1"/>)"),
             Catch::Contains("scale= must be 0 to 1000"));
  CHECK_THAT(load_problem(R"(<workload name="j" type="trace"/>)"), Catch::Contains("trace"));
}

TEST_CASE("lanes-traffic trace: astra-sim's all-reduce, all-gather and reduce-scatter on 4 ranks, every word checked",
          "[unit]") {
  for (const std::string op : {"all_reduce", "all_gather", "reduce_scatter"}) {
    INFO(op);
    std::vector<std::string> files;
    for (int r = 0; r < 4; ++r)
      files.push_back(kTraces + "/astra-sim/" + op + "/4npus_1MB/" + op + "." + std::to_string(r) + ".et");
    auto ranks = run_ranks(files, "1", 2);
    for (const auto& r : ranks) {
      INFO(r.err);
      REQUIRE(r.result);
      CHECK(r.status == 0);
      CHECK(r.result->verified);
      CHECK(r.result->errors.empty());
      CHECK(r.result->collectives.size() == 2);
      CHECK(r.result->iteration_end_s.size() == 2);
      CHECK(r.result->sent_bytes == r.result->expected_bytes);
      // all-reduce and all-gather: the whole MiB, twice; reduce-scatter: the rank's quarter
      CHECK(r.result->checked_bytes == (op == "reduce_scatter" ? 2u * (1u << 18) : 2u * (1u << 20)));
    }
  }
}

TEST_CASE("lanes-traffic trace: astra-sim's all-to-all on 4 and 8 ranks, straight to every rank, every word checked",
          "[unit]") {
  for (int n : {4, 8}) {
    INFO(n << " ranks");
    std::vector<std::string> files;
    for (int r = 0; r < n; ++r)
      files.push_back(kTraces + "/astra-sim/all_to_all/" + std::to_string(n) + "npus_1MB/all_to_all." +
                      std::to_string(r) + ".et");
    auto ranks = run_ranks(files, "1", 2);
    uint64_t block = (1u << 20) / static_cast<uint64_t>(n);
    for (const auto& r : ranks) {
      INFO(r.err);
      REQUIRE(r.result);
      CHECK(r.status == 0);
      CHECK(r.result->verified);
      CHECK(r.result->errors.empty());
      REQUIRE(r.result->collectives.size() == 2);
      CHECK(r.result->collectives[0].op == "alltoall");
      CHECK(r.result->collectives[0].comm_type == "ALL_TO_ALL");
      CHECK(r.result->sent_bytes == r.result->expected_bytes);
      // a block to and from every other rank, twice: nothing over the ring
      CHECK(r.result->sent_bytes == 2 * (n - 1) * block);
      CHECK(r.result->checked_bytes == 2 * (n - 1) * block);
      // one connection a peer at 2 channels from 3 or 7 peers
      CHECK(r.result->direct_bytes.size() == static_cast<size_t>(n - 1));
      for (auto b : r.result->direct_bytes) CHECK(b == 2 * block);
    }
  }
}

namespace {
chakra::Node node(uint64_t id, chakra::NodeType t, std::vector<uint64_t> deps = {}) {
  chakra::Node n;
  n.id = id;
  n.name = "n" + std::to_string(id);
  n.type = static_cast<int>(t);
  n.data_deps = std::move(deps);
  return n;
}
chakra::Node collective_node(uint64_t id, chakra::CommType c, int64_t bytes, int64_t root, std::vector<uint64_t> deps = {}) {
  auto n = node(id, chakra::NodeType::comm_coll, std::move(deps));
  n.comm_type = static_cast<int64_t>(c);
  n.comm_size = bytes;
  n.root = root;
  return n;
}
chakra::Node transfer_node(uint64_t id, bool send, int peer, int64_t bytes, int64_t tag, std::vector<uint64_t> deps = {}) {
  auto n = node(id, send ? chakra::NodeType::comm_send : chakra::NodeType::comm_recv, std::move(deps));
  (send ? n.comm_dst : n.comm_src) = peer;
  n.comm_size = bytes;
  n.comm_tag = tag;
  return n;
}
}  // namespace

TEST_CASE("lanes-traffic trace: reduce, gather, scatter and a pipeline of sends and receives on 3 ranks", "[unit]") {
  // every rank: a reduce to rank 1, a gather to rank 2, a scatter from
  // rank 0, then a pipeline: rank 0 sends 1 MiB to rank 1 (tag 7), which
  // receives it, computes 1 ms, sends 1 MiB + 4 bytes on to rank 2; and
  // rank 2 sends 100 bytes back to rank 0 (tag 8) before it receives
  lanes::test::TempDir dir;
  std::vector<std::string> files;
  for (int r = 0; r < 3; ++r) {
    chakra::Trace t;
    t.version = "0.0.4";
    t.nodes = {collective_node(1, chakra::CommType::reduce, 1 << 20, 1),
               collective_node(2, chakra::CommType::gather, 96 << 10, 2, {1}),
               collective_node(3, chakra::CommType::scatter, 96 << 10, 0, {2})};
    if (r == 0) {
      t.nodes.push_back(transfer_node(10, true, 1, 1 << 20, 7, {3}));
      t.nodes.push_back(transfer_node(11, false, 2, 100, 8));
    } else if (r == 1) {
      t.nodes.push_back(transfer_node(10, false, 0, 1 << 20, 7));
      auto work = node(11, chakra::NodeType::comp, {10});
      work.duration_us = 1000;
      t.nodes.push_back(work);
      t.nodes.push_back(transfer_node(12, true, 2, (1 << 20) + 4, 7, {11}));
    } else {
      t.nodes.push_back(transfer_node(9, true, 0, 100, 8));
      t.nodes.push_back(transfer_node(12, false, 1, (1 << 20) + 4, 7, {9}));
    }
    files.push_back(dir.path() + "/mixed." + std::to_string(r) + ".et");
    std::ofstream(files.back(), std::ios::binary) << chakra::serialize(t);
  }
  auto ranks = run_ranks(files, "1", 2);
  std::vector<uint64_t> transfers = {2, 2, 2};
  for (int r = 0; r < 3; ++r) {
    const auto& x = ranks[static_cast<size_t>(r)];
    INFO("rank " << r << ": " << x.err);
    REQUIRE(x.result);
    CHECK(x.status == 0);
    CHECK(x.result->verified);
    CHECK(x.result->errors.empty());
    CHECK(x.result->collectives.size() == 6);
    CHECK(x.result->transfer_nodes == 2);
    CHECK(x.result->transfers == 2 * transfers[static_cast<size_t>(r)]);
    CHECK(x.result->sent_bytes == x.result->expected_bytes);
  }
  // the reduce's sum at its root, the gathered blocks at the gather's, the
  // scattered ones everywhere but the scatter's root, the transfers received
  uint64_t block = 32u << 10;
  CHECK(ranks[0].result->checked_bytes == 2 * 104);
  CHECK(ranks[1].result->checked_bytes == 2 * ((1u << 20) + block + (1u << 20)));
  CHECK(ranks[2].result->checked_bytes == 2 * (2 * block + block + (1u << 20) + 8));
  CHECK(ranks[1].result->transfer_bytes == 2 * ((1u << 20) + (1u << 20) + 8));
}

TEST_CASE("lanes-traffic trace: a rank whose trace sends nothing still takes the others' connections", "[unit]") {
  // rank 0 sends 64 KiB to rank 1; rank 2 only computes
  lanes::test::TempDir dir;
  std::vector<std::string> files;
  for (int r = 0; r < 3; ++r) {
    chakra::Trace t;
    if (r == 0) t.nodes.push_back(transfer_node(1, true, 1, 64 << 10, 0));
    if (r == 1) t.nodes.push_back(transfer_node(1, false, 0, 64 << 10, 0));
    auto work = node(2, chakra::NodeType::comp);
    work.duration_us = 100;
    t.nodes.push_back(work);
    files.push_back(dir.path() + "/pair." + std::to_string(r) + ".et");
    std::ofstream(files.back(), std::ios::binary) << chakra::serialize(t);
  }
  auto ranks = run_ranks(files, "1", 1);
  for (const auto& x : ranks) {
    INFO(x.err);
    REQUIRE(x.result);
    INFO((x.result->errors.empty() ? std::string() : x.result->errors.front()));
    CHECK(x.status == 0);
    CHECK(x.result->verified);
  }
  CHECK(ranks[1].result->checked_bytes == 64u << 10);
  CHECK(ranks[2].result->transfers == 0);
}

TEST_CASE("lanes-traffic trace: the real job's trace on 3 ranks (broadcasts and all-reduces), compute as traced",
          "[unit]") {
  std::string f = kTraces + "/chakra-feeder/chakra.0.et.gz";
  auto ranks = run_ranks({f, f, f}, "0.5", 1);
  for (const auto& r : ranks) {
    INFO(r.err);
    REQUIRE(r.result);
    CHECK(r.result->verified);
    CHECK(r.result->collectives.size() == 7);
    CHECK(r.result->compute_nodes == 3643 + 14);  // the c10d calls count as CPU ops
    // the GPU's kernels take their traced time (0.293 s) times the scale,
    // however late the loop ran their timers
    CHECK(r.result->gpu_busy_s == Approx(0.5 * 0.292828).epsilon(0.01));
    CHECK(r.result->end_s - r.result->ready_s >= r.result->gpu_busy_s);
    CHECK(r.result->exposed_comm_s <= r.result->comm_s + 1e-9);
  }
}

TEST_CASE("lanes-traffic trace: a malformed trace is refused before any connection", "[unit]") {
  lanes::test::TempDir dir;
  std::string bad = dir.path() + "/bad.0.et";
  std::ofstream(bad, std::ios::binary) << std::string("\x0a\x05\x01", 3);
  auto ranks = run_ranks({bad, bad}, "1", 1);
  for (const auto& r : ranks) {
    CHECK(r.status == 2);
    CHECK_FALSE(r.result);
    CHECK_THAT(r.err, Catch::Contains("bad.0.et: message 0 at byte 0: 10 bytes long, 2 left"));
  }
}

TEST_CASE("trace figures: JCT, iterations, exposed communication, GPU idle, busbw per collective", "[unit]") {
  auto rank = [](int r, double ready, std::vector<double> ends, double t0) {
    traffic::TraceResult x;
    x.rank = r;
    x.ranks = 2;
    x.iterations = 2;
    x.ready_s = ready;
    x.iteration_end_s = ends;
    x.end_s = ends.back();
    x.gpu_busy_s = 1.0;
    x.comm_s = 2.0;
    x.exposed_comm_s = 1.5;
    x.verified = true;
    x.checked_bytes = 100;
    // one 8 MiB all-reduce and a small broadcast per iteration
    for (int it = 0; it < 2; ++it) {
      x.collectives.push_back({"allreduce", "ALL_REDUCE", 8u << 20, 8u << 20, it, t0 + it, t0 + it + 0.5});
      x.collectives.push_back({"broadcast", "BROADCAST", 424, 432, it, t0 + it + 0.6, t0 + it + 0.6001});
    }
    return std::optional(x);
  };
  auto f = trace_figures({rank(0, 10.0, {11.5, 13.0}, 10.2), rank(1, 10.1, {11.6, 12.9}, 10.3)}, {"a", "b"}, 1e9);
  CHECK(f["bytes_verified"].get<bool>());
  CHECK(f["jct_s"].get<double>() == Approx(3.0));  // 10.0 to 13.0
  CHECK(f["iteration_s"][0].get<double>() == Approx(1.6));
  CHECK(f["iteration_s"][1].get<double>() == Approx(1.4));
  CHECK(f["gpu_idle"].get<double>() == Approx(1 - 1.0 / 3));
  CHECK(f["exposed_comm_s"].get<double>() == Approx(1.5));
  REQUIRE(f["collectives"].size() == 2);
  const auto& ar = f["collectives"][0]["op"] == "allreduce" ? f["collectives"][0] : f["collectives"][1];
  const auto& bc = f["collectives"][0]["op"] == "allreduce" ? f["collectives"][1] : f["collectives"][0];
  CHECK(ar["count"].get<int>() == 2);
  CHECK(ar["time_s"].get<double>() == Approx(0.5));  // from the last rank's start (10.3) to the last end (10.8)
  CHECK(ar["busbw_gbps"].get<double>() == Approx((8 << 20) / 0.5 * 8 / 1e9));  // 2 ranks: factor 1
  CHECK_FALSE(bc.contains("busbw_gbps"));  // below a MiB: no rate
  auto g = trace_figures({rank(0, 10.0, {11.5, 13.0}, 10.2), std::nullopt}, {"a", "b"}, 1e9);
  CHECK_FALSE(g["bytes_verified"].get<bool>());
  CHECK(g["connection_errors"].get<int>() == 1);
  CHECK(g["jct_s"].get<double>() == 0);
}
