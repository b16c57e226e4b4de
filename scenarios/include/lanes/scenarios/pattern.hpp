#pragma once
// The content of a traffic engine flow. Every byte of flow F under seed S is
// a deterministic function of (S, F, offset), so a receiver verifies each
// byte it gets without any help from the sender: "no byte lost" is checked,
// not assumed. Words are splitmix64 of the 8-byte-aligned offset, so any
// offset can be produced or checked directly (reconnects, retransmits and
// partial reads included).

#include <cstdint>
#include <optional>
#include <span>

namespace lanes::scenarios {

class Pattern {
 public:
  Pattern(uint64_t seed, uint32_t flow);
  // The bytes of the stream at OFFSET.
  void fill(uint64_t offset, std::span<uint8_t> out) const;
  uint64_t word(uint64_t index) const;  // the 8 bytes at offset 8 * INDEX

 private:
  uint64_t key_;
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
