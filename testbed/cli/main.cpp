#include <iostream>

#include "lanes/hostnet/hostnet.hpp"
#include "lanes/scenarios/commands.hpp"
#include "lanes/testbed/cli.hpp"
#include "lanes/testbed/deploy.hpp"
#include "lanes/vip/deploy.hpp"

int main(int argc, char** argv) {
  lanes::testbed::register_deployer("hostnet", lanes::hostnet::deploy_all);
  lanes::testbed::register_deployer("vip", lanes::vip::deploy_injectors);
  lanes::scenarios::register_commands();
  return lanes::testbed::run_cli(argc, argv, std::cout, std::cerr);
}
