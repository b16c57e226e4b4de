#pragma once
// One move-only owner for kernel resources: fds, netlink sockets, libnl
// objects. No implicit conversion to the raw handle.

#include <unistd.h>

#include <utility>

namespace lanes::testbed {

template <typename T, typename Traits>
class UniqueHandle {
 public:
  UniqueHandle() = default;
  explicit UniqueHandle(T h) : h_(h) {}
  ~UniqueHandle() { reset(); }
  UniqueHandle(const UniqueHandle&) = delete;
  UniqueHandle& operator=(const UniqueHandle&) = delete;
  UniqueHandle(UniqueHandle&& o) noexcept : h_(std::exchange(o.h_, Traits::invalid())) {}
  UniqueHandle& operator=(UniqueHandle&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, Traits::invalid());
    }
    return *this;
  }
  T get() const { return h_; }
  T release() { return std::exchange(h_, Traits::invalid()); }
  bool valid() const { return h_ != Traits::invalid(); }
  explicit operator bool() const { return valid(); }
  void reset(T h = Traits::invalid()) {
    if (valid()) Traits::close(h_);
    h_ = h;
  }

 private:
  T h_ = Traits::invalid();
};

struct FdTraits {
  static constexpr int invalid() { return -1; }
  static void close(int fd) { ::close(fd); }
};
using Fd = UniqueHandle<int, FdTraits>;

// Traits for a pointer released by a C function, e.g.
// UniqueHandle<nl_sock*, PtrTraits<nl_sock, nl_socket_free>>.
template <typename T, auto Free>
struct PtrTraits {
  static constexpr T* invalid() { return nullptr; }
  static void close(T* p) { Free(p); }
};
template <typename T, auto Free>
using UniquePtr = UniqueHandle<T*, PtrTraits<T, Free>>;

}  // namespace lanes::testbed
