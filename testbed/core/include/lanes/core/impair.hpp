#pragma once
// Link impairments (issue 16): what a link or a host NIC is given —
// loss and duplication per packet, from lanes' own tc BPF program on the
// device's egress (impair.bpf.c), so they work on kernels without netem;
// delay, jitter, reordering and corruption need netem and are refused,
// with the missing feature named, never ignored.
//
// A device's impairment is set by loading the program with its
// probabilities and attaching it to the device's egress (clsact, a handle
// of its own, so it composes with the TBF that shapes the device and with
// lanes' datapath programs); setting another replaces it, clearing
// detaches it. The filter stays when the loader exits and goes with the
// device or its namespace.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "lanes/core/result.hpp"

namespace lanes::testbed {

struct Impairment {
  uint32_t loss_ppm = 0;       // packets in a million
  uint32_t duplicate_ppm = 0;  // packets in a million
  bool any() const { return loss_ppm || duplicate_ppm; }
  std::string describe() const;  // "loss 1%, duplicate 0.1%" (or "none")
  bool operator==(const Impairment&) const = default;
};

// What only netem gives, refused wherever it is asked for: lanes does not
// drive netem (and this round's kernel has none)
inline constexpr const char* kNetemOnly[] = {"delay", "jitter", "reorder", "corrupt"};
// why one of kNetemOnly is refused
std::string netem_refusal();

// The impairment attributes of an element or a fault: loss, duplicate
// ("1%", "0.05%", 0 < p ≤ 100; parts of a million at least); one of
// kNetemOnly is refused. Errors name the attribute; the caller adds file:line.
Result<Impairment> parse_impairment(const std::map<std::string, std::string>& attrs);
// "1%" → 10000 parts in a million; nothing, and WHY, for anything else
std::optional<uint32_t> parse_probability(const std::string& value, std::string& why);

struct ImpairStats {
  uint64_t packets = 0, lost = 0, duplicated = 0;
};

// One device's impairment, loaded and attached from inside its namespace
// (the caller's thread must be there: run_in_netns). Its counters can be
// read for as long as this object lives; the filter outlives it.
class DeviceImpairment {
 public:
  static Result<DeviceImpairment> attach(int ifindex, const std::string& ifname, const Impairment& imp);
  // removes the impairment of IFINDEX (none there: not an error)
  static Status clear(int ifindex, const std::string& ifname);
  Result<ImpairStats> stats() const;

  DeviceImpairment(DeviceImpairment&&) noexcept;
  DeviceImpairment& operator=(DeviceImpairment&&) noexcept;
  ~DeviceImpairment();

 private:
  DeviceImpairment() = default;
  struct Skel;
  std::unique_ptr<Skel> skel_;
};

}  // namespace lanes::testbed
