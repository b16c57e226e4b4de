#pragma once
// The fault types (one .cpp each), for the registry and the tests.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "lanes/scenarios/workload.hpp"

namespace lanes::scenarios {

// nic-down / nic-up: a NIC of one host, or of every job host of a rack at
// once; a nic-down records how the groups' buckets moved
class NicChange final : public Fault {
 public:
  explicit NicChange(bool down) : down_(down) {}
  const char* type() const override;
  const Attrs& attrs() const override;
  void apply(const Step& st, const std::string& label, StepContext& ctx) const override;

 private:
  bool down_;
};

// nic-flap: count= times down and up, period= each
class NicFlap final : public Fault {
 public:
  const char* type() const override;
  const Attrs& attrs() const override;
  void apply(const Step& st, const std::string& label, StepContext& ctx) const override;
};

// silent-drop / clear-drop: the switch port of a host's NIC drops every
// frame in both directions while the NIC keeps its carrier (a gray failure)
class SilentDrop final : public Fault {
 public:
  explicit SilentDrop(bool drop) : drop_(drop) {}
  const char* type() const override;
  const Attrs& attrs() const override;
  void apply(const Step& st, const std::string& label, StepContext& ctx) const override;

 private:
  bool drop_;
};

// impair / clear-impair: loss or duplication on a link (testbed/impair.hpp):
// a host's NIC's (host= nic=), or a switch port's (switch= port=: a host's
// port, a storage server's, a fabric link to a spine). tx is what the named
// side sends (its egress), rx what it receives (the other end's egress).
class Impair final : public Fault {
 public:
  explicit Impair(bool set) : set_(set) {}
  const char* type() const override;
  const Attrs& attrs() const override;
  std::string check(const Step& st, const testbed::Topology& topo) const override;
  void apply(const Step& st, const std::string& label, StepContext& ctx) const override;

 private:
  bool set_;
};

// kill: SIGKILL to a daemon of the run; the supervisor must restart it
class KillDaemon final : public Fault {
 public:
  const char* type() const override;
  const Attrs& attrs() const override;
  void apply(const Step& st, const std::string& label, StepContext& ctx) const override;
};

// rogue-announce: host='s job claims victim='s task IP and announces it
class RogueAnnounce final : public Fault {
 public:
  const char* type() const override;
  const Attrs& attrs() const override;
  void apply(const Step& st, const std::string& label, StepContext& ctx) const override;
};

// Kills DAEMON of NODE and waits until the supervisor runs a new one.
void kill_and_await_restart(StepContext& ctx, const std::string& node, const std::string& daemon,
                            const std::string& label);

// How a group's buckets moved when NICs failed: the buckets of BEFORE whose
// next hop is gone from AFTER were the failed NICs'; every other bucket is
// a healthy one, and moved if its next hop changed.
struct BucketMoves {
  int buckets = 0, healthy = 0, moved_healthy = 0;
};
BucketMoves bucket_moves(const std::vector<uint32_t>& before, const std::vector<uint32_t>& after);

// A fault that takes one NIC of each of HOSTS out of their task IPs'
// groups: the groups of each family the hosts have, read before FAULT runs,
// watched until each has one member fewer (within LIMIT), and compared.
// The record: groups, buckets, healthy_buckets, moved_healthy,
// group_shrunk, applied_ms, shrunk_ms, members_after (one host).
nlohmann::json watch_groups_shrink(StepContext& ctx, const std::vector<std::string>& hosts,
                                   const std::function<void()>& fault, std::chrono::milliseconds limit);

// job-fail: the training job of workload= fails (every rank killed at once,
// once every rank has done step after-step=, or at once) and is started
// again after restart-after= (default 1 s), resuming from its latest
// checkpoint
class JobFail final : public Fault {
 public:
  const char* type() const override;
  const Attrs& attrs() const override;
  void apply(const Step& st, const std::string& label, StepContext& ctx) const override;
};

// exec: the user's own command run to its end on the timeline
class ExecFault final : public Fault {
 public:
  const char* type() const override;
  const Attrs& attrs() const override;
  std::string check(const Step& st, const testbed::Topology& topo) const override;
  void apply(const Step& st, const std::string& label, StepContext& ctx) const override;
};

}  // namespace lanes::scenarios
