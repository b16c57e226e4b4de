#include <sys/socket.h>

#include <fmt/format.h>

#include <set>

#include "live_assertions.hpp"

namespace lanes::scenarios {

namespace tb = lanes::testbed;

const char* NoTaskRoutes::type() const { return "no-task-routes"; }

const Attrs& NoTaskRoutes::attrs() const {
  static const Attrs a = {{"node", Kind::node, true}};
  return a;
}

reports::Assertion NoTaskRoutes::check(const Step& st, LiveContext& ctx) const {
  reports::Assertion a;
  std::string n = st.str("node");
  a.name = std::string(type()) + " " + n;
  int node = ctx.topo.find_node(n);
  // on a rack switch, its own rack's per-task routes belong there
  const tb::Rack* own = nullptr;
  for (const auto& r : ctx.topo.racks)
    if (r.switch_node == node) own = &r;
  // a prefix from the task pools that is not the node's own rack's
  auto foreign = [&](const std::string& prefix, int fam) {
    std::string addr = prefix.substr(0, prefix.find('/'));
    if (fam == AF_INET) {
      auto ip = tb::parse_ip4(addr);
      return ip && tb::contains(ctx.topo.pools.task4, *ip) && !(own && tb::contains(own->block4, *ip));
    }
    auto ip = tb::parse_ip6(addr);
    return ip && tb::contains(ctx.topo.pools.task6, *ip) && !(own && tb::contains(own->block6, *ip));
  };
  auto host_route = [](const std::string& prefix, int fam) {
    auto slash = prefix.find('/');
    return slash != std::string::npos && std::stoi(prefix.substr(slash + 1)) == (fam == AF_INET ? 32 : 128);
  };
  int fib = 0, rib = 0, aggregates = 0;
  std::string example;
  for (int fam : {AF_INET, AF_INET6}) {
    if (auto routes = ctx.fabric.routes(node, fam))
      for (const auto& r : routes.value()) {
        if (r.dst.find('/') == std::string::npos || !foreign(r.dst, fam)) continue;
        if (host_route(r.dst, fam)) {
          ++fib;
          if (example.empty()) example = r.dst;
        } else {
          ++aggregates;
        }
      }
    if (auto paths = ctx.fabric.rib(node, fam, "")) {
      std::set<std::string> prefixes;
      for (const auto& p : paths.value()) prefixes.insert(p.prefix);
      for (const auto& p : prefixes)
        if (host_route(p, fam) && foreign(p, fam)) {
          ++rib;
          if (example.empty()) example = p;
        }
    }
  }
  a.expected = own ? "no other rack's /32 or /128 in the FIB or the BGP RIB"
                   : "no /32 or /128 from the task pools in the FIB or the BGP RIB";
  a.measured = fmt::format("{} in the FIB, {} in the RIB ({} task aggregates){}", fib, rib, aggregates,
                           example.empty() ? "" : ", e.g. " + example);
  a.passed = fib == 0 && rib == 0 && aggregates > 0;
  if (aggregates == 0) a.message = "no task aggregate reached this node either";
  return a;
}

}  // namespace lanes::scenarios
