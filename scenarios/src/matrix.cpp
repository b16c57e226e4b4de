#include "lanes/scenarios/matrix.hpp"
#include "lanes/scenarios/workload.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

namespace lanes::scenarios::matrix {

namespace {

// Every pair of values of dimensions i < j, as a flat index.
struct Pairs {
  explicit Pairs(const std::vector<size_t>& levels) : levels_(levels) {
    for (size_t i = 0; i < levels.size(); ++i)
      for (size_t j = i + 1; j < levels.size(); ++j) {
        base_[{i, j}] = count_;
        count_ += levels[i] * levels[j];
      }
  }
  size_t index(size_t i, size_t vi, size_t j, size_t vj) const {
    if (i > j) std::swap(i, j), std::swap(vi, vj);
    return base_.at({i, j}) + vi * levels_[j] + vj;
  }
  size_t count() const { return count_; }

  std::vector<size_t> levels_;
  std::map<std::pair<size_t, size_t>, size_t> base_;
  size_t count_ = 0;
};

// The pairs ROW covers that COVERED does not, counting only the
// dimensions already set (SET[i]).
size_t gain(const Pairs& p, const std::vector<bool>& covered, const std::vector<size_t>& row,
            const std::vector<bool>& set, size_t dim, size_t value) {
  size_t g = 0;
  for (size_t k = 0; k < row.size(); ++k)
    if (k != dim && set[k] && !covered[p.index(dim, value, k, row[k])]) ++g;
  return g;
}

}  // namespace

std::vector<std::vector<size_t>> covering_array(const std::vector<size_t>& levels, uint64_t seed) {
  const size_t n = levels.size();
  if (n == 0) return {};
  if (n == 1) {
    std::vector<std::vector<size_t>> rows;
    for (size_t v = 0; v < levels[0]; ++v) rows.push_back({v});
    return rows;
  }
  Pairs pairs(levels);
  std::vector<bool> covered(pairs.count(), false);
  size_t left = pairs.count();
  std::mt19937_64 rng(seed);
  std::vector<std::vector<size_t>> rows;
  constexpr int kCandidates = 40;
  while (left > 0) {
    // an uncovered pair to start from: the first one, so each case covers at least it
    size_t first = static_cast<size_t>(std::find(covered.begin(), covered.end(), false) - covered.begin());
    size_t di = 0, dj = 1, vi = 0, vj = 0;
    for (size_t i = 0; i < n; ++i)
      for (size_t j = i + 1; j < n; ++j) {
        size_t b = pairs.index(i, 0, j, 0);
        if (first >= b && first < b + levels[i] * levels[j]) di = i, dj = j, vi = (first - b) / levels[j], vj = (first - b) % levels[j];
      }
    std::vector<size_t> best;
    size_t best_gain = 0;
    for (int c = 0; c < kCandidates; ++c) {
      std::vector<size_t> row(n, 0);
      std::vector<bool> set(n, false);
      row[di] = vi, row[dj] = vj, set[di] = set[dj] = true;
      std::vector<size_t> order;
      for (size_t k = 0; k < n; ++k)
        if (!set[k]) order.push_back(k);
      std::shuffle(order.begin(), order.end(), rng);
      for (size_t k : order) {
        // the value that covers the most new pairs with what is set; ties at random
        std::vector<size_t> vals(levels[k]);
        for (size_t v = 0; v < levels[k]; ++v) vals[v] = v;
        std::shuffle(vals.begin(), vals.end(), rng);
        size_t pick = vals[0], most = 0;
        for (size_t v : vals)
          if (size_t g = gain(pairs, covered, row, set, k, v); g > most) most = g, pick = v;
        row[k] = pick;
        set[k] = true;
      }
      size_t g = 0;
      for (size_t i = 0; i < n; ++i)
        for (size_t j = i + 1; j < n; ++j) g += !covered[pairs.index(i, row[i], j, row[j])];
      if (best.empty() || g > best_gain) best = row, best_gain = g;
    }
    for (size_t i = 0; i < n; ++i)
      for (size_t j = i + 1; j < n; ++j) {
        size_t x = pairs.index(i, best[i], j, best[j]);
        if (!covered[x]) covered[x] = true, --left;
      }
    rows.push_back(best);
  }
  return rows;
}

size_t uncovered_pairs(const std::vector<size_t>& levels, const std::vector<std::vector<size_t>>& rows) {
  if (levels.size() < 2) return 0;
  Pairs pairs(levels);
  std::vector<bool> covered(pairs.count(), false);
  for (const auto& r : rows)
    for (size_t i = 0; i < levels.size(); ++i)
      for (size_t j = i + 1; j < levels.size(); ++j) covered[pairs.index(i, r.at(i), j, r.at(j))] = true;
  return static_cast<size_t>(std::count(covered.begin(), covered.end(), false));
}

const std::vector<Dimension>& dimensions() {
  static const std::vector<Dimension> d = {
      {"workload",
       [] {
         std::vector<std::string> types;  // every registered type that has a matrix run
         for (const auto* w : workloads())
           if (!w->matrix_steps().empty()) types.push_back(w->type());
         return types;
       }()},
      {"family", {"dual", "ipv4", "ipv6"}},
      {"egress", {"single", "ecmp", "bpf", "bpf-numa", "active-backup", "bind", "mptcp"}},
      {"vip", {"per-nic", "add-path"}},
      {"nics", {"1", "2", "4", "8"}},
  };
  return d;
}

std::vector<Case> cases(uint64_t seed) {
  std::vector<size_t> levels;
  for (const auto& d : dimensions()) levels.push_back(d.values.size());
  std::vector<Case> out;
  for (const auto& r : covering_array(levels, seed)) {
    const auto& d = dimensions();
    Case c;
    c.name = fmt::format("c{:02}", out.size() + 1);
    c.workload = d[0].values[r[0]];
    c.family = d[1].values[r[1]];
    c.egress = d[2].values[r[2]];
    c.vip = d[3].values[r[3]];
    c.nics = std::stoi(d[4].values[r[4]]);
    out.push_back(c);
  }
  return out;
}

std::string topology_xml() {
  return R"(<?xml version="1.0"?>
<!-- The combination matrix's topology (lanes matrix): one rack, two job
     hosts, a storage server; each case overrides the job and the NICs. -->
<topology name="matrix">
  <rack name="r1">
    <host name="h" count="2" nics="4" rate="200mbit">
      <job name="job"/>
    </host>
    <server name="storage" role="storage"/>
  </rack>
</topology>
)";
}

std::string scenario_xml(const Case& c, const std::string& topology_file) {
  const Workload* plugin = find_workload(c.workload);
  bool verified = plugin->verifies_bytes();
  std::string w = plugin->matrix_steps();
  std::string asserts = verified ? R"(  <assert type="connection-errors" workload="w" phase="p"/>
  <assert type="bytes-verified" workload="w" phase="p"/>
)"
                                 : R"(  <assert type="blackout" workload="w" phase="p" max="500ms"/>
)";
  return fmt::format(R"X(<?xml version="1.0"?>
<scenario name="matrix-{0}" description="{1} with {2} NICs, family {3}, egress {4}, vip {5}">
  <topology file="{6}"/>
  <phase name="p" nics="{2}" egress="{4}" vip="{5}" family="{3}">
    <converge/>
    {7}
  </phase>
{8}</scenario>
)X",
                     c.name, c.workload, c.nics, c.family, c.egress, c.vip, topology_file, w, asserts);
}

std::string suite_xml(const std::vector<Case>& cases, uint64_t seed) {
  std::string includes;
  for (const auto& c : cases) includes += fmt::format("  <include file=\"{}.xml\"/>\n", c.name);
  return fmt::format(R"X(<?xml version="1.0"?>
<!-- Generated by lanes matrix --seed {0}: every workload type x family x
     egress x VIP mode x NIC count, covered pairwise ({1} cases). Each case a
     short run of its own: no connection error, every byte verified (a
     probe: no gap over 500 ms). -->
<suite name="matrix" description="every workload in every family, egress, VIP mode and NIC count, pairwise ({1} cases, seed {0})">
{2}</suite>
)X",
                     seed, cases.size(), includes);
}

std::string describe(const std::vector<Case>& cases) {
  std::string out = fmt::format("{:<4} {:<19} {:<6} {:<9} {:<9} {}\n", "case", "workload", "family", "egress", "vip", "nics");
  for (const auto& c : cases)
    out += fmt::format("{:<4} {:<19} {:<6} {:<9} {:<9} {}\n", c.name, c.workload, c.family, c.egress, c.vip, c.nics);
  return out;
}

}  // namespace lanes::scenarios::matrix
