#include "lanes/cli/graph.hpp"

#include <fmt/format.h>

#include <map>

#include "lanes/testbed/topology_loader.hpp"

namespace lanes::cli {

using namespace lanes::testbed;
namespace {

std::string node_label(const Node& n) {
  switch (n.kind) {
    case NodeKind::spine:
    case NodeKind::rack_switch:
      return fmt::format("{}\\nAS {}", n.name, n.asn);
    case NodeKind::host:
      if (!n.job) return fmt::format("{}\\n{} NICs", n.name, n.nics.size());
      // the task IPs of the job's families
      return fmt::format("{}\\n{} NICs\\ntask {}{}{}", n.name, n.nics.size(),
                         n.job->has4() ? n.job->task_ip4.to_string() : "",
                         n.job->has4() && n.job->has6() ? "\\n" : "", n.job->has6() ? n.job->task_ip6.to_string() : "");
    case NodeKind::server:
      return fmt::format("{}\\n{}", n.name, to_string(n.role));
  }
  return n.name;
}

std::string shape(NodeKind k) {
  switch (k) {
    case NodeKind::spine: return "doubleoctagon";
    case NodeKind::rack_switch: return "octagon";
    case NodeKind::host: return "box";
    case NodeKind::server: return "cylinder";
  }
  return "box";
}

std::string mermaid_id(const std::string& name) {
  std::string id = "n_";
  for (char c : name) id += (c == '-') ? '_' : c;
  return id;
}

// Host NIC links collapse to one edge per host, labelled "4 x 500mbit".
struct Edge {
  int a, b;
  int count = 0;
  uint64_t rate = 0;
};

std::vector<Edge> edges(const Topology& t) {
  std::map<std::pair<int, int>, Edge> m;
  std::vector<std::pair<int, int>> order;
  for (const auto& l : t.links) {
    auto key = std::make_pair(l.a.node, l.b.node);
    auto [it, fresh] = m.try_emplace(key, Edge{l.a.node, l.b.node});
    if (fresh) order.push_back(key);
    it->second.count++;
    it->second.rate = l.rate_bps;
  }
  std::vector<Edge> out;
  for (auto& k : order) out.push_back(m[k]);
  return out;
}

std::string edge_label(const Edge& e) {
  std::string r = e.rate ? format_rate(e.rate) : "";
  if (e.count > 1) return fmt::format("{} x {}", e.count, r.empty() ? "link" : r);
  return r;
}

}  // namespace

std::string to_dot(const Topology& t) {
  std::string s = fmt::format("graph \"{}\" {{\n  rankdir=TB;\n  node [fontname=\"Helvetica\"];\n", t.name);
  for (const auto& n : t.nodes)
    if (n.rack < 0)
      s += fmt::format("  \"{}\" [shape={}, label=\"{}\"];\n", n.name, shape(n.kind), node_label(n));
  for (size_t r = 0; r < t.racks.size(); ++r) {
    const Rack& rack = t.racks[r];
    s += fmt::format("  subgraph \"cluster_{}\" {{\n    label=\"rack {} ({})\";\n", rack.name,
                     rack.name, rack.block4.to_string());
    for (const auto& n : t.nodes)
      if (n.rack == static_cast<int>(r))
        s += fmt::format("    \"{}\" [shape={}, label=\"{}\"];\n", n.name, shape(n.kind),
                         node_label(n));
    s += "  }\n";
  }
  for (const auto& e : edges(t)) {
    std::string label = edge_label(e);
    s += fmt::format("  \"{}\" -- \"{}\"{};\n", t.nodes[e.a].name, t.nodes[e.b].name,
                     label.empty() ? "" : fmt::format(" [label=\"{}\"]", label));
  }
  s += "}\n";
  return s;
}

std::string to_mermaid(const Topology& t) {
  auto decl = [&](const Node& n) {
    std::string label = node_label(n);
    std::string br;
    for (size_t i = 0; i < label.size(); ++i) {
      if (label[i] == '\\' && i + 1 < label.size() && label[i + 1] == 'n') {
        br += "<br/>";
        ++i;
      } else {
        br += label[i];
      }
    }
    switch (n.kind) {
      case NodeKind::spine:
      case NodeKind::rack_switch: return fmt::format("{}{{{{\"{}\"}}}}", mermaid_id(n.name), br);
      case NodeKind::server: return fmt::format("{}[(\"{}\")]", mermaid_id(n.name), br);
      case NodeKind::host: return fmt::format("{}[\"{}\"]", mermaid_id(n.name), br);
    }
    return mermaid_id(n.name);
  };
  std::string s = "flowchart TB\n";
  for (const auto& n : t.nodes)
    if (n.rack < 0) s += "  " + decl(n) + "\n";
  for (size_t r = 0; r < t.racks.size(); ++r) {
    s += fmt::format("  subgraph {}[\"rack {} ({})\"]\n", mermaid_id("rack_" + t.racks[r].name),
                     t.racks[r].name, t.racks[r].block4.to_string());
    for (const auto& n : t.nodes)
      if (n.rack == static_cast<int>(r)) s += "    " + decl(n) + "\n";
    s += "  end\n";
  }
  for (const auto& e : edges(t)) {
    std::string label = edge_label(e);
    s += fmt::format("  {} ---{} {}\n", mermaid_id(t.nodes[e.a].name),
                     label.empty() ? "" : fmt::format("|\"{}\"|", label), mermaid_id(t.nodes[e.b].name));
  }
  return s;
}

}  // namespace lanes::cli
