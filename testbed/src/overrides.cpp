#include "lanes/testbed/overrides.hpp"

#include <fmt/format.h>


#include "lanes/testbed/topology_loader.hpp"

namespace lanes::testbed {

const std::vector<OverrideAttr>& override_attrs() {
  using K = OverrideAttr::Kind;
  static const std::vector<OverrideAttr> a = {
      {"egress", "job", K::choice, "single|ecmp|bpf|bpf-numa|bind|active-backup|mptcp"},
      {"vip", "job", K::choice, "per-nic|add-path"},
      {"family", "job", K::choice, "dual|ipv4|ipv6"},
      {"injector", "job", K::choice, "lanes|exabgp|bird"},
      {"nics", "host", K::integer, "", kNicsBounds},
      {"rate", "host", K::rate},
      {"hold-time", "rack", K::integer, "", kHoldTimeBounds},
      {"bfd-interval", "rack", K::integer, "", kBfdIntervalBounds},
      {"switch-stack", "rack|spine", K::choice, "gobgp|frr"},
      {"impair-engine", "topology", K::choice, "auto|netem|lanes"},
  };
  return a;
}

bool element_takes(const OverrideAttr& a, const std::string& element) {
  return ("|" + std::string(a.element) + "|").find("|" + element + "|") != std::string::npos;
}

std::string override_problem(const OverrideAttr& a, const std::string& value) {
  switch (a.kind) {
    case OverrideAttr::Kind::choice:
      if (("|" + std::string(a.choices) + "|").find("|" + value + "|") != std::string::npos) return "";
      return fmt::format("expected one of {}", a.choices);
    case OverrideAttr::Kind::rate: {
      uint64_t bps = 0;
      if (parse_rate(value, bps)) return "";
      return "expected a rate like 500mbit, 1gbit or off";
    }
    case OverrideAttr::Kind::integer: {
      bool ok = false;
      int x = 0;
      try {
        size_t used = 0;
        x = std::stoi(value, &used);
        ok = used == value.size();
      } catch (const std::exception&) {
      }
      if (ok && x >= a.bounds.lo && x <= a.bounds.hi) return "";
      return fmt::format("expected a whole number from {} to {}", a.bounds.lo, a.bounds.hi);
    }
  }
  return "";
}

}  // namespace lanes::testbed
