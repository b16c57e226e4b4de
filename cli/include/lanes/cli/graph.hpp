#pragma once
// Topology drawings: Graphviz DOT and Mermaid flowcharts.

#include <string>

#include "lanes/testbed/model.hpp"

namespace lanes::cli {

using testbed::Topology;

std::string to_dot(const Topology& t);
std::string to_mermaid(const Topology& t);

}  // namespace lanes::cli
