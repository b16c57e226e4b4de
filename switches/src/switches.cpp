#include "lanes/switches/switches.hpp"

#include <grp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "lanes/bfd/bfdd.hpp"
#include "lanes/testbed/log.hpp"
#include "lanes/testbed/process.hpp"
#include "lanes/switches/frr.hpp"
#include "lanes/switches/switch_config.hpp"

namespace lanes::switches {

using namespace lanes::testbed;

SwitchFiles switch_files(const RunRegistry& reg, const std::string& run_id, const std::string& node) {
  SwitchFiles f;
  RunLayout run = reg.layout(run_id);
  f.dir = run.node_dir("switches", node);
  f.gobgp_config = f.dir + "/gobgpd.toml";
  f.agent_config = f.dir + "/fib-agent.json";
  f.agent_state = f.dir + "/fib-agent-state.json";
  f.gobgpd_log = run.daemon_log(node, "gobgpd");
  f.agent_log = run.daemon_log(node, "fib-agent");
  f.frr_dir = f.dir + "/frr";
  return f;
}

namespace {

constexpr const char* kFrrBin = "/usr/lib/frr";
constexpr const char* kFrrUser = "frr";

bool is_switch(const Node& n) { return n.kind == NodeKind::rack_switch || n.kind == NodeKind::spine; }

Status write_file(const std::string& path, const std::string& text) {
  std::ofstream o(path, std::ios::trunc);
  o << text;
  o.close();
  if (!o) return errno_error("writing " + path);
  return {};
}

// The arguments every FRR daemon of a switch gets: its configuration, pid
// file, zebra's socket and its vty socket in FRR_DIR, FRR's user, no vty
// port, the log on stdout (the supervisor's log file). Each daemon runs in
// a mount namespace of its own whose /var/tmp is FRR_DIR/tmp: FRR keeps a
// crash-log directory per process in /var/tmp/frr, left behind when the
// process is killed, and this way it stays in the run's directory.
std::vector<std::string> frr_argv(const std::string& daemon, const std::string& frr_dir) {
  std::vector<std::string> argv = {"unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
          "mount --bind \"$0\" /var/tmp && exec \"$@\"", frr_dir + "/tmp", std::string(kFrrBin) + "/" + daemon,
          "-f", frr_dir + "/" + daemon + ".conf", "-i", frr_dir + "/" + daemon + ".pid", "-z",
          frr_dir + "/zserv.api", "--vty_socket", frr_dir, "-u", kFrrUser, "-g", kFrrUser, "-P", "0", "--log",
          "stdout", "--log-level", "informational"};
  // a restarted zebra keeps the routes it finds in the kernel for a minute
  // instead of sweeping them at once: bgpd installs them again meanwhile,
  // and forwarding never stops (as lanes' FIB agent adopts its groups)
  if (daemon == "zebra") argv.insert(argv.end(), {"-K", "60"});
  return argv;
}

// FRR's three configurations of switch NODE, in a directory its daemons'
// user owns, each checked with the daemon's own --dryrun.
Status write_frr_configs(const Topology& t, int node, const SwitchFiles& f) {
  passwd* pw = ::getpwnam(kFrrUser);
  if (!pw || !std::filesystem::exists(std::string(kFrrBin) + "/bgpd"))
    return os_error(ENOENT, fmt::format("{} has switch-stack=\"frr\", which needs Debian's frr ({}/bgpd and the "
                                        "user '{}'); scripts/setup installs it",
                                        t.nodes[static_cast<size_t>(node)].name, kFrrBin, kFrrUser));
  std::error_code ec;
  std::filesystem::create_directories(f.frr_dir, ec);
  if (ec) return std::system_error(ec, "creating " + f.frr_dir);
  if (::chown(f.frr_dir.c_str(), pw->pw_uid, pw->pw_gid) != 0) return errno_error("chown " + f.frr_dir);
  std::filesystem::create_directories(f.frr_dir + "/tmp", ec);
  if (ec) return std::system_error(ec, "creating " + f.frr_dir + "/tmp");
  FrrConfig c = render_frr_config(t, node);
  for (const auto& [daemon, text] : std::map<std::string, const std::string*>{
           {"zebra", &c.zebra}, {"staticd", &c.staticd}, {"bgpd", &c.bgpd}}) {
    std::string path = f.frr_dir + "/" + daemon + ".conf";
    if (auto st = write_file(path, *text); !st) return st;
    auto argv = frr_argv(daemon, f.frr_dir);
    argv.push_back("--dryrun");
    ProcessSpec check{daemon + " --dryrun", argv};
    std::string log = f.frr_dir + "/" + daemon + "-dryrun.log";
    check.log_path = log;
    check.new_session = false;
    auto r = run_capture(check, std::chrono::seconds(10));
    if (!r) return r.error();
    if (r.value().status != 0)
      return os_error(EINVAL, fmt::format("FRR's {} rejects the configuration of {} ({}):\n{}", daemon,
                                          t.nodes[static_cast<size_t>(node)].name, path, log::tail_of(log, 5, "  ")));
  }
  return {};
}

}  // namespace

SpeakerRef speaker_of(const RunRegistry& reg, const std::string& run_id, const Node& node, int ns_fd) {
  SpeakerRef s;
  s.stack = node.stack;
  s.ns_fd = ns_fd;
  if (node.stack == SwitchStack::frr) s.vty = switch_files(reg, run_id, node.name).bgpd_vty();
  return s;
}

bool has_switches(const Topology& t) { return t.count(NodeKind::rack_switch) + t.count(NodeKind::spine) > 0; }

Status write_switch_configs(const Topology& t, const RunRegistry& reg, const std::string& run_id,
                            const std::function<bool(int)>& here) {
  std::error_code ec;
  std::filesystem::create_directories(reg.layout(run_id).logs(), ec);
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    const Node& n = t.nodes[i];
    if (!is_switch(n) || (here && !here(static_cast<int>(i)))) continue;
    auto f = switch_files(reg, run_id, n.name);
    std::filesystem::create_directories(f.dir, ec);
    if (ec) return std::system_error(ec, "creating " + f.dir);
    if (n.stack == SwitchStack::frr) {
      // zebra programs the kernel: no FIB agent, no gobgpd
      if (auto st = write_frr_configs(t, static_cast<int>(i), f); !st) return st;
      continue;
    }
    if (auto st = write_file(f.gobgp_config, render_gobgp_config(t, static_cast<int>(i))); !st) return st;
    auto agent = render_agent_config(t, static_cast<int>(i));
    // the verdicts of the switch's bfdd (deploy_switches starts it)
    if (!bfd::bfd_links(t, static_cast<int>(i)).empty()) agent.bfd_socket = bfd::bfdd_files(f.dir).socket;
    if (auto st = write_file(f.agent_config, agent.to_json().dump(2) + "\n"); !st) return st;
    ProcessSpec check{"gobgpd --dry-run", {"gobgpd", "--dry-run", "-f", f.gobgp_config, "-t", "toml"}};
    check.log_path = f.gobgpd_log;
    check.new_session = false;
    auto r = run_capture(check, std::chrono::seconds(10));
    if (!r) return r.error();
    if (r.value().status != 0)
      return os_error(EINVAL, fmt::format("gobgpd rejects the configuration of {} ({}); see {}:\n{}", n.name,
                                          f.gobgp_config, f.gobgpd_log, log::tail_of(f.gobgpd_log, 3, "  ")));
  }
  return {};
}

Status deploy_switches(DeployContext& ctx) {
  const Topology& t = ctx.tb.topology();
  if (!has_switches(t)) return {};
  if (auto st = write_switch_configs(t, ctx.reg, ctx.run_id, [&](int n) { return ctx.local(n); }); !st) return st;
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    const Node& n = t.nodes[i];
    if (!is_switch(n) || !ctx.local(static_cast<int>(i))) continue;
    auto f = switch_files(ctx.reg, ctx.run_id, n.name);
    std::string netns = ctx.tb.netns_name(static_cast<int>(i));
    if (n.stack == SwitchStack::frr) {
      // zebra first: staticd and bgpd hand it their routes
      for (const char* daemon : {"zebra", "staticd", "bgpd"}) {
        DaemonRequest d;
        d.node = n.name;
        d.name = daemon;
        d.argv = frr_argv(daemon, f.frr_dir);
        d.netns = netns;
        d.wave = std::string(daemon) == "zebra" ? kWaveFabric : kWaveFabricAgents;
        // zebra is ready once its socket is there: a client that finds none
        // tries again only ten seconds later
        if (std::string(daemon) == "zebra") d.ready_file = f.frr_dir + "/zserv.api";
        ctx.daemons.push_back(std::move(d));
      }
      if (auto b = bfd::deploy_bfdd(ctx, static_cast<int>(i), f.dir, kWaveFabric); !b) return b.error();
      continue;
    }
    DaemonRequest gobgpd;
    gobgpd.node = n.name;
    gobgpd.name = "gobgpd";
    gobgpd.argv = {"gobgpd", "-f", f.gobgp_config, "-t", "toml", "-p", "-l", "info", "--api-hosts",
                   std::string(kGobgpApi), "--pprof-disable"};
    gobgpd.netns = netns;
    gobgpd.wave = kWaveFabric;
    // one Go scheduler thread: twenty gobgpds on two cores otherwise spend
    // their time waking each other's threads
    gobgpd.env = {{"GOMAXPROCS", "1"}};
    gobgpd.log = f.gobgpd_log;
    // gobgpd logs some configuration errors (a policy it cannot build) and
    // runs on without that part
    gobgpd.fatal_log = {"level=error", "level=fatal"};
    ctx.daemons.push_back(std::move(gobgpd));
    // BFD towards the job hosts, in a daemon of its own: a restarted FIB
    // agent must not take the hosts' paths out of use
    if (auto b = bfd::deploy_bfdd(ctx, static_cast<int>(i), f.dir, kWaveFabric); !b) return b.error();
    // the agent is ready once gobgpd answers it: the hosts' daemons start
    // after every switch can take their sessions
    DaemonRequest agent;
    agent.node = n.name;
    agent.name = "fib-agent";
    agent.argv = {ctx.bin_dir + "/lanes-fib-agent", "--config", f.agent_config, "--state", f.agent_state};
    agent.netns = netns;
    agent.wave = kWaveFabricAgents;
    agent.ready_file = f.agent_state;
    agent.log = f.agent_log;
    ctx.daemons.push_back(std::move(agent));
  }
  return {};
}

}  // namespace lanes::switches
