#pragma once
// A bounded TCP connect. A non-blocking connect() on its own waits for the
// kernel's SYN retries (about 127 s, 64 s between the last ones) when an
// early SYN is lost; a session then comes up minutes late or never. Dial
// gives each attempt a deadline, and DialBackoff spaces the attempts
// (exponential with jitter, so many injectors do not retry in step).

#include <chrono>
#include <cstdint>
#include <random>
#include <string>

namespace lanes::vip {

using Clock = std::chrono::steady_clock;

class Dial {
 public:
  enum class State { pending, connected, failed };

  Dial() = default;
  ~Dial();
  Dial(Dial&& o) noexcept;
  Dial& operator=(Dial&& o) noexcept;
  Dial(const Dial&) = delete;
  Dial& operator=(const Dial&) = delete;

  // Starts connecting from LOCAL (an address, bound first) to REMOTE:PORT
  // (IPv4 or IPv6), giving up at NOW + TIMEOUT. A failure at once leaves
  // state() failed with error() saying why.
  static Dial start(const std::string& local, const std::string& remote, uint16_t port,
                    std::chrono::milliseconds timeout, Clock::time_point now);

  // Where the attempt stands at NOW: a pending attempt past its deadline
  // fails ("connect to ... timed out after 1.0 s"). Cheap: no blocking.
  State poll(Clock::time_point now);
  State state() const { return state_; }
  const std::string& error() const { return error_; }
  Clock::time_point deadline() const { return deadline_; }
  // The socket (non-blocking), -1 once failed or released.
  int fd() const { return fd_; }
  // Hands the connected socket over to the caller.
  int release();

 private:
  void fail(std::string why);
  int fd_ = -1;
  State state_ = State::failed;
  std::string error_, remote_;
  std::chrono::milliseconds timeout_{0};
  Clock::time_point deadline_{};
};

// When to try again after a failed attempt: FIRST, doubling up to MAX, each
// wait spread by up to JITTER (a fraction) so peers do not retry in step.
class DialBackoff {
 public:
  DialBackoff(std::chrono::milliseconds first, std::chrono::milliseconds max, double jitter, uint64_t seed)
      : first_(first), max_(max), jitter_(jitter), cur_(first), rng_(seed) {}
  // The wait before the next attempt; each call doubles the next one.
  std::chrono::milliseconds next();
  // A session that came up starts again from FIRST.
  void reset() { cur_ = first_; }

 private:
  std::chrono::milliseconds first_, max_;
  double jitter_;
  std::chrono::milliseconds cur_;
  std::mt19937_64 rng_;
};

}  // namespace lanes::vip
