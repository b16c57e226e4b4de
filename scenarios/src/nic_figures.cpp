#include "nic_figures.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "lanes/scenarios/runner.hpp"
#include "lanes/scenarios/steady.hpp"

namespace lanes::scenarios {

void add_nic_figures(reports::WorkloadResult& w, const Workload& plugin, const std::vector<reports::Series>& series,
                     const testbed::Topology& topo) {
  if (!*plugin.nic_direction()) return;
  std::set<std::string> hosts;
  if (!w.host.empty()) hosts.insert(w.host);
  else if (w.figures.contains("hosts") && w.figures["hosts"].is_array())
    for (const auto& h : w.figures["hosts"]) hosts.insert(h.get<std::string>());
  if (hosts.empty()) return;
  std::vector<const testbed::Node*> nodes;
  for (const auto& h : hosts) {
    int i = topo.find_node(h);
    if (i < 0 || !topo.nodes.at(static_cast<size_t>(i)).job) return;
    nodes.push_back(&topo.nodes.at(static_cast<size_t>(i)));
  }
  // the direction the plug-in names, or the step's (an exec's direction=)
  const std::string dir = w.figures.value("nic_direction", std::string(plugin.nic_direction()));
  double dt = 0;
  for (const auto& s : series)
    if (hosts.count(s.host)) dt = s.interval_s;
  if (dt <= 0) return;  // none of its NICs was sampled
  // the samples within the workload: sample i covers (i·dt, (i+1)·dt]
  size_t first = static_cast<size_t>(std::max(0.0, std::floor(w.start_s / dt)));
  size_t last = static_cast<size_t>(std::max(0.0, std::ceil(w.end_s / dt)));  // one past
  std::vector<double> sums, total(last > first ? last - first : 0, 0.0);
  for (const auto& s : series) {
    if (!hosts.count(s.host) || s.direction != dir || s.nic < 0) continue;
    size_t k = static_cast<size_t>(s.nic);
    if (sums.size() <= k) sums.resize(k + 1, 0.0);
    sums[k] += window_mean(s, w.start_s, w.end_s + dt);
    for (size_t i = first; i < last && i < s.values.size(); ++i) total[i - first] += s.values[i];
  }
  double sum = 0;
  for (double x : sums) sum += x;
  w.nic_share.clear();
  if (sum > 0)
    for (double x : sums) w.nic_share.push_back(100.0 * x / sum);
  if (!plugin.wire_rate()) return;
  SteadyWindow steady = steady_window(total);
  double line = 0;
  for (const auto* n : nodes) line += host_line_bps(*n, dir);
  w.figures["wire_gbps"] = steady.rate;
  w.figures["throughput_gbps"] = steady.rate;
  w.figures["steady_from_s"] = static_cast<double>(first + steady.first) * dt;
  w.figures["steady_to_s"] = static_cast<double>(first + steady.last + 1) * dt;
  w.figures["steady_found"] = steady.found;
  if (line > 0) {
    w.figures["line_gbps"] = line / 1e9;
    w.figures["line_share"] = line_share(steady.rate * 1e9, line, w.figures.value("family", "") == "ipv6");
  }
}

}  // namespace lanes::scenarios
