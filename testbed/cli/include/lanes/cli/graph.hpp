#pragma once
// Topology drawings: Graphviz DOT and Mermaid flowcharts.

#include <string>

#include "lanes/core/model.hpp"

namespace lanes::testbed {

std::string to_dot(const Topology& t);
std::string to_mermaid(const Topology& t);

}  // namespace lanes::testbed
