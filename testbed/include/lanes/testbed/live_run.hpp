#pragma once
// A run that this process brings up and owns: what `lanes up` builds (the
// namespaces and links, then the registered deployers, the switch configs
// and the supervisor that starts every daemon), held under the run's lock
// and taken down when the object goes — unless it is kept (`lanes up`,
// `lanes run --keep`).

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "lanes/testbed/deploy.hpp"
#include "lanes/testbed/features.hpp"
#include "lanes/testbed/model.hpp"
#include "lanes/testbed/result.hpp"
#include "lanes/testbed/role.hpp"
#include "lanes/testbed/run_registry.hpp"
#include "lanes/testbed/fabric.hpp"

namespace lanes::testbed {

struct LiveRunOptions {
  std::string run_id;        // "" = a fresh one
  std::string topology_xml;  // the topology's text, kept in the run directory
  std::string topology_file; // as the user named it (for status)
  std::string bin_dir;       // lanes' executables; "" = beside this program
  Overrides overrides;       // what the topology was loaded with, kept in the run's state
  std::chrono::seconds daemons_timeout{30};
  // the start gives up here, whatever progress its daemons make (lanes up --wait)
  std::optional<std::chrono::steady_clock::time_point> give_up;
  // the run lives only as long as this process (lanes run): if it dies, the
  // run is dead and its supervisor stops; keep() lets it live on its own
  bool held = false;
  // what is deployed onto the built testbed, in this order (none: the bare
  // namespaces and links)
  Roles roles;
  // a run over several machines: only this machine's part is built and
  // deployed (fabric.hpp); it must outlive the start
  const Shard* shard = nullptr;
};

class LiveRun {
 public:
  LiveRun(LiveRun&&) noexcept;
  LiveRun& operator=(LiveRun&&) noexcept;
  ~LiveRun();  // down() unless kept

  // Builds TOPO and starts its daemons. On failure everything it made is
  // removed again; the daemon logs of a failed start are moved to
  // /tmp/lanes-failed-<id> and the error says so.
  static Result<LiveRun> start(const Topology& topo, const RunRegistry& reg, LiveRunOptions opt);

  const std::string& id() const;
  Fabric& tb();
  const Topology& topology() const;
  const RunRegistry& registry() const;
  std::string dir() const;
  const KernelFeatures& features() const;
  std::chrono::microseconds daemons_took() const;

  // Removes everything now; safe to call twice.
  TeardownReport down();
  // Leaves the run up when this object goes (and releases its lock).
  void keep();

 private:
  struct Impl;
  explicit LiveRun(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace lanes::testbed
