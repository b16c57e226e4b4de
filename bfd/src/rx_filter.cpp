#include "lanes/bfd/rx_filter.hpp"

#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bfd_abi.h"
#include "bfd_rx.skel.h"
#include "lanes/testbed/libbpf_log.hpp"

namespace lanes::bfd {

using testbed::errno_error;
using testbed::os_error;
using testbed::Result;

struct RxFilter::Impl {
  bfd_rx_bpf* skel = nullptr;
  uint32_t next = 0;
  ~Impl() {
    if (skel) bfd_rx_bpf__destroy(skel);
  }
};

RxFilter::~RxFilter() = default;

Result<std::unique_ptr<RxFilter>> RxFilter::load() {
  testbed::libbpf_to_log();
  std::unique_ptr<RxFilter> f(new RxFilter);
  f->impl_ = std::make_unique<Impl>();
  // a machine without BPF (lanes rootless, in a user namespace) is
  // expected: the caller says so once; libbpf's own words are debug lines
  testbed::QuietLibbpf quiet;
  errno = 0;
  f->impl_->skel = bfd_rx_bpf__open_and_load();
  if (!f->impl_->skel) return os_error(errno ? errno : EINVAL, "no BPF here");
  return f;
}

Result<uint32_t> RxFilter::attach(int fd) {
  if (impl_->next >= LANES_BFD_SLOTS) return os_error(ENOSPC, "the BFD receive filter has no slot left");
  uint64_t cookie = 0;
  socklen_t len = sizeof cookie;
  if (::getsockopt(fd, SOL_SOCKET, SO_COOKIE, &cookie, &len) != 0) return errno_error("a BFD socket's cookie");
  uint32_t i = impl_->next;
  if (bpf_map__update_elem(impl_->skel->maps.slot_of, &cookie, sizeof cookie, &i, sizeof i, BPF_ANY) != 0)
    return errno_error("giving a BFD socket its slot");
  int prog = bpf_program__fd(impl_->skel->progs.bfd_rx);
  if (::setsockopt(fd, SOL_SOCKET, SO_ATTACH_BPF, &prog, sizeof prog) != 0)
    return errno_error("attaching the BFD receive filter");
  ++impl_->next;
  return i;
}

lanes_bfd_slot& RxFilter::slot(uint32_t i) { return impl_->skel->bss->slots[i]; }

void RxSlot::expect(std::span<const uint8_t> packet, std::span<const uint8_t> peer) {
  auto& s = filter_->slot(index_);
  // the filter may be reading it on another CPU: invalid while it changes
  std::atomic_ref<__u32>(s.valid).store(0, std::memory_order_release);
  std::memset(s.expect, 0, sizeof s.expect);
  std::memcpy(s.expect, packet.data(), std::min(packet.size(), sizeof s.expect));
  std::memset(s.peer, 0, sizeof s.peer);
  std::memcpy(s.peer, peer.data(), std::min(peer.size(), sizeof s.peer));
  s.v6 = peer.size() == 16;
  std::atomic_ref<__u32>(s.valid).store(packet.size() == LANES_BFD_PACKET ? 1 : 0, std::memory_order_release);
  expecting_ = packet.size() == LANES_BFD_PACKET;
}

void RxSlot::clear() {
  if (!expecting_) return;
  std::atomic_ref<__u32>(filter_->slot(index_).valid).store(0, std::memory_order_release);
  expecting_ = false;
}

std::optional<RxSlot::Taken> RxSlot::taken() {
  auto& s = filter_->slot(index_);
  uint64_t count = std::atomic_ref<__u64>(s.count).load(std::memory_order_acquire);
  if (count == seen_) return std::nullopt;
  uint64_t last = std::atomic_ref<__u64>(s.last_ns).load(std::memory_order_relaxed);
  Taken t{count - seen_, Clock::time_point(std::chrono::nanoseconds(last))};
  seen_ = count;
  return t;
}

}  // namespace lanes::bfd
