#pragma once
// What a scenario may change of the topology it runs on (at <topology> and
// per <phase>), as Overrides that the topology loader takes: one table of the attributes, the topology element each is
// set on, and the bounds of their values. The topology loader checks the
// same attributes against the same bounds, and lanes-bfdd its interval.

#include <map>
#include <string>
#include <vector>

namespace lanes::testbed {

struct Bounds {
  int lo = 0, hi = 0;
};
inline constexpr Bounds kNicsBounds{1, 16};            // NICs per host
inline constexpr Bounds kHoldTimeBounds{3, 65535};     // BGP hold time, seconds
inline constexpr Bounds kBfdIntervalBounds{0, 60000};  // BFD interval, ms (0: no BFD)

struct OverrideAttr {
  enum class Kind { choice, integer, rate };
  const char* name;     // "bfd-interval"
  const char* element;  // the topology elements it is set on: "job", "host", "rack", "rack|spine"
  Kind kind;
  const char* choices = "";  // a choice's values, '|'-separated
  Bounds bounds{};           // an integer's
};
const std::vector<OverrideAttr>& override_attrs();
// A's element list names ELEMENT ("rack" in "rack|spine").
bool element_takes(const OverrideAttr& a, const std::string& element);

// attribute name -> value, as a scenario gives them
using Overrides = std::map<std::string, std::string>;

// "" when VALUE is one that A takes; otherwise what A expects
// ("expected one of single|ecmp|bpf|bpf-numa|bind|active-backup").
std::string override_problem(const OverrideAttr& a, const std::string& value);

// A topology with overrides is loaded with them (load_topology_text's OV):
// the loader sets each on every element it belongs to (a job's on each
// <job>, a host's on each <host>, a rack's on each <rack>) in the document
// it parsed, before it expands it into the model. Not a patch of a model:
// nics= changes how many NICs, links and addresses each host has.

}  // namespace lanes::testbed
