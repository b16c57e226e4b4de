#pragma once
// The VIP injector role: an injector in every job container of a run
// (after hostnet built the containers: namespace `lanes-<run>-<host>.job`,
// links `eth<k>`), its files, and the faults that act through it.

#include <string>

#include "lanes/testbed/deploy.hpp"
#include "lanes/testbed/role.hpp"
#include "lanes/testbed/run_layout.hpp"
#include "lanes/vip/speaker.hpp"

namespace lanes::vip {

struct InjectorFiles {
  std::string config;  // <run>/hosts/<host>/injector.json (SpeakerConfig)
  std::string state;   // <run>/hosts/<host>/injector-state.json (Speaker::state)
  std::string exabgp;  // <run>/hosts/<host>/exabgp.conf (injector="exabgp")
  std::string bird;    // <run>/hosts/<host>/bird.conf (injector="bird")
  std::string bird_socket;
};
InjectorFiles injector_files(const testbed::RunLayout& run, const std::string& host);

// The injector's configuration for HOST.
SpeakerConfig injector_config(const testbed::Topology& t, int host);
testbed::Status deploy_injectors(testbed::DeployContext& ctx);

// From its next start, HOST's injector announces TASK4 and TASK6 (a
// hijack: the rogue-announce fault; the caller restarts the injector);
// ExaBGP's and BIRD's configurations are rendered again.
testbed::Status claim_task_ips(const testbed::RunLayout& run, const std::string& host, const std::string& task4,
                               const std::string& task6);

// The VIP injector role: deploy_injectors, and the injector's state as its status.
class InjectorRole final : public testbed::Role {
 public:
  const char* name() const override { return "vip"; }
  testbed::Status deploy(testbed::DeployContext& ctx) const override { return deploy_injectors(ctx); }
  const char* status_key() const override { return "injector"; }
  nlohmann::json status(const testbed::RunRegistry& reg, const std::string& run_id, const testbed::Node& node,
                        int netns_fd, bool detailed) const override;
  void print_status(const nlohmann::json& view, const nlohmann::json& node, std::ostream& out) const override;
};

}  // namespace lanes::vip
