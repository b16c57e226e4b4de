#pragma once
// The content of a traffic engine flow. Every byte of flow F under seed S is
// a deterministic function of (S, F, offset), so a receiver verifies each
// byte it gets without any help from the sender: "no byte lost" is checked,
// not assumed. Any offset can be produced or checked directly (reconnects,
// retransmits and partial reads included).
//
// The stream is 8-byte little-endian words. The first word of every 4 KiB
// block is splitmix64 of (flow key + block number), unique to its place in
// its flow; every other word is a word of a 1 MiB random table (made once
// per seed) XOR the flow's key. So a lost, repeated or reordered piece of
// any length is caught (by the table's content when it is not a multiple of
// 4 KiB, by the block words when it is), as is a flipped bit anywhere, and
// making or checking the stream costs about a memory copy.

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace lanes::scenarios {

// Steele, Lea and Flood's 64-bit mix (splitmix64's step): the traffic
// engine's one source of words from indexes.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

class Pattern {
 public:
  Pattern(uint64_t seed, uint32_t flow);
  // The bytes of the stream at OFFSET.
  void fill(uint64_t offset, std::span<uint8_t> out) const;
  uint64_t word(uint64_t index) const;  // the 8 bytes at offset 8 * INDEX
  // true if BYTES are the stream at OFFSET (one pass, nothing written)
  bool matches(uint64_t offset, std::span<const uint8_t> bytes) const;

  static constexpr uint64_t kBlockWords = 512;         // 4 KiB
  static constexpr uint64_t kTableWords = 128 * 1024;  // 1 MiB

 private:
  void fill_words(uint64_t index, uint8_t* out, size_t words) const;
  uint64_t key_;
  const uint64_t* table_;
};

// A sender's view of one flow's stream: the flow's table (1 MiB, built
// once) with the block words written in as each piece goes out, so sending
// costs no work per byte.
class Source {
 public:
  Source(uint64_t seed, uint32_t flow);
  // The stream from OFFSET on, at most MAX bytes (less at the table's end).
  // Valid until the next call.
  std::span<const uint8_t> at(uint64_t offset, size_t max);

 private:
  Pattern pattern_;
  std::vector<uint8_t> buf_;
};

// Checks a received stream in order.
class Verifier {
 public:
  Verifier(uint64_t seed, uint32_t flow) : pattern_(seed, flow) {}
  // Checks the next bytes of the stream; false from the first wrong byte on.
  bool feed(std::span<const uint8_t> bytes);
  uint64_t verified() const { return verified_; }              // bytes checked and right
  std::optional<uint64_t> first_bad() const { return first_bad_; }  // offset of the first wrong byte

 private:
  Pattern pattern_;
  uint64_t verified_ = 0;
  std::optional<uint64_t> first_bad_;
};

}  // namespace lanes::scenarios
