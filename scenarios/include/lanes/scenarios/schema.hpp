#pragma once
// What a scenario step's attributes may hold: the loader checks every step
// against these declarations, at file:line. Step types that are plug-ins
// (live_assertion.hpp) declare their own.

#include <vector>

namespace lanes::scenarios {

// hosts/servers: comma-separated lists of job hosts/servers; rack: a rack
// (a step on every job host of it)
enum class Kind {
  text, name, integer, count, number, positive, size, duration, boolean, host, server, node, nic, hosts, servers,
  rack, choice, phase, workload, mark, timeref,
  percent,  // a probability: 1%, 0.05% (0 < p <= 100)
  delay,    // a link's delay or jitter: 5ms, 250us, 0.5ms (impair.hpp)
  rate,     // a line rate as a topology writes it: 100mbit, 1gbit
  file      // a path, relative to the scenario's file: the step holds it resolved
};

struct Attr {
  const char* name;
  Kind kind;
  bool required = false;
  const char* choices = nullptr;  // Kind::choice: "a|b|c"
};

using Attrs = std::vector<Attr>;

}  // namespace lanes::scenarios
