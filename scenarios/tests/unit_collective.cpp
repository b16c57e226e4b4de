// Ring collectives: the schedule every rank follows, nccl-tests' figures,
// and lanes-traffic's collective mode among ranks on the loopback (no root:
// its sockets are all this process's user's).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "lanes/scenarios/collective.hpp"
#include "lanes/scenarios/traffic_results.hpp"
#include "support.hpp"
#include "workloads/workloads.hpp"

using namespace lanes::scenarios;
namespace coll = lanes::scenarios::collective;

namespace {

// Runs OP's schedule on N ranks at once, step by step, with each chunk's
// value as the set of ranks whose input it holds (a bit each), and returns
// every rank's output. Fails the test where a rank would receive what its
// sender did not send, add a rank's input twice, or send a chunk before it
// arrived.
std::vector<std::vector<uint32_t>> simulate(coll::Op op, int n) {
  std::vector<std::vector<coll::RingStep>> sched;
  for (int r = 0; r < n; ++r) sched.push_back(coll::ring_schedule(op, n, r));
  size_t m = sched[0].size();
  CHECK(m == static_cast<size_t>(op == coll::Op::allreduce ? 2 * (n - 1) : n - 1));
  std::vector<std::vector<uint32_t>> in(n, std::vector<uint32_t>(n, 0)), out = in;
  std::vector<std::vector<int>> written(n, std::vector<int>(n, -1));  // the step a chunk arrived in
  for (int r = 0; r < n; ++r) {
    if (op == coll::Op::allgather) {
      out[r][r] = 1u << r;  // the rank's own chunk, its whole input
    } else {
      for (int c = 0; c < n; ++c) in[r][c] = 1u << r;
    }
  }
  for (size_t k = 0; k < m; ++k) {
    std::vector<uint32_t> sent(n);
    for (int r = 0; r < n; ++r) {
      const auto& st = sched[r][k];
      CHECK(sched[r].size() == m);
      // a later step forwards the chunk that arrived in the step before
      if (k > 0) CHECK(written[r][st.send_chunk] == static_cast<int>(k) - 1);
      sent[r] = k == 0 && st.reduce ? in[r][st.send_chunk] : out[r][st.send_chunk];
    }
    for (int r = 0; r < n; ++r) {
      int from = (r + n - 1) % n;
      const auto& st = sched[r][k];
      CHECK(st.recv_chunk == sched[from][k].send_chunk);
      CHECK(st.reduce == sched[from][k].reduce);
      if (st.reduce) {
        CHECK((in[r][st.recv_chunk] & sent[from]) == 0);
        out[r][st.recv_chunk] = in[r][st.recv_chunk] | sent[from];
      } else {
        out[r][st.recv_chunk] = sent[from];
      }
      written[r][st.recv_chunk] = static_cast<int>(k);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("ring schedule: who sends which chunk to whom, step by step", "[unit]") {
  // 4 ranks, rank 0: reduce-scatter sends 3, 2, 1 and receives 2, 1, 0
  // (it ends holding chunk 0 reduced); all-gather sends 0, 3, 2 and
  // receives 3, 2, 1
  auto s = coll::ring_schedule(coll::Op::allreduce, 4, 0);
  REQUIRE(s.size() == 6);
  std::vector<int> send, recv;
  for (const auto& st : s) {
    send.push_back(st.send_chunk);
    recv.push_back(st.recv_chunk);
  }
  CHECK(send == std::vector<int>{3, 2, 1, 0, 3, 2});
  CHECK(recv == std::vector<int>{2, 1, 0, 3, 2, 1});
  CHECK(s[2].reduce);
  CHECK_FALSE(s[3].reduce);
  CHECK(coll::ring_schedule(coll::Op::allreduce, 1, 0).empty());
}

TEST_CASE("ring schedule: every rank ends with what the collective promises, n = 2..16", "[unit]") {
  for (int n = 2; n <= 16; ++n) {
    INFO("n = " << n);
    uint32_t all = (1u << n) - 1;
    auto ar = simulate(coll::Op::allreduce, n);
    auto rs = simulate(coll::Op::reducescatter, n);
    auto ag = simulate(coll::Op::allgather, n);
    for (int r = 0; r < n; ++r) {
      CHECK(rs[r][r] == all);  // reduce-scatter: rank r holds chunk r over every rank
      for (int c = 0; c < n; ++c) {
        CHECK(ar[r][c] == all);      // all-reduce: every chunk over every rank, everywhere
        CHECK(ag[r][c] == 1u << c);  // all-gather: chunk c is rank c's, everywhere
      }
    }
  }
}

TEST_CASE("reduce: the chain that ends at the root adds every rank's input once, n = 2..16, every root", "[unit]") {
  for (int n = 2; n <= 16; ++n)
    for (int root = 0; root < n; ++root) {
      INFO("n = " << n << ", root " << root);
      // along the chain from the root's next: what each rank receives, adds and sends on
      uint32_t carried = 0;
      bool have = false;
      for (int p = 0; p < n; ++p) {
        int r = (root + 1 + p) % n;
        auto s = coll::ring_schedule(coll::Op::reduce, n, r, root);
        uint32_t out = 0;
        size_t k = 0;
        if (p > 0) {  // a receiving step that adds
          REQUIRE(s.size() > k);
          CHECK(s[k].recv);
          CHECK_FALSE(s[k].send);
          CHECK(s[k].reduce);
          REQUIRE(have);
          CHECK((carried & (1u << r)) == 0);
          out = carried | (1u << r);
          ++k;
        }
        if (p < n - 1) {  // a sending step: the input (the first) or what it added
          REQUIRE(s.size() > k);
          CHECK(s[k].send);
          CHECK_FALSE(s[k].recv);
          carried = k == 0 && s[k].reduce ? 1u << r : out;
          have = true;
          ++k;
        }
        CHECK(s.size() == k);
        if (r == root) CHECK(out == (n == 32 ? ~0u : (1u << n) - 1));
      }
      CHECK(coll::chunks(coll::Op::reduce, n) == 1);
    }
}

TEST_CASE("direct exchanges: who owes whom a block, its size, and words unique to exchange, pair and place",
          "[unit]") {
  for (int n : {2, 4, 7}) {
    int a2a = 0, g = 0, sc = 0;
    for (int f = 0; f < n; ++f)
      for (int t = 0; t < n; ++t) {
        a2a += coll::direct_sends(coll::Op::alltoall, n, f, t);
        g += coll::direct_sends(coll::Op::gather, n, f, t, 1);
        sc += coll::direct_sends(coll::Op::scatter, n, f, t, 1);
        if (coll::direct_sends(coll::Op::gather, n, f, t, 1)) CHECK(t == 1);
        if (coll::direct_sends(coll::Op::scatter, n, f, t, 1)) CHECK(f == 1);
      }
    CHECK(a2a == n * (n - 1));
    CHECK(g == n - 1);
    CHECK(sc == n - 1);
    CHECK_FALSE(coll::direct_sends(coll::Op::allreduce, n, 0, 1));
    CHECK_FALSE(coll::direct_sends(coll::Op::alltoall, n, 0, n));
    CHECK(coll::ring_schedule(coll::Op::alltoall, n, 0).empty());
  }
  CHECK(coll::direct_block(1 << 20, 4) == 1 << 18);
  CHECK(coll::direct_block(100, 4) == 32);  // 25 rounded up to whole words
  CHECK(coll::direct_block(1, 4) == 8);
  CHECK(coll::bus_factor(coll::Op::alltoall, 4) == Approx(0.75));
  CHECK(coll::bus_factor(coll::Op::reduce, 4) == Approx(1.0));
  uint64_t w = coll::block_word(1, 5, 0, 1, 0);
  CHECK(w == coll::block_word(1, 5, 0, 1, 0));
  CHECK(w != coll::block_word(1, 5, 1, 0, 0));  // the other direction
  CHECK(w != coll::block_word(1, 6, 0, 1, 0));  // the next exchange
  CHECK(w != coll::block_word(1, 5, 0, 1, 1));
  CHECK(w != coll::block_word(2, 5, 0, 1, 0));
  CHECK(coll::op_name(coll::Op::alltoall) == std::string("alltoall"));
  CHECK(coll::is_direct(coll::Op::scatter));
  CHECK_FALSE(coll::is_direct(coll::Op::reduce));
}

TEST_CASE("nccl-tests' figures: algbw = S/t, busbw = algbw * 2(n-1)/n or (n-1)/n", "[unit]") {
  CHECK(coll::bus_factor(coll::Op::allreduce, 8) == Approx(1.75));
  CHECK(coll::bus_factor(coll::Op::allgather, 8) == Approx(0.875));
  CHECK(coll::bus_factor(coll::Op::reducescatter, 2) == Approx(0.5));
  CHECK(coll::bus_factor(coll::Op::allreduce, 2) == Approx(1.0));
  CHECK(coll::algbw(1'000'000'000, 2.0) == Approx(5e8));
  CHECK(coll::busbw(coll::Op::allreduce, 4, 1'000'000'000, 2.0) == Approx(7.5e8));
  CHECK(coll::algbw(100, 0) == 0);
  CHECK(coll::parse_op("allgather") == coll::Op::allgather);
  CHECK_FALSE(coll::parse_op("broadcast"));
}

TEST_CASE("collective layout: chunks of whole words, pieces that cover each chunk", "[unit]") {
  auto l = coll::layout(1000, 3, 64);
  CHECK(l.bytes == 984);  // a multiple of 8 * 3
  CHECK(l.chunk == 328);
  CHECK(l.pieces_per_chunk == 6);
  uint64_t sum = 0;
  for (uint64_t j = 0; j < l.pieces_per_chunk; ++j) sum += l.piece_bytes(j);
  CHECK(sum == l.chunk);
  CHECK(l.piece_bytes(5) == 8);
  // a channel asks for more below half a piece unsent, within 16 to 128 KiB
  CHECK(coll::notsent_lowat(256 * 1024) == 128 * 1024);
  CHECK(coll::notsent_lowat(64 * 1024) == 32 * 1024);
  CHECK(coll::notsent_lowat(4096) == 16 * 1024);
  CHECK(coll::notsent_lowat(16u << 20) == 128 * 1024);
  auto big = coll::layout(1 << 20, 4, 1 << 22);  // a piece never longer than a chunk
  CHECK(big.piece == big.chunk);
  CHECK(big.pieces_per_chunk == 1);
  // every rank's input differs, and the all-reduce's expected word is their sum
  CHECK(coll::input_word(1, 0, 5) != coll::input_word(1, 1, 5));
  CHECK(coll::input_word(1, 0, 5) != coll::input_word(2, 0, 5));
  CHECK(coll::expected_word(coll::Op::allreduce, 7, 3, 9, 4) ==
        coll::input_word(7, 0, 9) + coll::input_word(7, 1, 9) + coll::input_word(7, 2, 9));
  CHECK(coll::expected_word(coll::Op::allgather, 7, 3, 9, 4) == coll::input_word(7, 2, 9));
  coll::Expected reduced(coll::Op::allreduce, 7, 3, 4), gather(coll::Op::allgather, 7, 3, 4);
  for (uint64_t i = 0; i < 12; ++i) {
    CHECK(reduced(i) == coll::expected_word(coll::Op::allreduce, 7, 3, i, 4));
    CHECK(gather(i) == coll::input_word(7, static_cast<int>(i / 4), i));
  }
  // a contribution missing, or added twice, is not the sum
  CHECK(coll::input_word(7, 0, 9) + coll::input_word(7, 1, 9) != reduced(9));
  CHECK(reduced(9) + coll::input_word(7, 1, 9) != reduced(9));
}

TEST_CASE("collective figures: time from the warm-up's end to the last rank's end, and a missing rank fails", "[unit]") {
  auto rank = [](int r, double ready, std::vector<double> ends) {
    traffic::CollectiveResult x;
    x.op = "allreduce";
    x.rank = r;
    x.ranks = 4;
    x.bytes = 1'000'000'000;
    x.iterations = 2;
    x.warmup = 1;
    x.ready_s = ready;
    x.iteration_end_s = std::move(ends);
    x.verified = true;
    return std::optional(x);
  };
  std::vector<std::optional<traffic::CollectiveResult>> ranks = {
      rank(0, 100.0, {101.0, 103.0, 105.0}), rank(1, 100.1, {101.5, 103.2, 104.9}),
      rank(2, 100.0, {101.2, 102.9, 105.5}), rank(3, 100.2, {101.1, 103.0, 105.0})};
  std::vector<std::string> hosts = {"a", "b", "c", "d"};
  auto f = collective_figures(ranks, hosts, "allreduce", 8e9);
  // the warm-up ended everywhere at 101.5, the first at 103.2, the second at 105.5
  CHECK(f["iteration_s"][0].get<double>() == Approx(1.7));
  CHECK(f["iteration_s"][1].get<double>() == Approx(2.3));
  CHECK(f["time_s"].get<double>() == Approx(2.0));
  CHECK(f["algbw_gbps"].get<double>() == Approx(4.0));
  CHECK(f["busbw_gbps"].get<double>() == Approx(6.0));  // 4 * 2 * 3/4
  CHECK(f["efficiency"].get<double>() == Approx(0.75));
  CHECK(f["bytes_verified"].get<bool>());
  ranks[2].reset();
  auto g = collective_figures(ranks, hosts, "allreduce", 8e9);
  CHECK_FALSE(g["bytes_verified"].get<bool>());
  CHECK(g["connection_errors"].get<int>() == 1);
  CHECK(g["time_s"].get<double>() == 0);
}

namespace {

// lanes-traffic collective ranks on 127.0.0.1, each given a listening
// socket of a free port (bound here, inherited) and the next one's port:
// each one's result
std::vector<std::optional<traffic::CollectiveResult>> run_ranks(const std::string& op, int n, const std::string& bytes,
                                                                 int channels) {
  lanes::test::OwnStateDir dir("collective-" + op);
  std::filesystem::create_directories(dir.path);
  std::vector<int> fds, ports;
  for (int r = 0; r < n; ++r) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);  // no CLOEXEC: the rank inherits it
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 64) == 0);
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    fds.push_back(fd);
    ports.push_back(ntohs(a.sin_port));
  }
  std::string traffic_bin = (std::filesystem::path(lanes::test::lanes_bin()).parent_path() / "lanes-traffic").string();
  std::vector<pid_t> pids;
  std::vector<std::string> outs;
  for (int r = 0; r < n; ++r) {
    std::string out = dir.path + "/rank-" + std::to_string(r) + ".json";
    outs.push_back(out);
    pid_t pid = ::fork();
    if (pid == 0) {
      if (!std::freopen(out.c_str(), "w", stdout)) ::_exit(127);
      std::vector<std::string> a = {traffic_bin, "collective", "--op", op, "--rank", std::to_string(r), "--ranks",
                                    std::to_string(n), "--to", "127.0.0.1", "--listen-fd", std::to_string(fds[r]),
                                    "--next-port", std::to_string(ports[(r + 1) % n]), "--bytes", bytes,
                                    "--channels", std::to_string(channels), "--iterations", "2", "--warmup", "1",
                                    "--piece", "65536", "--timeout", "60"};
      std::vector<char*> argv;
      for (auto& x : a) argv.push_back(x.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    pids.push_back(pid);
  }
  for (int fd : fds) ::close(fd);
  for (pid_t p : pids) ::waitpid(p, nullptr, 0);
  std::vector<std::optional<traffic::CollectiveResult>> res;
  for (const auto& o : outs) res.push_back(traffic::read_result<traffic::CollectiveResult>(o));
  return res;
}

}  // namespace

TEST_CASE("lanes-traffic collective: ranks on the loopback reduce and gather every word", "[unit]") {
  for (const std::string op : {"allreduce", "reducescatter", "allgather"}) {
    INFO(op);
    auto res = run_ranks(op, 3, "3000000", 3);
    for (size_t r = 0; r < res.size(); ++r) {
      REQUIRE(res[r]);
      CHECK(res[r]->verified);
      CHECK(res[r]->errors.empty());
      CHECK(res[r]->iteration_end_s.size() == 3);
      CHECK(res[r]->sent_bytes == res[r]->expected_bytes);
      CHECK(res[r]->checked_bytes == (op == "reducescatter" ? res[r]->bytes / 3 : res[r]->bytes));
      uint64_t steps = op == "allreduce" ? 4 : 2;
      CHECK(res[r]->expected_bytes == steps * (res[r]->bytes / 3) * 3);
    }
  }
}
