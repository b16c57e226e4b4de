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
