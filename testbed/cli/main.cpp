#include <iostream>

#include "lanes/cli/cli.hpp"
#include "lanes/cli/scenario_commands.hpp"
#include "lanes/core/deploy.hpp"
#include "lanes/hostnet/hostnet.hpp"
#include "lanes/switch/switches.hpp"
#include "lanes/vip/deploy.hpp"

int main(int argc, char** argv) {
  lanes::testbed::register_deployer("switches", lanes::testbed::deploy_switches);
  lanes::testbed::register_deployer("hostnet", lanes::hostnet::deploy_all);
  lanes::testbed::register_deployer("vip", lanes::vip::deploy_injectors);
  lanes::scenarios::register_commands();
  return lanes::testbed::run_cli(argc, argv, std::cout, std::cerr);
}
