#pragma once
// Topology drawings: Graphviz DOT and Mermaid flowcharts.

#include <string>

#include "lanes/testbed/model.hpp"
#include "lanes/testbed/partition.hpp"

namespace lanes::cli {

using testbed::Topology;

// With a placement (lanes graph --machines K) each machine is a box of
// its own around its racks and nodes, and a link between machines is
// dashed and labelled VXLAN.
std::string to_dot(const Topology& t, const testbed::Placement* placement = nullptr);
std::string to_mermaid(const Topology& t, const testbed::Placement* placement = nullptr);

}  // namespace lanes::cli
