#pragma once
// Assertions on the live run (inside a phase, while its testbed is up) are
// plug-ins: one file per type under scenarios/src/assertions/, each
// declaring its attributes (the loader checks steps against them) and how
// it checks, over a LiveContext — the fabric through a FabricView, the
// phase's marks, NIC series and fault records — so each is unit-tested
// with a fake fabric. Adding one is adding a file and a line in
// live_assertions().

#include <chrono>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "lanes/hostnet/host_agent.hpp"
#include "lanes/reports/result.hpp"
#include "lanes/scenarios/fabric_view.hpp"
#include "lanes/scenarios/scenario.hpp"
#include "lanes/scenarios/schema.hpp"

namespace lanes::scenarios {

struct LiveContext {
  const testbed::Topology& topo;
  FabricView& fabric;
  std::map<std::string, double> marks;                   // mark → seconds into the phase
  std::function<std::vector<reports::Series>()> series;  // the NIC counters sampled so far
  std::map<std::string, nlohmann::json> faults;          // what each fault recorded, by its mark
  // polls PRED until it holds or TIMEOUT passes (given up if lanes is interrupted)
  std::function<bool(const std::function<bool()>& pred, std::chrono::milliseconds timeout,
                     std::chrono::milliseconds every)>
      eventually;
  std::map<std::string, double> figures;  // named figures the assertion adds to the results
  // HOST's host agent state as it published it last (its NICs' datapath
  // counters and flows in the bpf modes); nullopt if there is none
  std::function<std::optional<hostnet::HostAgentState>(const std::string& host)> host_agent_state;
};

class LiveAssertion {
 public:
  virtual ~LiveAssertion() = default;
  virtual const char* type() const = 0;
  virtual const Attrs& attrs() const = 0;
  // The assertion's name, expected, measured and verdict (line and phase
  // are the runner's).
  virtual reports::Assertion check(const Step& st, LiveContext& ctx) const = 0;
};

// Every live assertion type, registered once.
const std::vector<const LiveAssertion*>& live_assertions();
const LiveAssertion* find_live_assertion(const std::string& type);

}  // namespace lanes::scenarios
