#pragma once
// Deploys a VIP injector into every job container of a run (after hostnet
// built the containers: namespace `lanes-<run>-<host>.job`, links `eth<k>`).

#include <nlohmann/json.hpp>

#include "lanes/core/deploy.hpp"

namespace lanes::vip {

// The injector's configuration for HOST.
nlohmann::json injector_config(const testbed::Topology& t, int host);
testbed::Status deploy_injectors(testbed::DeployContext& ctx);

}  // namespace lanes::vip
