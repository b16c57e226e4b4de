#pragma once
// Topology files (XML) → resolved Topology. Every problem found is reported
// as "file:line: message"; loading never touches the kernel.

#include <stdexcept>
#include <chrono>
#include <string>
#include <vector>

#include "lanes/testbed/model.hpp"
#include "lanes/testbed/overrides.hpp"

namespace lanes::testbed {

// Bad user input: a topology, scenario or command line that cannot be used.
// `what()` holds every problem, one "file:line: message" per line.
class InputError : public std::runtime_error {
 public:
  explicit InputError(std::vector<std::string> problems);
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  std::vector<std::string> problems_;
};

// Reads and resolves the topology in PATH, with a scenario's overrides OV
// set on the elements they belong to (overrides.hpp). Throws InputError.
Topology load_topology(const std::string& path, const Overrides& ov = {});
// Same, from text already in memory; FILE names it in messages.
Topology load_topology_text(const std::string& text, const std::string& file, const Overrides& ov = {});

// "500mbit", "1gbit", "2.5G", "off" → bits per second (0 = unshaped).
bool parse_rate(const std::string& text, uint64_t& bps);
std::string format_rate(uint64_t bps);
// "1.5s", "250ms", "2m", "3" (seconds) → milliseconds; at most a day.
bool parse_duration(const std::string& s, std::chrono::milliseconds& out);
// "1.5s" → 1.5 and "s"; false if S does not start with a number.
bool number_and_unit(const std::string& s, double& v, std::string& unit);

}  // namespace lanes::testbed
