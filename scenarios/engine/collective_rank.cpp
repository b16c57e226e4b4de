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

int collective_main(const scenarios::traffic::CollectiveArgs& a) {
  auto opt = coll::parse_op(a.op);
  const int rank = a.rank, ranks = a.ranks, channels = a.channels, iterations = a.iterations, warmup = a.warmup;
  const uint64_t bytes = a.bytes, piece = a.piece, seed = a.seed;
  const double timeout = a.timeout;
  const int port = a.port, next_port = a.next_port.value_or(a.port), listen_fd = a.listen_fd;
  std::string why;
  if (!opt) why = "--op must be allreduce, reducescatter or allgather";
  else if (ranks < 2) why = "--ranks must be at least 2";
  else if (rank < 0 || rank >= ranks) why = "--rank must be in 0..ranks-1";
  else if (channels < 1 || channels > 256) why = "--channels must be in 1..256";
  else if (iterations < 1 || warmup < 0) why = "--iterations must be at least 1 and --warmup at least 0";
  else if (bytes < 8ull * static_cast<uint64_t>(ranks)) why = "--bytes must be at least 8 per rank";
  sockaddr_storage next{};
  socklen_t nlen = 0;
  if (why.empty() && a.to.empty()) why = "--to NEXT (the next rank's address) is required";
  if (why.empty() && !make_addr(a.to, next_port, next, nlen)) why = "bad address " + a.to;
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
  if (!wait_for_go(a.wait_go)) return 1;
  bool ok = r.run(next, nlen, ls, timeout);
  r.verify();
  std::cout << traffic::line_of(r.result()) << "\n";
  return ok && r.result().verified ? 0 : 1;
}

}  // namespace lanes::traffic_engine
