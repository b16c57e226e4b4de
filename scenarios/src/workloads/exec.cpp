// exec: the user's own command as a workload, in a node's namespace or a
// job host's container. Its exit status is judged against expect-exit=,
// its output kept beside the results, and the NICs of the job host it
// runs on are sampled like any workload's, so a user's own iperf3, data
// loader or trainer gets per-NIC shares and a report.

#include <fmt/format.h>

#include <fstream>

#include "workloads.hpp"

namespace lanes::scenarios {

using nlohmann::json;

namespace {

// the last LINES lines of PATH (a command's output kept short in the results)
std::string tail_of(const std::string& path, size_t lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string l; std::getline(in, l);) all.push_back(l);
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) out += all[i] + "\n";
  return out;
}

}  // namespace

std::string exit_problem(const Step& st) {
  if (!st.has("expect-exit")) return "";
  int x = st.integer("expect-exit");
  if (x >= 0 && x <= 255) return "";
  return fmt::format("expect-exit=\"{}\": an exit status is 0 to 255", st.str("expect-exit"));
}

std::string expand_addresses(const std::string& cmd, StepContext& ctx) {
  std::string out;
  size_t at = 0;
  while (at < cmd.size()) {
    size_t open = cmd.find("${addr", at);
    if (open == std::string::npos) break;
    size_t close = cmd.find('}', open);
    if (close == std::string::npos) break;
    std::string inner = cmd.substr(open + 2, close - open - 2);  // addr:NODE or addr6:NODE
    size_t colon = inner.find(':');
    std::string kind = inner.substr(0, colon), node = colon == std::string::npos ? "" : inner.substr(colon + 1);
    out += cmd.substr(at, open - at);
    at = close + 1;
    // ${addr:-x}, ${addr:=x}, ${addr:+x}, ${addr:?x}: the shell's own expansions
    if ((kind != "addr" && kind != "addr6") || node.empty() || std::string("-=+?").find(node[0]) != std::string::npos) {
      out += "${" + inner + "}";
      continue;
    }
    bool v6 = kind == "addr6";
    const auto& topo = ctx.topo();
    int i = topo.find_node(node);
    if (i < 0) throw StepError(fmt::format("${{{}}}: no node named '{}' in {}", inner, node, topo.name));
    const auto& n = topo.nodes.at(static_cast<size_t>(i));
    if (n.job) {
      if (v6 ? !n.job->has6() : !n.job->has4())
        throw StepError(fmt::format("${{{}}}: {}'s job has no IPv{} task IP", inner, node, v6 ? 6 : 4));
      out += v6 ? n.job->task_ip6.to_string() : n.job->task_ip4.to_string();
    } else if (n.kind == testbed::NodeKind::server) {
      out += ctx.server_addr(node, v6);
    } else {
      throw StepError(fmt::format("${{{}}}: {} is neither a job host nor a server (they have the addresses a "
                                  "command reaches)", inner, node));
    }
  }
  return out + cmd.substr(std::min(at, cmd.size()));
}

const char* Exec::type() const { return "exec"; }

const Attrs& Exec::attrs() const {
  static const Attrs a = {{"node", Kind::node, true},
                          {"cmd", Kind::text, true},
                          {"in", Kind::choice, false, "job|node"},
                          {"expect-exit", Kind::integer},
                          {"direction", Kind::choice, false, "tx|rx"},
                          {"wait", Kind::boolean},
                          {"timeout", Kind::duration}};
  return a;
}

std::string Exec::check(const Step& st, const testbed::Topology& topo) const {
  if (st.str("cmd").empty()) return "cmd=\"...\" is empty: it names the command to run";
  if (auto why = exit_problem(st); !why.empty()) return why;
  if (in_job(st, topo) && !topo.is_job_host(st.str("node")))
    return fmt::format("in=\"job\": {} has no job container (in=\"node\" runs in its own namespace)", st.str("node"));
  return "";
}

bool Exec::in_job(const Step& st, const testbed::Topology& topo) const {
  if (st.has("in")) return st.str("in") == "job";
  return topo.is_job_host(st.str("node"));  // a job host's command runs where its job does
}

std::vector<std::string> Exec::sampled_hosts(const Step& st, const testbed::Topology& topo) const {
  if (topo.is_job_host(st.str("node"))) return {st.str("node")};
  return {};
}

// sh -c CMD in the node's namespace (or its job's container), ${addr:NODE}
// expanded, its output to "<name>.out" beside the results; LANES_NODE and
// LANES_RESULTS tell it where it is
void Exec::start(WorkloadRun& w, StepContext& ctx) const {
  const Step& st = w.step;
  std::string node = st.str("node"), out = ctx.out_base(st.str("name")) + ".out";
  int ns = in_job(st, ctx.topo()) ? ctx.job_ns(node) : ctx.node_ns(node);
  w.hosts = sampled_hosts(st, ctx.topo());
  w.start_s = ctx.now_s();
  w.clients.push_back(ctx.start_command("exec " + node, ns, expand_addresses(st.str("cmd"), ctx), out,
                                        {{"LANES_NODE", node}, {"LANES_RESULTS", out}}));
}

json Exec::figures(const WorkloadRun& w, double end_s, StepContext&) const {
  const Step& st = w.step;
  const auto& c = w.clients.at(0);
  json f;
  int status = c.status.value_or(-1);
  f["exit_status"] = status;
  f["expected_exit"] = st.integer("expect-exit", 0);
  f["expect_exit_given"] = st.has("expect-exit");
  f["exit_ok"] = status == st.integer("expect-exit", 0);
  f["seconds"] = end_s - w.start_s;
  f["node"] = st.str("node");
  f["output"] = c.out;
  f["output_tail"] = tail_of(c.out, 20);
  f["nic_direction"] = st.str("direction", "tx");
  if (!w.hosts.empty()) f["hosts"] = w.hosts;
  return f;
}

std::string Exec::summary(const json& f) const {
  return fmt::format("exit {} (expected {}) · {:.2f} s", f.value("exit_status", -1), f.value("expected_exit", 0),
                     f.value("seconds", 0.0));
}

std::vector<reports::FigureDecl> Exec::declared_figures() const {
  return {{"seconds", "s"}, {"exit_status", "", reports::FigureDecl::Combine::median_run, false}};
}

std::optional<reports::Assertion> Exec::verdict(const reports::WorkloadResult& r) const {
  reports::Assertion a;
  a.name = fmt::format("workload {}: exit status", r.name);
  int status = r.figures.value("exit_status", -1);
  // ended by lanes (<stop>, the phase's end) with no exit asked of it: a
  // server's way to end, not a failure
  if (r.figures.value("stopped", false) && !r.figures.value("expect_exit_given", false)) {
    a.expected = "ended by lanes, or exit 0";
    a.measured = status > 128 ? fmt::format("ended by lanes (signal {})", status - 128) : fmt::format("exit {}", status);
    a.passed = status == 0 || status > 128;
    return a;
  }
  a.expected = fmt::format("exit {}", r.figures.value("expected_exit", 0));
  a.measured = status > 128 ? fmt::format("killed by signal {}", status - 128) : fmt::format("exit {}", status);
  a.passed = r.figures.value("exit_ok", false);
  if (!a.passed) {
    std::string tail = r.figures.value("output_tail", std::string());
    a.message = tail.empty() ? "it printed nothing (" + r.figures.value("output", std::string()) + ")"
                             : "its last lines:\n" + tail;
  }
  return a;
}

}  // namespace lanes::scenarios
