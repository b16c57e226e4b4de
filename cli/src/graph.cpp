#include "lanes/cli/graph.hpp"

#include <fmt/format.h>

#include <map>

#include "lanes/testbed/topology_loader.hpp"

namespace lanes::cli {

using namespace lanes::testbed;
using testbed::Placement;
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

// Which machine builds node N (0 without a placement).
int machine_of(const Placement* p, int n) { return p ? p->machine_of[static_cast<size_t>(n)] : 0; }

bool crosses(const Placement* p, const Edge& e) { return p && machine_of(p, e.a) != machine_of(p, e.b); }

}  // namespace

std::string to_dot(const Topology& t, const Placement* p) {
  std::string s = fmt::format("graph \"{}\" {{\n  rankdir=TB;\n  node [fontname=\"Helvetica\"];\n", t.name);
  int machines = p ? p->machines : 1;
  for (int m = 0; m < machines; ++m) {
    std::string in = p ? "    " : "  ";
    if (p) s += fmt::format("  subgraph \"cluster_machine_{}\" {{\n    label=\"machine {}\";\n    style=dashed;\n", m, m);
    for (size_t i = 0; i < t.nodes.size(); ++i) {
      const Node& n = t.nodes[i];
      if (n.rack < 0 && machine_of(p, static_cast<int>(i)) == m)
        s += fmt::format("{}\"{}\" [shape={}, label=\"{}\"];\n", in, n.name, shape(n.kind), node_label(n));
    }
    for (size_t r = 0; r < t.racks.size(); ++r) {
      const Rack& rack = t.racks[r];
      if (machine_of(p, rack.switch_node) != m) continue;
      s += fmt::format("{}subgraph \"cluster_{}\" {{\n{}  label=\"rack {} ({})\";\n", in, rack.name, in, rack.name,
                       rack.block4.to_string());
      for (const auto& n : t.nodes)
        if (n.rack == static_cast<int>(r))
          s += fmt::format("{}  \"{}\" [shape={}, label=\"{}\"];\n", in, n.name, shape(n.kind), node_label(n));
      s += in + "}\n";
    }
    if (p) s += "  }\n";
  }
  for (const auto& e : edges(t)) {
    std::string label = edge_label(e);
    bool x = crosses(p, e);
    if (x) label = label.empty() ? "VXLAN" : "VXLAN " + label;
    std::string attrs = label.empty() ? "" : fmt::format("label=\"{}\"", label);
    if (x) attrs += ", style=dashed";
    s += fmt::format("  \"{}\" -- \"{}\"{};\n", t.nodes[e.a].name, t.nodes[e.b].name,
                     attrs.empty() ? "" : " [" + attrs + "]");
  }
  s += "}\n";
  return s;
}

std::string to_mermaid(const Topology& t, const Placement* p) {
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
  int machines = p ? p->machines : 1;
  for (int m = 0; m < machines; ++m) {
    std::string in = p ? "    " : "  ";
    if (p) s += fmt::format("  subgraph machine_{}[\"machine {}\"]\n", m, m);
    for (size_t i = 0; i < t.nodes.size(); ++i)
      if (t.nodes[i].rack < 0 && machine_of(p, static_cast<int>(i)) == m) s += in + decl(t.nodes[i]) + "\n";
    for (size_t r = 0; r < t.racks.size(); ++r) {
      if (machine_of(p, t.racks[r].switch_node) != m) continue;
      s += fmt::format("{}subgraph {}[\"rack {} ({})\"]\n", in, mermaid_id("rack_" + t.racks[r].name), t.racks[r].name,
                       t.racks[r].block4.to_string());
      for (const auto& n : t.nodes)
        if (n.rack == static_cast<int>(r)) s += in + "  " + decl(n) + "\n";
      s += in + "end\n";
    }
    if (p) s += "  end\n";
  }
  for (const auto& e : edges(t)) {
    std::string label = edge_label(e);
    bool x = crosses(p, e);
    if (x) label = label.empty() ? "VXLAN" : "VXLAN " + label;
    s += fmt::format("  {} {}{} {}\n", mermaid_id(t.nodes[e.a].name), x ? "-.-" : "---",
                     label.empty() ? "" : fmt::format("|\"{}\"|", label), mermaid_id(t.nodes[e.b].name));
  }
  return s;
}

}  // namespace lanes::cli
