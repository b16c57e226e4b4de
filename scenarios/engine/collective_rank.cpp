// lanes-traffic collective: one rank of a ring collective (collective.hpp)
// over TCP, as NCCL's socket transport runs it: C channels (connections) to
// the next rank and C from the previous one, the buffer moved piece by
// piece, each piece forwarded as soon as it arrived and was reduced.
//
//   lanes-traffic collective --op allreduce|reducescatter|allgather
//       --rank R --ranks N --to NEXT --port P --bytes S [--channels C]
//       [--iterations I] [--warmup W] [--piece B] [--seed SEED]
//       [--timeout SECONDS] [--wait-go] [--next-port Q] [--listen-fd FD]
//   listens on P (or takes the listening socket FD it inherited) for rank
//   R-1's channels, connects C channels to NEXT:P (NEXT:Q) (rank R+1), runs W + I collectives of S bytes and prints one JSON line
//   (traffic::CollectiveResult): when it was ready and when each collective
//   ended on the monotonic clock, the bytes it moved, and whether its last
//   output is every word it must be (all of it checked).

// (the rank itself: rank.hpp)

#include <iostream>
#include <string>

#include "rank.hpp"

namespace lanes::traffic_engine {

int collective_main(int argc, char** argv) {
  auto opt = coll::parse_op(arg(argc, argv, "--op").value_or("allreduce"));
  int rank = std::stoi(arg(argc, argv, "--rank").value_or("-1"));
  int ranks = std::stoi(arg(argc, argv, "--ranks").value_or("0"));
  int channels = std::stoi(arg(argc, argv, "--channels").value_or("8"));
  int iterations = std::stoi(arg(argc, argv, "--iterations").value_or("3"));
  int warmup = std::stoi(arg(argc, argv, "--warmup").value_or("1"));
  uint64_t bytes = std::stoull(arg(argc, argv, "--bytes").value_or("0"));
  uint64_t piece = std::stoull(arg(argc, argv, "--piece").value_or("262144"));
  uint64_t seed = std::stoull(arg(argc, argv, "--seed").value_or("1"));
  double timeout = std::stod(arg(argc, argv, "--timeout").value_or("600"));
  int port = std::stoi(arg(argc, argv, "--port").value_or("5501"));
  int next_port = std::stoi(arg(argc, argv, "--next-port").value_or(std::to_string(port)));
  int listen_fd = std::stoi(arg(argc, argv, "--listen-fd").value_or("-1"));
  std::string why;
  if (!opt) why = "--op must be allreduce, reducescatter or allgather";
  else if (ranks < 2) why = "--ranks must be at least 2";
  else if (rank < 0 || rank >= ranks) why = "--rank must be in 0..ranks-1";
  else if (channels < 1 || channels > 256) why = "--channels must be in 1..256";
  else if (iterations < 1 || warmup < 0) why = "--iterations must be at least 1 and --warmup at least 0";
  else if (bytes < 8ull * static_cast<uint64_t>(ranks)) why = "--bytes must be at least 8 per rank";
  sockaddr_storage next{};
  socklen_t nlen = 0;
  auto to = arg(argc, argv, "--to");
  if (why.empty() && !to) why = "--to NEXT (the next rank's address) is required";
  if (why.empty() && !make_addr(*to, next_port, next, nlen)) why = "bad address " + *to;
  if (!why.empty()) {
    std::cerr << "lanes-traffic collective: " << why << "\n";
    return 2;
  }
  int ls = listen_fd >= 0 ? listen_fd : listen_tcp(port);
  if (ls < 0) return 1;
  coll::Layout l = coll::layout(bytes, ranks, piece);
  Rank r(*opt, rank, ranks, channels, l, seed, warmup + iterations);
  r.result().iterations = iterations;
  r.result().warmup = warmup;
  r.prepare();
  if (!wait_for_go(argc, argv)) return 1;
  bool ok = r.run(next, nlen, ls, timeout);
  r.verify();
  std::cout << traffic::line_of(r.result()) << "\n";
  return ok && r.result().verified ? 0 : 1;
}

}  // namespace lanes::traffic_engine
