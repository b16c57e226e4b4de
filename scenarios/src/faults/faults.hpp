#pragma once
// The fault types (one .cpp each), for the registry and the tests.

#include <cstdint>
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

}  // namespace lanes::scenarios
