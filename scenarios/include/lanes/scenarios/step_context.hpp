#pragma once
// What a workload or a fault plug-in may ask of the phase that runs it: the
// topology, the fabric (FabricView), the nodes' namespaces, lanes-traffic
// processes, NIC state, the run's daemons, and the phase's timeline (marks,
// messages, figures). The runner implements it over a live run; the unit
// tests implement it over a fake fabric, so a plug-in's logic is checked
// without root.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "lanes/scenarios/traffic_args.hpp"
#include "lanes/testbed/model.hpp"
#include "lanes/testbed/process.hpp"
#include "lanes/scenarios/fabric_view.hpp"
#include "lanes/scenarios/scenario.hpp"

namespace lanes::scenarios {

// A step could not do what the scenario asked: the phase ends with this
// message.
struct StepError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A lanes-traffic process of a workload, and the file its output goes to.
struct Proc {
  std::string role;  // "recv", "fetch h1"
  testbed::Daemon d;
  std::string out;
  std::optional<int> status;  // its exit status once it ended (128 + N: killed by signal N)
};

// A job failure (fault job-fail): once every rank has done step AFTER_STEP
// (-1: at once) the job's processes are killed, the timeline marked MARK;
// RESTART_AFTER later it starts again.
struct JobFailure {
  int after_step = -1;
  std::chrono::milliseconds restart_after{1000};
  std::string mark = "job-fail";
  // the job resumes on its hot spare in place of HOST (a training job's
  // spare=), from the state the spare holds
  bool onto_spare = false;
  std::string host;
};

class StepContext {
 public:
  virtual ~StepContext() = default;

  virtual const testbed::Topology& topo() const = 0;
  virtual FabricView& fabric() = 0;

  // ---- workloads ----
  // a node's namespace and a job host's container, as open fds
  virtual int node_ns(const std::string& node) = 0;
  virtual int job_ns(const std::string& host) = 0;
  // the address a server answers on, of the family asked for
  virtual std::string server_addr(const std::string& server, bool v6) const = 0;
  // COUNT consecutive ports of its own for a workload: the first
  virtual int take_ports(int count) = 0;
  // where a workload's output files go: "<phase dir>/<NAME>"
  virtual std::string out_base(const std::string& name) const = 0;
  virtual uint64_t seed() const = 0;
  // lanes-traffic ARGS in namespace NS, its output to OUT; HOLD: it starts
  // with SIGUSR1 held and waits for go() (a burst's start at one moment)
  virtual Proc start_traffic(const std::string& role, int ns, std::vector<std::string> args, const std::string& out,
                             bool hold = false) = 0;
  // the same with one mode's flags (traffic_args.hpp)
  template <class A>
  Proc start_traffic(const std::string& role, int ns, const A& args, const std::string& out, bool hold = false) {
    return start_traffic(role, ns, traffic::to_argv(args), out, hold);
  }
  // sh -c CMD in namespace NS, its output to OUT, ENV added to lanes' own
  // (an exec workload: the user's command)
  virtual Proc start_command(const std::string& role, int ns, const std::string& cmd, const std::string& out,
                             std::vector<std::pair<std::string, std::string>> env) = 0;
  // lanes' own program NAME (lanes-delay) with ARGS in namespace NS for the
  // rest of the phase, known by KEY (a second start of KEY ends the
  // first), its output to LOG: ended (SIGTERM) by stop_helper or with the
  // phase, before the run goes down; nothing of it outlives lanes
  virtual void start_helper(const std::string& key, const std::string& name, int ns, std::vector<std::string> args,
                            const std::string& log) = 0;
  // ends KEY's helper and waits for it: false when none runs
  virtual bool stop_helper(const std::string& key) = 0;
  virtual void go(std::vector<Proc>& procs) = 0;
  virtual void wait_listening(int ns, int port, bool udp, const std::string& who) = 0;
  // HOST's BPF flow table as its host agent published it: the NIC of each
  // TCP flow to or from PORT, by the flow's other port
  virtual std::map<int, int> bpf_flow_nics(const std::string& host, int port) = 0;

  // ---- faults ----
  // NIC of every one of HOSTS up or down, all at once
  virtual void set_nics(const std::vector<std::string>& hosts, int nic, bool up) = 0;
  // an nftables script in namespace NS (WHERE names it in errors)
  virtual void nft(int ns, const std::string& script, const std::string& where) = 0;
  // the pid the supervisor runs DAEMON of NODE as, on NODE's machine (0: none)
  virtual pid_t daemon_pid(const std::string& node, const std::string& daemon) = 0;
  // SIGKILL to NODE's daemon PID (its process group when it leads one, so
  // nothing of it lives on); false when no such process runs there
  virtual bool kill_daemon(const std::string& node, pid_t pid) = 0;
  // PID runs on NODE's machine
  virtual bool daemon_running(const std::string& node, pid_t pid) = 0;
  // HOST's job container takes VICTIM's task IPs and its injector is told
  // to announce them (it is restarted for it by the caller)
  virtual void claim_task_ips(const std::string& host, const std::string& victim) = 0;
  // the running workload NAME's job fails as F says (Workload::fail)
  virtual void fail_workload(const std::string& name, const JobFailure& f) = 0;

  // ---- the phase's timeline ----
  virtual double now_s() const = 0;
  virtual void mark(const std::string& label, const std::string& kind) = 0;
  virtual void say(const std::string& text) = 0;
  // a figure of the phase (results.json's phase config)
  virtual void figure(const std::string& key, nlohmann::json value) = 0;
  // what a fault measured, for the live assertions that refer to its mark
  virtual void record_fault(const std::string& label, nlohmann::json record) = 0;
  // false: lanes was interrupted
  virtual bool sleep(std::chrono::milliseconds d) = 0;
  virtual bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout,
                          std::chrono::milliseconds every) = 0;
};

// The job hosts a step names: host= (or every job host of rack=).
std::vector<std::string> hosts_of(const Step& st, const testbed::Topology& topo);

}  // namespace lanes::scenarios
