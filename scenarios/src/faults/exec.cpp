// exec: the user's own failure injector, a command run to its end on the
// timeline in a node's namespace or a job host's container.

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "../workloads/workloads.hpp"
#include "faults.hpp"
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
  spec.log_path = out + ".err";
  spec.env = {{"LANES_NODE", node}};
  auto timeout = st.duration("timeout", milliseconds(60'000));
  ctx.mark(label, "fault");
  auto start = Clock::now();
  auto r = testbed::run_capture(spec, timeout);
  double took = std::chrono::duration<double>(Clock::now() - start).count();
  if (!r) throw StepError(fmt::format("fault exec on {} ({}): {}", node, cmd, r.error().what()));
  // its stdout, then what it said on stderr, in one file
  std::string err;
  {
    std::ifstream e(spec.log_path);
    err.assign(std::istreambuf_iterator<char>(e), std::istreambuf_iterator<char>());
  }
  std::error_code ec;
  std::filesystem::remove(spec.log_path, ec);
  std::ofstream(out) << r.value().out << err;
  int status = r.value().status, expected = st.integer("expect-exit", 0);
  ctx.record_fault(label, {{"node", node}, {"cmd", cmd}, {"exit_status", status}, {"expected_exit", expected},
                           {"seconds", took}, {"output", out}});
  ctx.say(fmt::format("fault: exec on {} exited {} after {:.2f} s", node, status, took));
  if (status == expected) return;
  std::string said = r.value().out + err;
  if (said.size() > 2000) said = "..." + said.substr(said.size() - 2000);
  throw StepError(fmt::format("fault exec on {} ({}) {} (expected exit {}){}", node, cmd,
                              status == 124 ? fmt::format("did not end within {} s", timeout.count() / 1000.0)
                                            : fmt::format("exited {}", status),
                              expected, said.empty() ? "" : ":\n" + said));
}

}  // namespace lanes::scenarios
