#include "lanes/scenarios/pattern.hpp"

#include <cstring>

namespace lanes::scenarios {
namespace {
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
}  // namespace

Pattern::Pattern(uint64_t seed, uint32_t flow) : key_(splitmix64(seed ^ (uint64_t{flow} << 32 | flow))) {}

uint64_t Pattern::word(uint64_t index) const { return splitmix64(key_ + index); }

void Pattern::fill(uint64_t offset, std::span<uint8_t> out) const {
  size_t done = 0;
  // unaligned head and tail byte by byte; whole words in between
  auto bytewise = [&](size_t upto) {
    while (done < upto) {
      uint64_t pos = offset + done;
      uint64_t w = word(pos / 8);
      uint8_t bytes[8];
      std::memcpy(bytes, &w, 8);
      size_t from = pos % 8;
      size_t n = std::min<size_t>(8 - from, upto - done);
      std::memcpy(out.data() + done, bytes + from, n);
      done += n;
    }
  };
  size_t head = std::min<size_t>(out.size(), (8 - offset % 8) % 8);
  bytewise(head);
  uint64_t index = (offset + done) / 8;
  uint8_t* p = out.data() + done;
  size_t words = (out.size() - done) / 8;
  for (size_t i = 0; i < words; ++i) {
    uint64_t w = word(index + i);
    std::memcpy(p + 8 * i, &w, 8);
  }
  done += words * 8;
  while (done < out.size()) {
    uint64_t pos = offset + done;
    uint64_t w = word(pos / 8);
    uint8_t bytes[8];
    std::memcpy(bytes, &w, 8);  // the stream is the words' little-endian bytes
    size_t from = pos % 8;
    size_t n = std::min<size_t>(8 - from, out.size() - done);
    std::memcpy(out.data() + done, bytes + from, n);
    done += n;
  }
}

bool Verifier::feed(std::span<const uint8_t> bytes) {
  if (first_bad_) return false;
  uint8_t expect[4096];
  size_t done = 0;
  while (done < bytes.size()) {
    size_t n = std::min(sizeof expect, bytes.size() - done);
    pattern_.fill(verified_, std::span<uint8_t>(expect, n));
    if (std::memcmp(expect, bytes.data() + done, n) != 0) {
      for (size_t i = 0; i < n; ++i)
        if (expect[i] != bytes[done + i]) {
          first_bad_ = verified_ + i;
          verified_ += i;
          return false;
        }
    }
    verified_ += n;
    done += n;
  }
  return true;
}

}  // namespace lanes::scenarios
