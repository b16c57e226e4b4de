#pragma once
// Ring collectives as NCCL runs them between n ranks, and the figures
// nccl-tests reports for them. Pure: lanes-traffic's collective mode runs
// the schedule over TCP, the collective workload computes the figures, the
// unit tests check both.
//
// The buffer of S bytes is cut into n chunks. A ring step moves one chunk
// from every rank r to rank r+1 at once:
//   reduce-scatter, step k = 0..n-2: r sends chunk (r-k-1) and adds the
//     chunk (r-k-2) it receives to its own input; after n-1 steps rank r
//     holds chunk r reduced over every rank.
//   all-gather, step k = 0..n-2: r sends chunk (r-k) and stores the chunk
//     (r-k-1) it receives; rank r starts holding chunk r, ends holding all.
//   all-reduce: reduce-scatter, then all-gather.
//   broadcast from ROOT (the trace workload's; one chunk, the whole
//     buffer): the ring from the root is a chain — the root sends, each
//     rank after it receives and sends on, the last (the root's previous)
//     only receives.
//   reduce to ROOT (the trace workload's; NCCL's ring reduce): the chain
//     that ends at the root — the rank after it sends its input, each
//     rank after that adds its own to what came and sends on, the root
//     adds its own last.
// The trace workload's direct exchanges are not ring schedules: each rank
// sends a block of S/n bytes straight to the ranks it owes one (alltoall:
// to every other rank; gather: every rank to ROOT; scatter: ROOT to every
// other rank), as NCCL and PyTorch run them with point-to-point sends.
// In every schedule the chunk a rank sends in step k is the one it
// received in step k-1, so a piece of it can go on as soon as it arrived
// (the pipelining that keeps every link busy).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lanes::scenarios::collective {

enum class Op { allreduce, reducescatter, allgather, broadcast, reduce, alltoall, gather, scatter };
// alltoall, gather and scatter: direct exchanges, no ring schedule
bool is_direct(Op op);
// allreduce, reducescatter, allgather (the collective workload's choices)
std::optional<Op> parse_op(const std::string& s);
const char* op_name(Op op);

struct RingStep {
  int send_chunk = 0;
  int recv_chunk = 0;
  bool reduce = false;  // add the received chunk to the rank's input (reduce-scatter), or store it (all-gather)
  bool send = true, recv = true;  // a broadcast's steps do one or the other
};
// Rank RANK's steps of OP among N ranks (N ≥ 2; ROOT: a broadcast's or a
// reduce's; none for a direct exchange).
// A rank's M-th receiving step takes what its previous rank sent in its
// M-th sending step.
std::vector<RingStep> ring_schedule(Op op, int n, int rank, int root = 0);
// The chunks OP cuts the buffer into: N, or 1 for a broadcast and a reduce.
int chunks(Op op, int n);

// A direct exchange of S bytes among N ranks: whether FROM sends a block to
// TO, and the block's length (S/n rounded up to 8 bytes, at least 8).
bool direct_sends(Op op, int n, int from, int to, int root = 0);
uint64_t direct_block(uint64_t bytes, int n);
// Word I of the block FROM sends TO in exchange KEY under SEED: known to
// both ends, different for every exchange, pair and place.
uint64_t block_word(uint64_t seed, uint64_t key, int from, int to, uint64_t index);

// nccl-tests' figures for one collective of S bytes in T seconds among N
// ranks: algbw = S / t, busbw = algbw · factor, where factor is 2(n-1)/n
// for all-reduce, (n-1)/n for all-gather, reduce-scatter, all-to-all,
// gather and scatter, and 1 for a broadcast and a reduce (the share
// of S every rank's link must carry, so busbw compares with a link's rate
// whatever n is). S is the whole buffer (all-gather's output,
// reduce-scatter's input). Rates in bytes a second.
double bus_factor(Op op, int n);
double algbw(uint64_t bytes, double seconds);
double busbw(Op op, int n, uint64_t bytes, double seconds);

// The buffer's layout: N chunks of equal size, a multiple of 8 bytes (the
// reduction adds 64-bit words); S is rounded down to a multiple of 8N.
struct Layout {
  uint64_t bytes = 0;  // the buffer, rounded
  uint64_t chunk = 0;
  uint64_t piece = 0;  // what goes on the wire at once; the chunk's last piece may be shorter
  uint64_t pieces_per_chunk = 0;
  uint64_t piece_bytes(uint64_t j) const;  // the length of piece J of a chunk
};
Layout layout(uint64_t bytes, int n, uint64_t piece);

// A channel takes the next piece once less than half a piece is unsent on
// its socket (TCP_NOTSENT_LOWAT, between 16 and 128 KiB): it holds at most
// a piece and a half beyond what TCP has in flight, so pieces go to the
// channels that drain, not to whichever were free when they were handed out
// (which needs several pieces in flight per channel: small pieces, or few
// channels).
int notsent_lowat(uint64_t piece);

// The data: word I (the 8 bytes at offset 8·I of the buffer) of rank R's
// input under SEED is h(I)·k(R): a splitmix64 of the index times an odd
// factor of the rank, so any word of any rank is known to everyone, and
// the reduction (64-bit addition, wrapping) of word I over every rank is
// h(I)·Σk — checked at the cost of one hash a word, whatever n. A missing
// or doubled contribution, a word in the wrong place or a flipped bit
// changes it.
uint64_t input_word(uint64_t seed, int rank, uint64_t index);
// What word I of a rank's output must be after OP among N ranks (in the
// part of the output OP leaves filled: all-reduce and all-gather every
// chunk, reduce-scatter the rank's own).
// (A broadcast's output is the root's input; a reduce's, at the root, the
// sum all-reduce gives.)
uint64_t expected_word(Op op, uint64_t seed, int n, uint64_t index, uint64_t chunk_words, int root = 0);
// expected_word with the ranks' factors worked out once
class Expected {
 public:
  Expected(Op op, uint64_t seed, int n, uint64_t chunk_words, int root = 0);
  uint64_t operator()(uint64_t index) const;

 private:
  Op op_;
  uint64_t seed_, chunk_words_, sum_ = 0;
  std::vector<uint64_t> factors_;
  int root_;
};
// The part of the buffer rank RANK's output holds after OP, as [first, end)
// word indexes (a broadcast's root, a reduce's other ranks: none).
std::pair<uint64_t, uint64_t> output_words(Op op, int rank, const Layout& l, int root = 0);
// The part of the buffer rank RANK's input holds: all of it, for all-gather
// its own chunk, for a broadcast all of it at the root and none elsewhere.
std::pair<uint64_t, uint64_t> input_words(Op op, int rank, const Layout& l, int root = 0);

}  // namespace lanes::scenarios::collective
