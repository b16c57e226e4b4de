#pragma once
// The receive filter of lanes-bfdd's sessions (bpf/bfd_rx.bpf.c): one BPF
// socket filter for a daemon, attached to each session's UDP socket. While
// a session is Up, the packet its peer keeps sending (the same bytes every
// interval) is taken in the kernel: the filter notes when it came and
// counts it, and the daemon reads both from memory it shares with the
// filter, with no system call and no wake-up per packet. Everything else
// reaches the socket. A daemon that cannot load the filter (no BPF here)
// reads every packet from its sockets as before.

#include <array>
#include <cstdint>
#include <memory>
#include <optional>

#include "lanes/bfd/bfd.hpp"
#include "lanes/testbed/result.hpp"

struct lanes_bfd_slot;

namespace lanes::bfd {

class RxFilter {
 public:
  ~RxFilter();
  RxFilter(const RxFilter&) = delete;
  RxFilter& operator=(const RxFilter&) = delete;
  static testbed::Result<std::unique_ptr<RxFilter>> load();

  // Attaches the filter to FD and gives it a slot (its number), or an error
  // when the filter has no slot left or the kernel refuses.
  testbed::Result<uint32_t> attach(int fd);
  lanes_bfd_slot& slot(uint32_t i);

 private:
  RxFilter() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One session's view of its slot.
class RxSlot {
 public:
  RxSlot(RxFilter& f, uint32_t i) : filter_(&f), index_(i) {}
  // From now on the filter takes PACKET (the peer's steady packet, as
  // received) from PEER (4 or 16 bytes of address).
  void expect(std::span<const uint8_t> packet, std::span<const uint8_t> peer);
  // Every packet to the socket again.
  void clear();
  bool expecting() const { return expecting_; }
  // Packets the filter took since the last call, and when the last came
  // (CLOCK_MONOTONIC); nullopt when none.
  struct Taken {
    uint64_t count;
    Clock::time_point last;
  };
  std::optional<Taken> taken();

 private:
  RxFilter* filter_;
  uint32_t index_;
  uint64_t seen_ = 0;
  bool expecting_ = false;
};

}  // namespace lanes::bfd
