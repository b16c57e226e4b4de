#include "lanes/testbed/features.hpp"
#include "lanes/testbed/impair.hpp"
#include "lanes/testbed/rootless.hpp"

#include <fcntl.h>
#include <sched.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>

#include <bpf/libbpf.h>

#include "lanes/testbed/libbpf_log.hpp"
#include "lanes/testbed/log.hpp"
#include "lanes/testbed/netlink.hpp"
#include "lanes/testbed/netns.hpp"
#include "probe.skel.h"

#include <netlink/route/qdisc.h>
#include <netlink/route/qdisc/netem.h>
#include <netlink/route/tc.h>
#include <netlink/netlink.h>

namespace lanes::testbed {

nlohmann::json KernelFeatures::to_json() const {
  return {{"kernel", kernel},
          {"netkit", netkit},
          {"dummy", dummy},
          {"netem", netem},
          {"tbf", tbf},
          {"nexthop_objects", nexthop_objects},
          {"resilient_groups", resilient_groups},
          {"mptcp", mptcp},
          {"rootless", rootless},
          {"privileges", privileges()},
          {"bpf", bpf},
          {"bpf_error", bpf_error},
          {"impairments", impairments()},
          {"notes", notes}};
}

std::string KernelFeatures::privileges() const {
  if (!rootless) return "root";
  return std::string("rootless: a user namespace of the user's own, state under ") + rootless::state_dir() +
         (bpf ? "" : "; without BPF the bpf egress modes fall back to ecmp and links cannot be given loss, duplication or corruption");
}

std::string KernelFeatures::impairments() const {
  std::string b = bpf ? "loss, duplicate, corrupt (lanes' tc BPF program)"
                      : "loss, duplicate, corrupt: no (lanes' tc BPF program cannot be loaded)";
  std::string n = netem ? "delay, jitter, distribution, reorder (netem, inside the link's TBF)"
                  : bpf ? "delay, jitter, distribution, reorder by lanes' delay line (lanes-delay: no netem here)"
                        : "delay, jitter, distribution, reorder: no (this kernel has no netem, and lanes' delay line "
                          "needs BPF)";
  return b + "; " + n;
}

std::string delay_engine_problem(const Topology& t) {
  static const auto f = probe_kernel_features();
  return delay_engine_problem(t.impair_engine, f);
}

std::string delay_engine_problem(ImpairEngine e, const KernelFeatures& f) {
  switch (e) {
    case ImpairEngine::netem:
      return f.netem ? "" : "impair-engine=\"netem\": this kernel has no netem (CONFIG_NET_SCH_NETEM)";
    case ImpairEngine::lanes:
      return f.bpf ? "" : "impair-engine=\"lanes\": lanes' delay line needs BPF, which lanes cannot load here";
    case ImpairEngine::automatic: break;
  }
  return f.netem || f.bpf ? "" : "this kernel has no netem, and lanes' delay line needs BPF, which lanes cannot load here";
}

Status check_kernel_for(const Topology& topo) {
  const Link* first = nullptr;
  for (const auto& l : topo.links)
    if (l.impair.netem() && !first) first = &l;
  const Node* mptcp_job = topo.first_on_egress(EgressMode::mptcp);
  if (!first && !mptcp_job) return {};
  KernelFeatures f = probe_kernel_features();
  if (mptcp_job && !f.mptcp)
    return os_error(ENOTSUP, fmt::format("{}: egress=\"mptcp\": this kernel has no MPTCP (CONFIG_MPTCP), or "
                                         "net.mptcp.enabled is 0 in a new namespace",
                                         mptcp_job->name));
  if (!first) return {};
  std::string why = delay_engine_problem(topo.impair_engine, f);  // (without netem, lanes' delay line: it needs BPF)
  if (why.empty()) return {};
  return os_error(ENOTSUP, fmt::format("{}:{}: {}: {}", first->impair_loc.file, first->impair_loc.line,
                                       first->impair.netem_parts(), why));
}

namespace {

bool try_netem(Netlink& nl, int ifindex) {
  rtnl_qdisc* q = rtnl_qdisc_alloc();
  rtnl_tc_set_ifindex(TC_CAST(q), ifindex);
  rtnl_tc_set_parent(TC_CAST(q), TC_H_ROOT);
  rtnl_tc_set_handle(TC_CAST(q), TC_HANDLE(1, 0));
  bool ok = false;
  if (rtnl_tc_set_kind(TC_CAST(q), "netem") == 0) {
    rtnl_netem_set_delay(q, 1000);
    rtnl_netem_set_limit(q, 1000);
    int err = rtnl_qdisc_add(nl.raw(), q, NLM_F_CREATE | NLM_F_REPLACE);
    ok = err == 0;
    if (!ok) log::debug("feature probe: netem: {}", nl_geterror(err));
  }
  rtnl_qdisc_put(q);
  return ok;
}
}  // namespace

KernelFeatures probe_kernel_features() {
  KernelFeatures f;
  utsname u{};
  if (::uname(&u) == 0) f.kernel = u.release;
  // an anonymous namespace: it disappears with its sockets; nothing is bind-mounted
  auto probed = run_in_new_netns(
      [&]() -> Status {
        auto nlr = Netlink::open_here("feature-probe");
        if (!nlr) return nlr.error();
        Netlink& nl = nlr.value();
        auto nk = nl.create_netkit("probe-nk", 0, "probe-nkp", 0, -1, "feature-probe");
        f.netkit = nk.ok();
        if (!nk) log::debug("feature probe: {}", nk.error().what());
        f.dummy = nl.create_dummy("probe-d", 0).ok();
        if (int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_MPTCP); s >= 0) {
          f.mptcp = true;
          ::close(s);
        }
        auto veth = nl.create_veth("probe0", 0, "probe1", 0, -1, "");
        if (!veth) return veth.error();
        auto idx = nl.ifindex("probe0");
        auto peer = nl.ifindex("probe1");
        if (idx && peer && nl.set_link_up(peer.value(), true, "probe1")) {
          f.tbf = nl.set_tbf(idx.value(), 100'000'000, "probe0").ok();
          f.netem = try_netem(nl, peer.value());
          f.nexthop_objects = nl.add_nexthop(1, idx.value(), std::nullopt).ok();
          f.resilient_groups = f.nexthop_objects && nl.add_nexthop_group(2, {{1, 1}}, ResilientParams{}).ok();
        }
        return {};
      },
      "a scratch namespace for the feature probe");
  if (!probed) log::warn("feature probe: {}", probed.error().what());
  if (!f.netkit) f.notes += "no netkit: job containers use veth pairs; ";
  if (!f.dummy) f.notes += "no dummy devices: task IPs live on the container's loopback; ";
  if (!f.mptcp) f.notes += "no MPTCP: egress mptcp is refused; ";
  if (!f.resilient_groups) f.notes += "no resilient nexthop groups: the switches' FIB agents cannot install task routes; ";
  {
    // while the probe loads, libbpf's complaints are its answer, not a warning
    QuietLibbpf quiet;
    // load (never attach) the probe program from its embedded skeleton
    probe_bpf* skel = probe_bpf__open();
    int err = skel ? probe_bpf__load(skel) : -errno;
    f.bpf = skel && err == 0;
    if (!f.bpf) f.bpf_error = std::strerror(err < 0 ? -err : err);
    f.rootless = rootless::world_base().has_value();
    if (!f.bpf && f.rootless) f.bpf_error += ": lanes without root runs in a user namespace, which grants no BPF";
    probe_bpf__destroy(skel);
  }
  if (!f.bpf) f.notes += "BPF programs cannot be loaded (" + f.bpf_error +
                         "): egress modes bpf and bpf-numa fall back to ecmp, and links cannot be given loss, duplication or corruption; ";
  // (after the BPF probe: the delay line needs BPF)
  if (!f.netem)
    f.notes += f.bpf ? "no netem: delay, jitter and reordering come from lanes' delay line (lanes-delay; loss, "
                       "duplication and corruption from lanes' own BPF program, silent drops from nftables); "
                     : "no netem: link delay, jitter and reordering are unavailable (lanes' delay line needs BPF); ";
  if (!f.notes.empty()) f.notes.resize(f.notes.size() - 2);
  return f;
}

}  // namespace lanes::testbed
