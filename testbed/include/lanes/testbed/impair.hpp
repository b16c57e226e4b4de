#pragma once
// Link impairments (issue 16): what a link or a host NIC is given.
//
// Loss, duplication and corruption per packet come from lanes' own tc BPF
// program on the device's egress (impair.bpf.c), so they work on kernels
// without netem. Delay, jitter (with netem's distributions) and reordering
// come from the netem qdisc, where the kernel has it: inside
// the device's TBF (its one class) when the link is shaped, so the delay
// and the line rate both hold, at the root otherwise. Where the kernel
// lacks netem they are refused, the missing feature named, never ignored.
//
// A device's BPF impairment is set by loading the program with its
// probabilities and attaching it to the device's egress (clsact, a handle
// of its own, so it composes with the TBF that shapes the device and with
// lanes' datapath programs); setting another replaces it, clearing
// detaches it. The filter stays when the loader exits and goes with the
// device or its namespace. The netem qdisc likewise.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lanes/testbed/result.hpp"

namespace lanes::testbed {

// What delays a link (delay, jitter, distribution, reorder): netem where
// the kernel has it and lanes' delay line where it does not (automatic),
// or the one a topology asks for (impair-engine="netem|lanes").
enum class ImpairEngine { automatic, netem, lanes };

struct Impairment {
  // lanes' BPF program
  uint32_t loss_ppm = 0;       // packets in a million
  uint32_t duplicate_ppm = 0;  // packets in a million
  uint32_t corrupt_ppm = 0;    // a bit of the IP header flipped: the receiver drops the packet as a wire's FCS would
  // netem
  uint32_t delay_us = 0;       // added to every packet
  uint32_t jitter_us = 0;      // ± this much, at most the delay
  std::string distribution;    // of the jitter: "" (uniform), normal, pareto, paretonormal
  uint32_t reorder_ppm = 0;    // sent at once, ahead of the delayed ones (needs a delay)

  bool bpf() const { return loss_ppm || duplicate_ppm || corrupt_ppm; }
  bool netem() const { return delay_us || jitter_us || reorder_ppm; }
  bool any() const { return bpf() || netem(); }
  // "loss 1%, corrupt 0.1%, delay 5ms ± 1ms normal, reorder 25%" (or "none")
  std::string describe() const;
  // what of it needs netem, for an error: "delay, jitter"
  std::string netem_parts() const;
  bool operator==(const Impairment&) const = default;
};

// The attributes netem gives
inline constexpr const char* kNetemOnly[] = {"delay", "jitter", "distribution", "reorder"};
// every impairment attribute, for shape checks
inline constexpr const char* kImpairAttrs[] = {"loss",         "duplicate", "delay",  "jitter",
                                               "distribution", "reorder",   "corrupt"};
// why an impairment that needs netem cannot be had on this kernel
std::string netem_missing();

// The impairment attributes of an element or a fault: loss, duplicate,
// reorder, corrupt ("1%", "0.05%", 0 < p <= 100; parts of a million at
// least); delay, jitter ("5ms", "250us", "0.5ms", at most 10s; jitter at
// most the delay, and only with a delay); distribution (uniform, normal,
// pareto, paretonormal; only with a jitter); reorder only with a delay.
// Errors name the attribute; the caller adds file:line.
Result<Impairment> parse_impairment(const std::map<std::string, std::string>& attrs);
// "1%" -> 10000 parts in a million; nothing, and WHY, for anything else
std::optional<uint32_t> parse_probability(const std::string& value, std::string& why);
// "5ms" -> 5000 microseconds; nothing, and WHY, for anything else
std::optional<uint32_t> parse_delay(const std::string& value, std::string& why);

// netem's queue, in packets: everything the delay holds at the line rate
// (RATE_BPS, 0 for an unshaped link: 16 Gbit/s) in full-size frames, twice
// over, plus what the TBF around it queues (TBF_LIMIT bytes), and never
// below netem's own default of 1000. Inside a TBF, netem's queue is the
// TBF's: too short a one would drop what the delay holds.
uint32_t netem_limit(uint64_t rate_bps, uint64_t tbf_limit_bytes, uint32_t delay_us, uint32_t jitter_us);

// netem's table for a named jitter distribution, from iproute2's .dist
// files (Debian: /usr/lib/<triplet>/tc); empty for uniform (netem's own).
Result<std::vector<int16_t>> netem_distribution(const std::string& name);
// one .dist file's numbers (comments and blank lines skipped)
Result<std::vector<int16_t>> parse_distribution_file(const std::string& path);

struct ImpairStats {
  uint64_t packets = 0, lost = 0, duplicated = 0, corrupted = 0;
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

class Netlink;

// The netem part of IMP on device INDEX of NL's namespace (IMP.netem()):
// inside the device's TBF when it has one (replacing the TBF's queue),
// at the root otherwise. Setting it again replaces it.
Status set_netem(Netlink& nl, int index, const std::string& ifname, const Impairment& imp);
// removes the device's netem: the TBF gets its byte queue back (the
// limit it had), or the root qdisc goes. None there: not an error.
Status clear_netem(Netlink& nl, int index, const std::string& ifname);

}  // namespace lanes::testbed
