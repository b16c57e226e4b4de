// exec: the user's own failure injector, a command run to its end on the
// timeline in a node's namespace or a job host's container.

#include <fmt/format.h>
#include <signal.h>

#include <filesystem>
#include <fstream>

#include "../workloads/workloads.hpp"
#include "faults.hpp"
#include "lanes/testbed/interrupt.hpp"
#include "lanes/testbed/process.hpp"

namespace lanes::scenarios {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

const char* ExecFault::type() const { return "exec"; }

const Attrs& ExecFault::attrs() const {
  static const Attrs a = {{"node", Kind::node, true},       {"cmd", Kind::text, true},
                          {"in", Kind::choice, false, "job|node"}, {"expect-exit", Kind::integer},
                          {"timeout", Kind::duration},      {"mark", Kind::name}};
  return a;
}

std::string ExecFault::check(const Step& st, const testbed::Topology& topo) const {
  if (st.str("cmd").empty()) return "cmd=\"...\" is empty: it names the command to run";
  if (auto why = exit_problem(st); !why.empty()) return why;
  if (st.str("in") == "job" && !topo.is_job_host(st.str("node")))
    return fmt::format("in=\"job\": {} has no job container (in=\"node\" runs in its own namespace)", st.str("node"));
  return "";
}

// sh -c CMD, to its end or timeout= (default 60 s); its output beside the
// results ("fault-<label>.out"). An exit status other than expect-exit=
// (default 0) fails the phase with the command's last lines.
void ExecFault::apply(const Step& st, const std::string& label, StepContext& ctx) const {
  const auto& topo = ctx.topo();
  std::string node = st.str("node"), cmd = expand_addresses(st.str("cmd"), ctx);
  bool in_job = st.has("in") ? st.str("in") == "job" : topo.is_job_host(node);
  std::string out = ctx.out_base("fault-" + label) + ".out";
  testbed::ProcessSpec spec{"exec fault on " + node, {"/bin/sh", "-c", cmd}};
  spec.netns_fd = in_job ? ctx.job_ns(node) : ctx.node_ns(node);
  spec.log_path = out;  // its stdout and stderr
  spec.env = {{"LANES_NODE", node}};
  auto timeout = st.duration("timeout", milliseconds(60'000));
  std::error_code ec;
  std::filesystem::remove(out, ec);
  ctx.mark(label, "fault");
  auto start = Clock::now();
  auto d = testbed::Daemon::start(spec);
  if (!d) throw StepError(fmt::format("fault exec on {} ({}): {}", node, cmd, d.error().what()));
  // until the command (not whatever it left in the background) ends, the
  // timeout passes or lanes is interrupted
  auto deadline = start + timeout;
  bool ended = false;
  while (!(ended = d.value().wait_until(std::min(deadline, Clock::now() + milliseconds(100)))))
    if (Clock::now() >= deadline || testbed::interrupted()) break;
  if (!ended) (void)d.value().stop(milliseconds(1000));
  int status = d.value().exit_status().value_or(-1);
  // what it left in its process group ends with it
  ::kill(-d.value().pid(), SIGKILL);
  double took = std::chrono::duration<double>(Clock::now() - start).count();
  int expected = st.integer("expect-exit", 0);
  ctx.record_fault(label, {{"node", node}, {"cmd", cmd}, {"exit_status", status}, {"expected_exit", expected},
                           {"timed_out", !ended}, {"seconds", took}, {"output", out}});
  ctx.say(fmt::format("fault: exec on {} {} after {:.2f} s", node,
                      ended ? fmt::format("exited {}", status) : std::string("was ended"), took));
  if (!ended && testbed::interrupted()) throw StepError("interrupted");
  if (ended && status == expected) return;
  std::string said;
  {
    std::ifstream in(out);
    said.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (said.size() > 2000) said = "..." + said.substr(said.size() - 2000);
  throw StepError(fmt::format("fault exec on {} ({}) {} (expected exit {}){}", node, cmd,
                              ended ? fmt::format("exited {}", status)
                                    : fmt::format("did not end within {} s", timeout.count() / 1000.0),
                              expected, said.empty() ? "" : ":\n" + said));
}

}  // namespace lanes::scenarios
