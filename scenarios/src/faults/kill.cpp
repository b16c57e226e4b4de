#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include "faults.hpp"
#include "lanes/testbed/process.hpp"

namespace lanes::scenarios {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

const char* KillDaemon::type() const { return "kill"; }

const Attrs& KillDaemon::attrs() const {
  static const Attrs a = {{"node", Kind::node, true},
                          {"daemon", Kind::choice, true,
                           "switch-bgp|switch-fib|gobgpd|fib-agent|bgpd|zebra|staticd|vip-injector|host-agent|bfdd"},
                          {"mark", Kind::name}};
  return a;
}

void kill_and_await_restart(StepContext& ctx, const std::string& n, const std::string& d, const std::string& label) {
  pid_t pid = ctx.daemon_pid(n, d);
  if (pid <= 0) throw StepError(fmt::format("no {} runs on {} (supervisor.json)", d, n));
  if (!ctx.kill_daemon(n, pid)) throw StepError(fmt::format("cannot kill {} on {} (pid {})", d, n, pid));
  ctx.mark(label, "fault");
  auto start = Clock::now();
  bool back = ctx.eventually(
      [&] {
        pid_t p = ctx.daemon_pid(n, d);
        return p > 0 && p != pid && ctx.daemon_running(n, p);
      },
      milliseconds(30'000), milliseconds(20));
  double took = std::chrono::duration<double>(Clock::now() - start).count();
  ctx.figure("restart_" + label + "_s", took);
  ctx.say(fmt::format("fault: {} on {} killed (pid {}); {}", d, n, pid,
                      back ? fmt::format("restarted by the supervisor in {:.2f} s", took) : "NOT restarted in 30 s"));
  if (!back) throw StepError(fmt::format("{} on {} was not restarted", d, n));
}

// switch-bgp and switch-fib name a switch's BGP speaker and what programs
// its kernel, whatever its stack: gobgpd and the FIB agent, or FRR's bgpd
// and zebra; a scenario that kills them judges either
std::string switch_daemon(const testbed::Topology& t, const std::string& node, const std::string& d) {
  int i = t.find_node(node);
  bool frr = i >= 0 && t.nodes[static_cast<size_t>(i)].stack == testbed::SwitchStack::frr;
  if (d == "switch-bgp") return frr ? "bgpd" : "gobgpd";
  if (d == "switch-fib") return frr ? "zebra" : "fib-agent";
  return d;
}

void KillDaemon::apply(const Step& st, const std::string& label, StepContext& ctx) const {
  kill_and_await_restart(ctx, st.str("node"), switch_daemon(ctx.topo(), st.str("node"), st.str("daemon")), label);
}

}  // namespace lanes::scenarios
