// unit tier: the combination matrix's covering arrays (lanes matrix).

#include <algorithm>
#include <catch2/catch.hpp>
#include <set>

#include "lanes/scenarios/matrix.hpp"
#include "lanes/scenarios/workload.hpp"

using namespace lanes::scenarios;

TEST_CASE("a covering array covers every pair of values, the same for the same seed", "[unit]") {
  for (const std::vector<size_t>& levels : std::vector<std::vector<size_t>>{{8, 3, 4, 2, 4}, {2, 2, 2}, {5, 5, 5, 5}, {3, 7}, {4}}) {
    for (uint64_t seed : {1u, 2u, 99u}) {
      auto rows = matrix::covering_array(levels, seed);
      CHECK(matrix::uncovered_pairs(levels, rows) == 0);
      for (const auto& r : rows) {
        REQUIRE(r.size() == levels.size());
        for (size_t i = 0; i < r.size(); ++i) CHECK(r[i] < levels[i]);
      }
      CHECK(matrix::covering_array(levels, seed) == rows);  // reproducible
      // no fewer than the two largest dimensions' product: every pair of theirs is a case
      std::vector<size_t> l = levels;
      std::sort(l.rbegin(), l.rend());
      CHECK(rows.size() >= l[0] * (l.size() > 1 ? l[1] : 1));
    }
  }
  // the check itself finds a missing pair
  CHECK(matrix::uncovered_pairs({2, 2}, {{0, 0}, {1, 1}}) == 2);
}

TEST_CASE("the matrix: every workload type, family, egress, VIP mode and NIC count, pairwise, each a valid scenario",
          "[unit]") {
  auto cs = matrix::cases(1);
  // 9 workload types x 7 egress modes at the least; the full product is 1 512
  CHECK(cs.size() >= 63);
  CHECK(cs.size() <= 75);
  std::set<std::pair<std::string, std::string>> workload_family, egress_vip, workload_egress;
  std::set<std::pair<std::string, int>> workload_nics;
  for (const auto& c : cs) {
    workload_family.insert({c.workload, c.family});
    egress_vip.insert({c.egress, c.vip});
    workload_nics.insert({c.workload, c.nics});
    workload_egress.insert({c.workload, c.egress});
  }
  CHECK(workload_egress.size() == 9 * 7);  // every workload on every road
  CHECK(workload_family.size() == 9 * 3);
  CHECK(egress_vip.size() == 7 * 2);
  CHECK(workload_nics.size() == 9 * 4);
  // every workload type the registry has is in it, but the user's own command (exec: the matrix has none)
  std::set<std::string> types;
  for (const auto& c : cs) types.insert(c.workload);
  for (const auto* w : workloads()) CHECK(types.count(w->type()) == (std::string(w->type()) == "exec" ? 0u : 1u));
  CHECK(matrix::describe(cs).find("c01") != std::string::npos);
}
