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
#include "lanes/testbed/daemon_main.hpp"
#include "lanes/testbed/event_loop.hpp"
#include "lanes/testbed/log.hpp"
#include "lanes/testbed/netlink.hpp"
#include "lanes/testbed/netns.hpp"
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
  // the host's links, and the container's: whatever takes one down and
  // up, its path must come back
  Fd self_ns(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  auto cns = Netns::open(cfg.container_netns);
  if (!cns) {
    lg::error("{}", cns.error().what());
    return 1;
  }
  std::vector<LinkMonitor> monitors;
  auto watch = [&](int ns_fd, const std::string& ns, void (HostAgent::*changed)(const LinkEvent&)) {
    auto mon = LinkMonitor::open_in(ns_fd, ns);
    if (!mon) {
      lg::error("{}", mon.error().what());
      return false;
    }
    monitors.push_back(std::move(mon).value());
    LinkMonitor* m = &monitors.back();
    (void)loop.watch(m->fd(), EPOLLIN, [&agent, m, changed](uint32_t) {
      if (auto events = m->read_events())
        for (const auto& e : events.value())
          if (!e.deleted) (agent.value().get()->*changed)(e);
    });
    return true;
  };
  monitors.reserve(2);  // the watchers hold pointers into it
  if (!watch(self_ns.get(), cfg.host, &HostAgent::link_changed) ||
      !watch(cns.value().fd(), cfg.container_netns, &HostAgent::container_link_changed))
    return 1;
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
    state_file.publish(agent.value()->state().to_json());
    if (agent.value()->has_counters()) return EventLoop::Clock::now() + std::chrono::seconds(1);
    return std::nullopt;
  });
  lg::info("{}: stopping; the datapath stays attached", cfg.host);
  return 0;
}
