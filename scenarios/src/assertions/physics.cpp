#include <fmt/format.h>

#include <cmath>

#include "result_assertions.hpp"

// What no transfer can beat, by physics: it cannot end before its bytes
// have crossed the narrowest link on its way and a round trip has passed
// (transfer-floor), and no flow carries more than one window per round trip
// (window-ceiling). The rate and the round trip are what the topology
// configures (the delay line and netem never release a packet early, so
// the round trip measured is at least the configured one): a figure that
// beats them is a measurement that lies. The floor leaves out the line's
// TBF burst (up to 128 KiB may leave at once): a transfer of a few hundred
// KiB over a sub-millisecond round trip is no case for it. The ceiling is
// the buffer, not the window the kernel offers (about half of it): it
// catches a figure that is more than the buffer allows, not a slow flow.

namespace lanes::scenarios {

namespace {
double mbit(double bps) { return bps / 1e6; }
}  // namespace

const char* TransferFloor::type() const { return "transfer-floor"; }

const Attrs& TransferFloor::attrs() const {
  static const Attrs a = {{"workload", Kind::workload, true},
                          {"phase", Kind::phase},
                          {"rate", Kind::rate, true},
                          {"rtt", Kind::delay, true}};
  return a;
}

// seconds ≥ bytes / rate + rtt
void TransferFloor::check(const ResultContext& ctx, reports::Assertion& out) const {
  const auto* w = ctx.workload();
  if (!w) return nothing_measured(out, "the workload did not run");
  double bytes = ResultContext::figure(*w, "bytes"), secs = ResultContext::figure(*w, "seconds");
  double rate = static_cast<double>(ctx.step.rate_bps("rate"));
  double rtt = static_cast<double>(ctx.step.delay_us("rtt")) / 1e6;
  if (bytes <= 0 || secs <= 0) return nothing_measured(out, "the workload has no bytes or no time");
  // a transfer that did not deliver what it was asked is no measurement of the path
  if (!w->figures.value("bytes_verified", false) || ResultContext::figure(*w, "connection_errors") > 0)
    return nothing_measured(out, "the transfer did not deliver every byte it was asked for");
  double floor = bytes * 8 / rate + rtt;
  out.expected = fmt::format("≥ {:.3f} s ({:.0f} MB at {:g} Mbit/s + {:g} ms round trip)", floor, bytes / 1e6,
                             mbit(rate), rtt * 1e3);
  out.measured = fmt::format("{:.3f} s", secs);
  out.passed = secs >= floor;
}

const char* WindowCeiling::type() const { return "window-ceiling"; }

const Attrs& WindowCeiling::attrs() const {
  static const Attrs a = {{"workload", Kind::workload, true}, {"phase", Kind::phase}, {"rtt", Kind::delay, true}};
  return a;
}

// every flow's bytes / seconds ≤ its socket's buffer / rtt: a window is at
// most the buffer the kernel keeps (window= of the workload; twice what was
// asked, as the kernel reports it)
void WindowCeiling::check(const ResultContext& ctx, reports::Assertion& out) const {
  const auto* w = ctx.workload();
  if (!w) return nothing_measured(out, "the workload did not run");
  double buffer = ResultContext::figure(*w, "socket_buffer_bytes");
  double rtt = static_cast<double>(ctx.step.delay_us("rtt")) / 1e6;
  if (buffer <= 0) return nothing_measured(out, "the workload reports no socket buffer (set its window=)");
  auto it = w->figures.find("flow_records");
  if (it == w->figures.end() || !it->is_array() || it->empty())
    return nothing_measured(out, "the workload reports no flows");
  double ceiling = buffer * 8 / rtt, fastest = 0;
  for (const auto& f : *it) {
    double s = f.value("seconds", 0.0), b = f.value("bytes", 0.0);
    if (s > 0) fastest = std::max(fastest, b * 8 / s);
  }
  out.expected = fmt::format("every flow ≤ {:.1f} Mbit/s ({:.0f} KiB buffer per {:g} ms round trip)", mbit(ceiling),
                             buffer / 1024, rtt * 1e3);
  out.measured = fmt::format("fastest flow {:.1f} Mbit/s", mbit(fastest));
  out.passed = fastest > 0 && fastest <= ceiling;
}

}  // namespace lanes::scenarios
