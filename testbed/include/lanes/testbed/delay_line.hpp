#pragma once
// lanes' own delay line (issue 34): delay, jitter and reordering on a
// device's egress where the kernel has no netem (or where a topology asks
// for it), in user space, with the same draws as netem (DelaySchedule).
//
// How a packet goes: a tc program on the device's egress (delay_tap.bpf.c,
// before lanes' impairment program and the device's TBF) sends it into the
// device's tap, a veth pair of the device's namespace without addresses
// ("dl<ifindex>a" → "dl<ifindex>b"). A packet socket on the tap's far end
// reads it with its virtio-net header (PACKET_VNET_HDR: a GSO packet of
// 64 KiB stays one unit, its checksum left to offload) and the kernel's
// stamp of its arrival, the schedule gives its release time from that
// stamp, a timing heap holds it, and at that time (an absolute
// CLOCK_MONOTONIC timerfd set 60 µs early, timer slack 1 ns, the rest
// waited out on the clock) a packet socket on the device sends it out again, marked so that the tc program lets it
// pass: on to the impairment program (loss, duplication, corruption, once
// a packet) and into the TBF, so the line rate holds after the delay.
//
// One DelayLine serves every impaired device of a run from one thread
// (lanes-delay); its sockets live in the devices' namespaces, its thread
// in none of them. The taps and programs go with the DelayLine, or with
// the namespace when the process is killed.

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lanes/testbed/event_loop.hpp"
#include "lanes/testbed/impair.hpp"
#include "lanes/testbed/model.hpp"
#include "lanes/testbed/result.hpp"
#include "lanes/testbed/run_layout.hpp"

namespace lanes::testbed {

// What one device's delay did, as measured: each packet's time held (from
// when it was read to when it was sent) and its lateness (sent after its
// release time by the timer's and the loop's wake-up), in µs.
struct DelayLinkStats {
  std::string where;  // "node:device"
  Impairment configured;
  uint64_t packets = 0, bytes = 0;
  uint64_t reordered = 0;   // sent before a packet that came earlier
  uint64_t send_drops = 0;  // refused by the device's queue (its TBF full: the line's own drop)
  uint64_t send_errors = 0;  // refused otherwise
  uint64_t rx_errors = 0;    // read from the tap in error (a GSO type the virtio-net header cannot say)
  uint64_t tap_drops = 0;    // the tap's socket buffer full (the delay line too slow to read)
  uint64_t queue_drops = 0;  // over the delay line's own limit (256 MiB held)
  double held_p50_us = 0, held_p99_us = 0, held_max_us = 0;
  double held_min_us = 0, held_mean_us = 0;  // (kept as it goes: no sort, every second)
  double late_p50_us = 0, late_p99_us = 0, late_max_us = 0;
};

class DelayLine {
 public:
  explicit DelayLine(uint64_t seed);
  ~DelayLine();
  DelayLine(const DelayLine&) = delete;
  DelayLine& operator=(const DelayLine&) = delete;

  // Device IFNAME of namespace NS_FD (WHERE names it: "node:device") gets
  // IMP's delay, jitter (and its distribution) and reorder: its tap made
  // (a leftover of a killed delay line replaced), its sockets opened, the
  // program attached. Its packets wait for attach(). Nothing half-made is
  // left when it fails.
  Status add(int ns_fd, const std::string& where, const std::string& ifname, const Impairment& imp);
  // The sockets and the timer on LOOP (once; devices added after are
  // watched as they come). LOOP must outlive the DelayLine.
  Status attach(EventLoop& loop);
  // the figures; the percentiles (a sort of up to 10^5 samples) only when asked
  std::vector<DelayLinkStats> stats(bool percentiles = true) const;

 private:
  struct Link;
  void on_packets(Link& l);
  void on_timer();
  void arm();
  uint64_t seed_;
  std::vector<std::unique_ptr<Link>> links_;
  EventLoop* loop_ = nullptr;
  int timer_ = -1;
  int64_t armed_ns_ = -1;
};

// One datagram of FD (SO_TIMESTAMPNS on) into BUF: recvmsg's result, and
// in STAMP_NS the kernel's stamp of its arrival on the real-time clock, -1
// when it carries none. What the delay line and its benchmark read by.
ssize_t recv_stamped(int fd, void* buf, size_t len, int flags, int64_t& stamp_ns);

// The tap pair's names for the device of ifindex INDEX
std::string delay_tap_name(int index, char end);
// Takes what a delay line left on device IFNAME of the calling thread's
// namespace (WHERE names it) away: its program and its tap, whether or not
// the delay line still runs (one killed leaves the device's packets going
// into its tap). Nothing there: not an error.
Status clear_delay_tap(const std::string& where, const std::string& ifname);

// Whether this machine's delay, jitter and reorder are lanes' delay line's:
// no netem, and BPF (probed once)
bool delay_by_lanes();
// The same for engine E ("auto": as above) and topology T's impair-engine
bool delay_by_lanes(ImpairEngine e);
bool delay_by_lanes(const Topology& t);

// lanes-delay's arguments for IMP's delay, jitter, distribution, reorder:
// "delay=5000us", ...
std::vector<std::string> delay_args(const Impairment& imp);

struct DeployContext;
// Where the delay line serves (delay_by_lanes), a supervised lanes-delay
// for each end of each of the topology's links with a delay (in the end's
// namespace, first of the daemons: its state file its readiness)
Status deploy_delay_lines(DeployContext& ctx);

// What the delay lines of run LAYOUT's topology links measured so far (the
// state files deploy_delay_lines' daemons write every second): one object
// per link end, as lanes-delay writes it, with "link" ("a b") and "engine"
// ("lanes-delay"); an end whose file cannot be read says so in "error" (with
// its configured delay). Ends without a file are left out (netem's, another
// machine's). Empty where the run has no delay line.
nlohmann::json delay_line_states(const RunLayout& layout, const Topology& t);

}  // namespace lanes::testbed
