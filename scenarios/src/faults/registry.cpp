#include "faults.hpp"

namespace lanes::scenarios {

const std::vector<const Fault*>& faults() {
  static const NicChange down(true), up(false);
  static const NicFlap flap;
  static const SilentDrop drop(true), clear(false);
  static const KillDaemon kill;
  static const RogueAnnounce rogue;
  static const JobFail job_fail;
  static const Impair impair(true), clear_impair(false);
  static const ExecFault exec;
  static const std::vector<const Fault*> all = {&down,     &up,     &flap,         &drop, &clear, &kill, &rogue,
                                                &job_fail, &impair, &clear_impair, &exec};
  return all;
}

const Fault* find_fault(const std::string& type) {
  for (const auto* f : faults())
    if (type == f->type()) return f;
  return nullptr;
}

}  // namespace lanes::scenarios
