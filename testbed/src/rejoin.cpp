#include "lanes/testbed/rejoin.hpp"

#include <algorithm>
#include <cmath>

namespace lanes::testbed {

uint16_t rejoin_weight(const std::vector<BucketInfo>& buckets, size_t members, size_t returned,
                       uint64_t idle_timer_cs) {
  if (buckets.empty() || returned == 0 || returned >= members) return 1;
  double busy = 0;
  for (const auto& b : buckets) busy += b.idle_cs < idle_timer_cs;
  if (busy == 0 || busy == static_cast<double>(buckets.size())) return 1;
  double n = static_cast<double>(members), m = static_cast<double>(returned);
  double w = (n * static_cast<double>(buckets.size()) / busy - (n - m)) / m;
  return static_cast<uint16_t>(std::clamp(std::lround(w), 1L, 255L));
}

bool rejoin_settled(const std::vector<BucketInfo>& buckets, const std::vector<uint32_t>& others, size_t members,
                    size_t returned, uint16_t weight) {
  if (buckets.empty() || members == 0) return true;
  double total = static_cast<double>(members - returned) + static_cast<double>(returned) * weight;
  auto wants = static_cast<size_t>(std::ceil(static_cast<double>(buckets.size()) / total));
  return std::all_of(others.begin(), others.end(), [&](uint32_t nh) {
    return static_cast<size_t>(std::count_if(buckets.begin(), buckets.end(),
                                             [&](const BucketInfo& b) { return b.nh_id == nh; })) <= wants;
  });
}

bool holds_share(const std::vector<BucketInfo>& buckets, uint32_t nh, size_t members) {
  if (buckets.empty() || members == 0) return true;  // nothing to hold, or no group to read
  size_t held = 0;
  for (const auto& b : buckets) held += b.nh_id == nh;
  return held + 1 >= buckets.size() / members;
}

bool balanced(const std::vector<BucketInfo>& buckets, const std::vector<uint32_t>& members) {
  if (buckets.empty() || members.empty()) return false;
  return std::all_of(members.begin(), members.end(),
                     [&](uint32_t nh) { return holds_share(buckets, nh, members.size()); });
}

}  // namespace lanes::testbed
