// The lanes executable: the one composition root. It makes the node roles
// a run is made of — the switches, the hosts' job containers, the VIP
// injectors, deployed in this order — registers the scenario commands and
// runs the command line.

#include <iostream>
#include <memory>

#include "lanes/cli/cli.hpp"
#include "lanes/cli/scenario_commands.hpp"
#include "lanes/hostnet/hostnet.hpp"
#include "lanes/switches/switches.hpp"
#include "lanes/vip/deploy.hpp"

int main(int argc, char** argv) {
  lanes::cli::CliContext cli;
  cli.roles = {std::make_shared<lanes::switches::SwitchRole>(), std::make_shared<lanes::hostnet::HostRole>(),
               std::make_shared<lanes::vip::InjectorRole>()};
  lanes::cli::register_scenario_commands();
  return lanes::cli::run_cli(cli, argc, argv, std::cout, std::cerr);
}
