// lanes-host-agent: runs in a host's namespace (HostAgent): the BPF
// datapath in the bpf egress modes, and each NIC's state (its carrier, and
// lanes-bfdd's verdict on its path) carried to its container link, the
// container's nexthop group and the datapath. Writes
// NIC state and the datapath's counters to its state file. Started and
// supervised by lanes.
//
// usage: lanes-host-agent --config FILE --state FILE [--log-level L]

#include <fcntl.h>
#include <sys/epoll.h>

#include <chrono>

#include "lanes/bfd/notify.hpp"
#include "lanes/core/daemon_main.hpp"
#include "lanes/core/event_loop.hpp"
#include "lanes/core/log.hpp"
#include "lanes/core/netlink.hpp"
#include "lanes/core/netns.hpp"
#include "lanes/hostnet/host_agent.hpp"

using namespace lanes::testbed;
using namespace lanes::hostnet;
namespace lg = lanes::log;

int main(int argc, char** argv) {
  DaemonStart ds;
  if (auto rc = daemon_start(argc, argv, "lanes-host-agent",
                             "Runs in a host's namespace: the BPF datapath and the NICs' carrier.", ds))
    return *rc;
  auto cfg = HostAgentConfig::from_json(ds.config);
  auto agent = HostAgent::open(cfg);
  if (!agent) {
    lg::error("{}: {}", cfg.host, agent.error().what());
    return 1;
  }
  EventLoop loop;
  if (auto st = loop.stop_on_signals(); !st) {
    lg::error("{}", st.error().what());
    return 1;
  }
  Fd self_ns(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  auto mon = LinkMonitor::open_in(self_ns.get(), cfg.host);
  if (!mon) {
    lg::error("{}", mon.error().what());
    return 1;
  }
  (void)loop.watch(mon.value().fd(), EPOLLIN, [&](uint32_t) {
    if (auto events = mon.value().read_events())
      for (const auto& e : events.value())
        if (!e.deleted) agent.value()->link_changed(e);
  });
  // the container's links too: whatever takes one down and up there, its
  // path must come back
  auto cns = Netns::open(cfg.container_netns);
  if (!cns) {
    lg::error("{}", cns.error().what());
    return 1;
  }
  auto cmon = LinkMonitor::open_in(cns.value().fd(), cfg.container_netns);
  if (!cmon) {
    lg::error("{}", cmon.error().what());
    return 1;
  }
  (void)loop.watch(cmon.value().fd(), EPOLLIN, [&](uint32_t) {
    if (auto events = cmon.value().read_events())
      for (const auto& e : events.value())
        if (!e.deleted) agent.value()->container_link_changed(e);
  });
  std::optional<lanes::bfd::VerdictFollower> bfd;
  if (!cfg.bfd_socket.empty())
    bfd.emplace(loop, cfg.bfd_socket, [&](const lanes::bfd::Verdicts& v) { agent.value()->bfd_changed(v); });
  StateFile state_file(ds.state_path);
  lg::info("{}: host agent ready ({} NICs, egress {})", cfg.host, agent.value()->nic_count(), cfg.mode);
  // after every wake (a link event, a BFD verdict, the timer): the state
  // file. The datapath's counters change without an event: in the bpf
  // modes they are read once a second; otherwise an idle agent sleeps (a
  // fleet has a thousand of them on two cores)
  loop.run([&]() -> std::optional<EventLoop::Clock::time_point> {
    state_file.publish(agent.value()->state());
    if (agent.value()->has_counters()) return EventLoop::Clock::now() + std::chrono::seconds(1);
    return std::nullopt;
  });
  lg::info("{}: stopping; the datapath stays attached", cfg.host);
  return 0;
}
