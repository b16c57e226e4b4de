#pragma once
// The scenario model: what a scenario file asks for, checked against the
// topology it names before anything is built.
//
//   <scenario name="nic-failover" description="...">
//     <topology file="../topologies/laptop.xml" egress="bpf"/>
//     <phase name="failover">
//       <converge/>
//       <workload name="restore" type="checkpoint-restore" host="h1" server="storage"
//                 bytes="600M" flows="32" wait="false"/>
//       <sleep duration="2s"/>
//       <fault type="nic-down" host="h1" nic="2" mark="down"/>
//       <wait workload="restore"/>
//       <assert type="healthy-flows-kept" fault="down"/>
//     </phase>
//     <assert type="bytes-verified"/>
//   </scenario>
//
// A suite is <suite name=".." description=".."><include file=".."/>...</suite>.
// Every element's attributes are checked against what its type declares
// (the workload, fault and assertion plug-ins declare their own; see
// workload.hpp and live_assertion.hpp): unknown, missing and malformed
// values and nodes the topology does not have are all reported together as
// `file:line: message` (testbed::InputError).

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lanes/testbed/model.hpp"
#include "lanes/testbed/overrides.hpp"
#include "lanes/testbed/topology_loader.hpp"

namespace lanes::scenarios {

// Attribute values the topology of a phase can be changed with (on every
// host, job and rack): egress, vip, nics, rate, hold-time, bfd-interval.
using Overrides = testbed::Overrides;  // testbed/overrides.hpp: what a scenario may change

// One element of a phase's timeline or an assertion: its element name
// ("workload", "fault", "sleep", "wait", "converge", "stop", "mark",
// "assert"), its type attribute where it has one, and its attributes,
// already checked.
struct Step {
  std::string element;
  std::string type;
  int line = 0;
  std::map<std::string, std::string> attrs;

  bool has(const std::string& k) const { return attrs.count(k) != 0; }
  std::string str(const std::string& k, const std::string& def = "") const;
  double num(const std::string& k, double def = 0) const;
  int integer(const std::string& k, int def = 0) const;
  uint64_t bytes(const std::string& k, uint64_t def = 0) const;  // "600M", "64K", "1G", plain
  std::chrono::milliseconds duration(const std::string& k, std::chrono::milliseconds def = {}) const;
  uint64_t rate_bps(const std::string& k, uint64_t def = 0) const;  // "100mbit", "1gbit"
  int64_t delay_us(const std::string& k, int64_t def = 0) const;    // "20ms", "250us"
  bool flag(const std::string& k, bool def) const;
  std::string describe() const;  // "workload restore (checkpoint-restore)"
};

struct Phase {
  std::string name;
  int line = 0;
  Overrides overrides;  // the scenario's, then the phase's own
  testbed::Topology topology;  // the scenario's topology loaded with them
  std::vector<Step> steps;
};

struct Scenario {
  std::string name;
  std::string description;
  std::string file;
  std::string topology_file;
  std::string topology_text;  // as it was read (each run keeps a copy)
  // tcp-congestion=: every TCP connection of its workloads uses it, whatever
  // the machine's default is (a non-root namespace cannot change its own
  // default beyond the kernel's allowed list, so each socket sets it)
  std::string tcp_congestion = "cubic";
  std::vector<Phase> phases;
  std::vector<Step> assertions;  // evaluated after every phase ran
};

// Loads PATH: a <scenario> gives one, a <suite> the scenarios it includes
// (paths relative to the suite file). SET: overrides over every phase's
// own (lanes run --set switch-stack=frr). Throws testbed::InputError.
std::vector<Scenario> load_scenarios(const std::string& path, const Overrides& set = {});
// Same from text; FILE names it in messages and anchors relative paths.
std::vector<Scenario> load_scenarios_text(const std::string& text, const std::string& file,
                                          const Overrides& set = {});

using testbed::parse_duration;  // "1.5s", "250ms", "2m", "3" (seconds)
// "600M", "64K", "2G", "1000" (bytes; K/M/G are powers of 1000, Ki/Mi/Gi of 1024).
bool parse_size(const std::string& s, uint64_t& out);

// A time reference "MARK", "MARK+DURATION" or "MARK-DURATION" (marks may
// contain '-'): the mark and the signed offset.
struct TimeRef {
  std::string mark;
  std::chrono::milliseconds offset{0};
};
bool parse_timeref(const std::string& s, TimeRef& out);

// Where the shipped scenario files are: $LANES_SCENARIOS_DIR, or the
// scenarios/ folder of the source tree lanes was built from.
std::string shipped_dir();
// A bare NAME ("nic-failover") names a shipped scenario; anything else is a path.
std::string resolve_scenario(const std::string& name_or_path);

}  // namespace lanes::scenarios
