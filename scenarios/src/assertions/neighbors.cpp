#include <linux/neighbour.h>

#include <fmt/format.h>

#include "live_assertions.hpp"

namespace lanes::scenarios {

namespace tb = lanes::testbed;

const char* NeighborsPermanent::type() const { return "neighbors"; }

const Attrs& NeighborsPermanent::attrs() const {
  static const Attrs a = {{"node", Kind::node}};
  return a;
}

namespace {

std::string nud_text(uint16_t state) {
  static const std::pair<uint16_t, const char*> names[] = {
      {NUD_INCOMPLETE, "INCOMPLETE"}, {NUD_REACHABLE, "REACHABLE"}, {NUD_STALE, "STALE"}, {NUD_DELAY, "DELAY"},
      {NUD_PROBE, "PROBE"},           {NUD_FAILED, "FAILED"}};
  std::string out;
  for (const auto& [bit, name] : names)
    if (state & bit) out += (out.empty() ? "" : "|") + std::string(name);
  return out.empty() ? fmt::format("state {:#x}", state) : out;
}

}  // namespace

reports::Assertion NeighborsPermanent::check(const Step& st, LiveContext& ctx) const {
  reports::Assertion a;
  a.name = std::string(type()) + (st.has("node") ? " " + st.str("node") : "");
  a.expected = "every neighbour entry permanent: none learned through ARP or ND";
  std::vector<int> nodes;
  if (st.has("node")) nodes.push_back(ctx.topo.find_node(st.str("node")));
  else
    for (size_t i = 0; i < ctx.topo.nodes.size(); ++i) nodes.push_back(static_cast<int>(i));
  size_t permanent = 0, learned = 0, spaces = 0;
  std::vector<std::string> examples, errors;
  for (int n : nodes) {
    const auto& node = ctx.topo.nodes.at(static_cast<size_t>(n));
    for (bool job : {false, true}) {
      if (job && !node.job) continue;
      std::string where = job ? node.name + "'s job" : node.name;
      auto entries = ctx.fabric.neighbors(n, job);
      if (!entries) {
        errors.push_back(fmt::format("{}: {}", where, entries.error().what()));
        continue;
      }
      ++spaces;
      for (const auto& e : entries.value()) {
        if (!e.counted()) {
          ++permanent;
          continue;
        }
        ++learned;
        if (examples.size() < 4) examples.push_back(fmt::format("{} {} ({})", where, e.ip, nud_text(e.state)));
      }
    }
  }
  a.measured = fmt::format("{} learned, {} permanent in {} namespaces", learned, permanent, spaces);
  for (const auto& x : examples) a.measured += (x == examples.front() ? ": " : ", ") + x;
  if (!errors.empty()) a.message = "could not read: " + errors.front();
  a.passed = learned == 0 && errors.empty() && spaces > 0;
  return a;
}

}  // namespace lanes::scenarios
