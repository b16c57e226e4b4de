#include <fmt/format.h>

#include "host_rates.hpp"
#include "lanes/scenarios/runner.hpp"
#include "live_assertions.hpp"

namespace lanes::scenarios {

const char* NicOut::type() const { return "nic-out"; }

const Attrs& NicOut::attrs() const {
  static const Attrs a = {{"host", Kind::host, true},     {"nic", Kind::nic, true},
                          {"direction", Kind::choice, false, "rx|tx"},
                          {"from", Kind::timeref, true},  {"to", Kind::timeref, true},
                          {"max-share", Kind::number},    {"min-gbps", Kind::number}};
  return a;
}

// A NIC taken out of use while the host's traffic goes on: its share of
// the host's rate (tx: what the host sends, the default) between from= and
// to= is at most max-share= percent (2) of at least min-gbps= (0.01) in
// all. Where the host's egress is a bpf mode, the datapath's own counters
// (the host agent's state, read when the assertion runs) say whether its
// flows moved: none is left open on the NIC but the job's BGP sessions,
// and the datapath moved at least one off it. A rate that falls on one NIC because its flows stall
// there fails this; flows that move pass it.
reports::Assertion NicOut::check(const Step& st, LiveContext& ctx) const {
  reports::Assertion a;
  std::string host = st.str("host");
  int nic = st.integer("nic");
  a.name = fmt::format("{} {} nic{}", type(), host, nic);
  double max_share = st.num("max-share", 2), min_gbps = st.num("min-gbps", 0.01);
  std::string dir = st.str("direction", "tx");
  a.expected = fmt::format("nic{} at most {}% of {}'s {} rate (of at least {} Gbit/s); in the bpf modes its flows moved",
                           nic, max_share, host, dir, min_gbps);
  auto from = mark_time(ctx, st.str("from")), to = mark_time(ctx, st.str("to"));
  if (!from || !to) {
    a.measured = "a mark of its window was never set";
    return a;
  }
  a.windows = {{host, *from, *to, "nic out"}};
  auto r = host_rates(ctx.series(), host, dir);
  if (static_cast<size_t>(nic) >= r.per_nic.size()) {
    a.measured = "no counters of the NIC";
    return a;
  }
  double total = 0, mine = 0;
  for (size_t i = 0; i < r.per_nic.size(); ++i) {
    double m = HostRates::mean(r.per_nic[i], r.interval_s, *from, *to);
    total += m;
    if (static_cast<int>(i) == nic) mine = m;
  }
  double share = total > 0 ? 100 * mine / total : 0;
  ctx.figures[fmt::format("nic_out_share_{}_nic{}", host, nic)] = share;
  bool ok = total >= min_gbps && share <= max_share;
  a.measured = fmt::format("nic{} {:.2f}% of {:.3f} Gbit/s", nic, share, total);
  if (total < min_gbps) a.message = "no workload's traffic in the window";
  auto state = ctx.host_agent_state ? ctx.host_agent_state(host) : std::nullopt;
  // a bpf mode the host agent runs (it falls back to ecmp where BPF cannot
  // load, and says so in its state), or, with no state to say, the mode
  // the host was given: its datapath's counters must be read
  const auto& node = ctx.topo.nodes.at(static_cast<size_t>(ctx.topo.find_node(host)));
  bool bpf_asked = state ? (state->mode == "bpf" || state->mode == "bpf-numa")
                         : node.job && (node.job->egress == testbed::EgressMode::bpf ||
                                        node.job->egress == testbed::EgressMode::bpf_numa);
  if (bpf_asked && !state) {
    a.measured += "; no host agent state to read the datapath's flows from";
    a.message = "egress is a bpf mode, but its datapath's counters could not be read";
    a.passed = false;
    return a;
  }
  if (state) {
    // the flows still open on the NIC, from the datapath's flow table (the
    // largest 256, the workloads' among them), but the job's BGP sessions:
    // the injector's session over a NIC is bound to the NIC's own address
    // and stays on it by design
    uint64_t active = 0;
    if (state->flows)
      for (const auto& f : *state->flows)
        active += f.nic == nic && !f.closed && f.sport != 179 && f.dport != 179;
    bool counted = false;
    for (const auto& n : state->nics) {
      if (n.index != nic || !n.bpf) continue;
      counted = true;
      uint64_t moved = n.bpf->moved;
      a.measured += fmt::format("; datapath: {} flows moved off it, {} still active on it", moved, active);
      ctx.figures[fmt::format("nic_out_moved_{}_nic{}", host, nic)] = static_cast<double>(moved);
      ok = ok && active == 0 && moved > 0;
      if (moved == 0) a.message = "the datapath moved no flow off the NIC: what was on it stalled";
    }
    if (bpf_asked && !counted) {
      a.measured += "; the host agent published no datapath counters for the NIC";
      a.message = "egress is a bpf mode, but its datapath's counters could not be read";
      ok = false;
    }
  }
  a.passed = ok;
  return a;
}

}  // namespace lanes::scenarios
