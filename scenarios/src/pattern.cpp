#include "lanes/scenarios/pattern.hpp"

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace lanes::scenarios {
namespace {

// the random table of SEED, made once per process and seed
const uint64_t* table_of(uint64_t seed) {
  static std::mutex mu;
  static std::map<uint64_t, std::unique_ptr<std::vector<uint64_t>>> tables;
  std::lock_guard<std::mutex> g(mu);
  auto& t = tables[seed];
  if (!t) {
    t = std::make_unique<std::vector<uint64_t>>(Pattern::kTableWords);
    uint64_t k = splitmix64(seed ^ 0x6c616e6573ull);  // "lanes"
    for (uint64_t i = 0; i < Pattern::kTableWords; ++i) (*t)[i] = splitmix64(k + i);
  }
  return t->data();
}

}  // namespace

Pattern::Pattern(uint64_t seed, uint32_t flow)
    : key_(splitmix64(seed ^ (uint64_t{flow} << 32 | flow))), table_(table_of(seed)) {}

uint64_t Pattern::word(uint64_t index) const {
  if (index % kBlockWords == 0) return splitmix64(key_ + index / kBlockWords);
  return table_[index % kTableWords] ^ key_;
}

void Pattern::fill_words(uint64_t index, uint8_t* out, size_t words) const {
  size_t done = 0;
  while (done < words) {
    uint64_t at = (index + done) % kTableWords;
    size_t run = std::min<size_t>(words - done, kTableWords - at);
    const uint64_t* src = table_ + at;
    uint8_t* dst = out + 8 * done;
    for (size_t i = 0; i < run; ++i) {  // vectorised: a copy with an XOR
      uint64_t w = src[i] ^ key_;
      std::memcpy(dst + 8 * i, &w, 8);
    }
    done += run;
  }
  // the block words
  uint64_t first = (index + kBlockWords - 1) / kBlockWords * kBlockWords;
  for (uint64_t i = first; i < index + words; i += kBlockWords) {
    uint64_t w = splitmix64(key_ + i / kBlockWords);
    std::memcpy(out + 8 * (i - index), &w, 8);
  }
}

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
  size_t words = (out.size() - done) / 8;
  fill_words((offset + done) / 8, out.data() + done, words);
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

bool Pattern::matches(uint64_t offset, std::span<const uint8_t> bytes) const {
  size_t done = 0;
  uint8_t w8[8];
  // unaligned head and tail against the words themselves
  auto bytewise = [&](size_t upto) {
    while (done < upto) {
      uint64_t pos = offset + done;
      uint64_t w = word(pos / 8);
      std::memcpy(w8, &w, 8);
      size_t from = pos % 8, n = std::min<size_t>(8 - from, upto - done);
      if (std::memcmp(w8 + from, bytes.data() + done, n) != 0) return false;
      done += n;
    }
    return true;
  };
  if (!bytewise(std::min<size_t>(bytes.size(), (8 - offset % 8) % 8))) return false;
  uint64_t index = (offset + done) / 8;
  size_t words = (bytes.size() - done) / 8;
  const uint8_t* in = bytes.data() + done;
  size_t i = 0;
  while (i < words) {
    uint64_t at = index + i;
    if (at % kBlockWords == 0) {  // a block word
      uint64_t x;
      std::memcpy(&x, in + 8 * i, 8);
      if (x != splitmix64(key_ + at / kBlockWords)) return false;
      ++i;
      continue;
    }
    // up to the next block word (never across the table's end: blocks divide it)
    size_t run = std::min<size_t>(words - i, kBlockWords - at % kBlockWords);
    const uint64_t* src = table_ + at % kTableWords;
    uint64_t diff = 0;
    for (size_t j = 0; j < run; ++j) {  // vectorised
      uint64_t x;
      std::memcpy(&x, in + 8 * (i + j), 8);
      diff |= x ^ src[j] ^ key_;
    }
    if (diff) return false;
    i += run;
  }
  done += words * 8;
  return bytewise(bytes.size());
}

Source::Source(uint64_t seed, uint32_t flow) : pattern_(seed, flow), buf_(8 * Pattern::kTableWords) {
  pattern_.fill(0, buf_);  // block words of the first period; rewritten as they go out
}

std::span<const uint8_t> Source::at(uint64_t offset, size_t max) {
  const uint64_t period = buf_.size();
  uint64_t pos = offset % period;
  size_t len = static_cast<size_t>(std::min<uint64_t>(max, period - pos));
  // the block words whose bytes fall in [offset, offset + len)
  uint64_t block = 8 * Pattern::kBlockWords;
  for (uint64_t b = offset / block * block; b < offset + len; b += block) {
    uint64_t w = pattern_.word(b / 8);
    std::memcpy(buf_.data() + b % period, &w, 8);
  }
  return {buf_.data() + pos, len};
}

bool Verifier::feed(std::span<const uint8_t> bytes) {
  if (first_bad_) return false;
  uint8_t expect[16384];
  size_t done = 0;
  while (done < bytes.size()) {
    size_t n = std::min(sizeof expect, bytes.size() - done);
    if (!pattern_.matches(verified_, bytes.subspan(done, n))) {
      pattern_.fill(verified_, std::span<uint8_t>(expect, n));  // find the first wrong byte
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
