#include "lanes/scenarios/collective.hpp"

#include <algorithm>

#include "lanes/scenarios/pattern.hpp"

namespace lanes::scenarios::collective {

std::optional<Op> parse_op(const std::string& s) {
  if (s == "allreduce") return Op::allreduce;
  if (s == "reducescatter") return Op::reducescatter;
  if (s == "allgather") return Op::allgather;
  return std::nullopt;
}

const char* op_name(Op op) {
  switch (op) {
    case Op::allreduce: return "allreduce";
    case Op::reducescatter: return "reducescatter";
    case Op::broadcast: return "broadcast";
    case Op::reduce: return "reduce";
    case Op::alltoall: return "alltoall";
    case Op::gather: return "gather";
    case Op::scatter: return "scatter";
    case Op::allgather: break;
  }
  return "allgather";
}

bool is_direct(Op op) { return op == Op::alltoall || op == Op::gather || op == Op::scatter; }

namespace {
int mod(int a, int n) { return ((a % n) + n) % n; }
}  // namespace

std::vector<RingStep> ring_schedule(Op op, int n, int rank, int root) {
  std::vector<RingStep> steps;
  if (n < 2) return steps;
  if (op == Op::broadcast) {
    int p = mod(rank - root, n);  // its place in the chain
    if (p > 0) steps.push_back({0, 0, false, false, true});
    if (p < n - 1) steps.push_back({0, 0, false, true, false});
    return steps;
  }
  if (op == Op::reduce) {
    int p = mod(rank - root - 1, n);  // its place in the chain that ends at the root
    if (p > 0) steps.push_back({0, 0, true, false, true});
    // the chain's first rank sends its input (a step that reduces sends from it)
    if (p < n - 1) steps.push_back({0, 0, p == 0, true, false});
    return steps;
  }
  if (is_direct(op)) return steps;
  if (op != Op::allgather)
    for (int k = 0; k < n - 1; ++k) steps.push_back({mod(rank - k - 1, n), mod(rank - k - 2, n), true});
  if (op != Op::reducescatter)
    for (int k = 0; k < n - 1; ++k) steps.push_back({mod(rank - k, n), mod(rank - k - 1, n), false});
  return steps;
}

int chunks(Op op, int n) { return op == Op::broadcast || op == Op::reduce ? 1 : n; }

bool direct_sends(Op op, int n, int from, int to, int root) {
  if (from == to || from < 0 || to < 0 || from >= n || to >= n) return false;
  switch (op) {
    case Op::alltoall: return true;
    case Op::gather: return to == root;
    case Op::scatter: return from == root;
    default: return false;
  }
}

uint64_t direct_block(uint64_t bytes, int n) {
  if (n < 1) return 0;
  uint64_t unit = 8 * static_cast<uint64_t>(n);
  return std::max<uint64_t>(8, (bytes + unit - 1) / unit * 8);
}

uint64_t block_word(uint64_t seed, uint64_t key, int from, int to, uint64_t index) {
  uint64_t pair = splitmix64(seed ^ splitmix64(key * 0x9E3779B97F4A7C15ull + 0x5851F42D4C957F2Dull) ^
                             (static_cast<uint64_t>(from) << 32 | static_cast<uint32_t>(to)));
  return splitmix64(pair + index);
}

double bus_factor(Op op, int n) {
  if (n < 1) return 0;
  if (op == Op::broadcast || op == Op::reduce) return 1;
  double f = static_cast<double>(n - 1) / n;
  return op == Op::allreduce ? 2 * f : f;
}

double algbw(uint64_t bytes, double seconds) { return seconds > 0 ? static_cast<double>(bytes) / seconds : 0; }

double busbw(Op op, int n, uint64_t bytes, double seconds) { return algbw(bytes, seconds) * bus_factor(op, n); }

uint64_t Layout::piece_bytes(uint64_t j) const {
  if (j + 1 < pieces_per_chunk) return piece;
  return chunk - piece * (pieces_per_chunk ? pieces_per_chunk - 1 : 0);
}

Layout layout(uint64_t bytes, int n, uint64_t piece) {
  Layout l;
  if (n < 1) return l;
  uint64_t unit = 8 * static_cast<uint64_t>(n);
  l.bytes = bytes / unit * unit;
  l.chunk = l.bytes / static_cast<uint64_t>(n);
  l.piece = std::max<uint64_t>(8, piece / 8 * 8);
  l.piece = std::min(l.piece, std::max<uint64_t>(l.chunk, 8));
  l.pieces_per_chunk = l.chunk ? (l.chunk + l.piece - 1) / l.piece : 0;
  return l;
}

int notsent_lowat(uint64_t piece) {
  return static_cast<int>(std::clamp<uint64_t>(piece / 2, 16 * 1024, 128 * 1024));
}

namespace {
// rank R's odd factor under SEED
uint64_t factor(uint64_t seed, int rank) {
  return splitmix64(seed ^ (static_cast<uint64_t>(rank) + 1) * 0xD1B54A32D192ED03ull) | 1;
}
uint64_t base_word(uint64_t seed, uint64_t index) { return splitmix64(seed * 0x9E3779B97F4A7C15ull + index); }
}  // namespace

uint64_t input_word(uint64_t seed, int rank, uint64_t index) { return base_word(seed, index) * factor(seed, rank); }

uint64_t expected_word(Op op, uint64_t seed, int n, uint64_t index, uint64_t chunk_words, int root) {
  if (op == Op::broadcast) return input_word(seed, root, index);
  if (op == Op::allgather) return input_word(seed, static_cast<int>(chunk_words ? index / chunk_words : 0), index);
  uint64_t k = 0;
  for (int r = 0; r < n; ++r) k += factor(seed, r);
  return base_word(seed, index) * k;
}

Expected::Expected(Op op, uint64_t seed, int n, uint64_t chunk_words, int root)
    : op_(op), seed_(seed), chunk_words_(chunk_words), root_(root) {
  for (int r = 0; r < n; ++r) {
    factors_.push_back(factor(seed, r));
    sum_ += factors_.back();
  }
}

uint64_t Expected::operator()(uint64_t index) const {
  uint64_t k = op_ == Op::allgather    ? factors_[chunk_words_ ? index / chunk_words_ : 0]
               : op_ == Op::broadcast ? factors_[static_cast<size_t>(root_)]
                                      : sum_;
  return base_word(seed_, index) * k;
}

std::pair<uint64_t, uint64_t> output_words(Op op, int rank, const Layout& l, int root) {
  uint64_t cw = l.chunk / 8, r = static_cast<uint64_t>(rank);
  if (op == Op::broadcast && rank == root) return {0, 0};
  if (op == Op::reduce && rank != root) return {0, 0};
  if (is_direct(op)) return {0, 0};
  if (op == Op::reducescatter) return {r * cw, (r + 1) * cw};
  return {0, l.bytes / 8};
}

std::pair<uint64_t, uint64_t> input_words(Op op, int rank, const Layout& l, int root) {
  uint64_t cw = l.chunk / 8, r = static_cast<uint64_t>(rank);
  if (op == Op::broadcast && rank != root) return {0, 0};
  if (is_direct(op)) return {0, 0};
  if (op == Op::allgather) return {r * cw, (r + 1) * cw};
  return {0, l.bytes / 8};
}

}  // namespace lanes::scenarios::collective
