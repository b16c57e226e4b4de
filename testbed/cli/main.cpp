#include <iostream>

#include "lanes/testbed/cli.hpp"

int main(int argc, char** argv) { return lanes::testbed::run_cli(argc, argv, std::cout, std::cerr); }
