#include <catch2/catch.hpp>
#include <random>
#include <vector>

#include "lanes/scenarios/pattern.hpp"

using namespace lanes::scenarios;

TEST_CASE("pattern gives the same stream at any offset and chunking and it verifies", "[unit]") {
  Pattern p(42, 7);
  std::vector<uint8_t> whole(100'003);
  p.fill(0, whole);
  std::mt19937 rng(1);
  std::vector<uint8_t> pieces;
  uint64_t off = 0;
  while (off < whole.size()) {
    size_t n = std::min<size_t>(1 + rng() % 5000, whole.size() - off);
    std::vector<uint8_t> chunk(n);
    p.fill(off, chunk);
    pieces.insert(pieces.end(), chunk.begin(), chunk.end());
    off += n;
  }
  CHECK(pieces == whole);
  Verifier v(42, 7);
  size_t fed = 0;
  while (fed < whole.size()) {
    size_t n = std::min<size_t>(1 + rng() % 9000, whole.size() - fed);
    REQUIRE(v.feed(std::span<const uint8_t>(whole).subspan(fed, n)));
    fed += n;
  }
  CHECK(v.verified() == whole.size());
  CHECK_FALSE(v.first_bad());
}

TEST_CASE("pattern verification catches a flipped byte at its offset", "[unit]") {
  Pattern p(1, 2);
  std::vector<uint8_t> data(65'536);
  p.fill(0, data);
  for (size_t at : {size_t{0}, size_t{7}, size_t{8}, size_t{4095}, size_t{4096}, size_t{65'535}}) {
    INFO(at);
    auto bad = data;
    bad[at] ^= 0x01;
    Verifier v(1, 2);
    CHECK_FALSE(v.feed(bad));
    REQUIRE(v.first_bad());
    CHECK(*v.first_bad() == at);
    CHECK(v.verified() == at);
    CHECK_FALSE(v.feed(std::span<const uint8_t>(data).first(1)));  // stays failed
  }
}

TEST_CASE("pattern differs per flow and seed and a lost chunk is caught", "[unit]") {
  std::vector<uint8_t> a(4096), b(4096), c(4096);
  Pattern(1, 1).fill(0, a);
  Pattern(1, 2).fill(0, b);
  Pattern(2, 1).fill(0, c);
  CHECK(a != b);
  CHECK(a != c);
  // bytes 1000..1999 lost: the stream after the gap does not verify
  std::vector<uint8_t> stream(8192);
  Pattern(1, 1).fill(0, stream);
  std::vector<uint8_t> gap(stream.begin(), stream.begin() + 1000);
  gap.insert(gap.end(), stream.begin() + 2000, stream.end());
  Verifier v(1, 1);
  CHECK_FALSE(v.feed(gap));
  CHECK(*v.first_bad() >= 1000);
}

TEST_CASE("a lost or repeated whole block or table period is caught", "[unit]") {
  const size_t block = 8 * Pattern::kBlockWords, period = 8 * Pattern::kTableWords;
  std::vector<uint8_t> stream(3 * period);
  Pattern(5, 3).fill(0, stream);
  for (auto [from, len] : {std::pair{block, block}, std::pair{2 * block, 3 * block}, std::pair{size_t{0}, period},
                           std::pair{period / 2, period}}) {
    INFO("lost " << len << " bytes at " << from);
    std::vector<uint8_t> lost(stream.begin(), stream.begin() + static_cast<long>(from));
    lost.insert(lost.end(), stream.begin() + static_cast<long>(from + len), stream.end());
    Verifier v(5, 3);
    CHECK_FALSE(v.feed(lost));
    REQUIRE(v.first_bad());
    CHECK(*v.first_bad() == from);  // caught at the first block word after the gap
  }
  // a block sent twice
  std::vector<uint8_t> twice(stream.begin(), stream.begin() + static_cast<long>(2 * block));
  twice.insert(twice.end(), stream.begin() + static_cast<long>(block), stream.end());
  Verifier v(5, 3);
  CHECK_FALSE(v.feed(twice));
  CHECK(*v.first_bad() == 2 * block);
}

TEST_CASE("a sender's source gives the same stream as the pattern, across periods and partial sends", "[unit]") {
  const size_t period = 8 * Pattern::kTableWords;
  std::vector<uint8_t> want(2 * period + 12'345);
  Pattern(9, 4).fill(0, want);
  Source src(9, 4);
  std::vector<uint8_t> got;
  std::mt19937 rng(3);
  while (got.size() < want.size()) {
    auto piece = src.at(got.size(), std::min<size_t>(1 + rng() % 70'000, want.size() - got.size()));
    size_t taken = std::max<size_t>(1, piece.size() - rng() % (piece.size() / 2 + 1));  // a partial send
    got.insert(got.end(), piece.begin(), piece.begin() + static_cast<long>(taken));
  }
  CHECK(got == want);
  Verifier v(9, 4);
  CHECK(v.feed(got));
}
