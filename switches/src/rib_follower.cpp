#include "lanes/switches/rib_follower.hpp"

#include <algorithm>

#include "lanes/testbed/log.hpp"

namespace lanes::switches {

using namespace lanes::testbed;

RibFollower::RibFollower(FibAgent& agent, Timing timing, std::set<std::string> expected, bool restarted,
                         Clock::time_point now)
    : agent_(agent), timing_(timing), expected_(std::move(expected)), stale_since_(now) {
  // a restarted agent keeps what is there until the RIB is read
  if (restarted) agent_.set_stale(true);
}

void RibFollower::connected(Clock::time_point) {
  connected_ = true;
  snapshot_pending_ = true;
  up_.clear();
  neighbors_.clear();
  reconcile_at_.reset();
}

void RibFollower::lost(Clock::time_point now) {
  if (!connected_) return;
  // whom the returning gobgpd must give back before the reconcile: the
  // sessions that were back, and every neighbor whose path is in the RIB
  // (one that came up a moment ago has its paths in already)
  auto back = settled(now);
  if (!back.empty()) expected_ = back;
  for (const auto& n : neighbors_)
    if (has_path_from(n)) expected_.insert(n);
  connected_ = false;
  snapshot_pending_ = false;
  reconcile_at_.reset();
  warned_timeout_ = false;
  ++losses_;
  agent_.set_stale(true);
  stale_since_ = now;
  log::warn("lost gobgpd; routes kept as stale until its {} sessions are back", expected_.size());
}

void RibFollower::table(const PathSets& paths, bool snapshot, Clock::time_point) {
  if (snapshot || snapshot_pending_) {  // the whole RIB
    snapshot_pending_ = false;
    rib_ = paths;
    std::erase_if(rib_, [](const auto& kv) { return kv.second.empty(); });
    if (agent_.stale()) {
      for (const auto& [prefix, nhs] : rib_) agent_.update(prefix, nhs);  // adds only while stale
      log::info("connected to gobgpd; waiting for {} sessions before reconciling", expected_.size());
    } else {
      agent_.reconcile(rib_);
      log::info("connected to gobgpd; {} prefixes in the RIB", rib_.size());
    }
    return;
  }
  for (const auto& [prefix, nhs] : paths) {
    if (nhs.empty())
      rib_.erase(prefix);
    else
      rib_[prefix] = nhs;
    agent_.update(prefix, nhs);
    ++events_;
  }
}

void RibFollower::peer(const std::string& neighbor, int state, Clock::time_point now) {
  neighbors_.insert(neighbor);
  if (state == kBgpEstablished)
    up_.try_emplace(neighbor, now);
  else
    up_.erase(neighbor);
}

bool RibFollower::has_path_from(const std::string& neighbor) const {
  for (const auto& [prefix, nhs] : rib_)
    if (std::find(nhs.begin(), nhs.end(), neighbor) != nhs.end()) return true;
  return false;
}

std::set<std::string> RibFollower::settled(Clock::time_point now) const {
  std::set<std::string> out;
  for (const auto& [n, since] : up_)
    if (now - since >= timing_.settle_time || has_path_from(n)) out.insert(n);
  return out;
}

std::set<std::string> RibFollower::waiting_for(Clock::time_point now) const {
  std::set<std::string> out;
  if (!agent_.stale()) return out;
  auto back = settled(now);
  std::set_difference(expected_.begin(), expected_.end(), back.begin(), back.end(), std::inserter(out, out.end()));
  return out;
}

std::optional<RibFollower::Clock::time_point> RibFollower::tick(Clock::time_point now) {
  if (!connected_ || snapshot_pending_ || !agent_.stale()) return std::nullopt;
  if (reconcile_at_) {
    if (now < *reconcile_at_) return reconcile_at_;
    reconcile_at_.reset();
    agent_.reconcile(rib_);
    log::info("reconciled with gobgpd's RIB: {} prefixes", rib_.size());
    return std::nullopt;
  }
  bool back = waiting_for(now).empty();
  bool timed_out = now - stale_since_ > timing_.stale_timeout;
  if (back || timed_out) {
    if (!back && !warned_timeout_) log::warn("stale timeout: reconciling without every session back");
    warned_timeout_ = true;
    reconcile_at_ = now + timing_.reconcile_delay;
    return reconcile_at_;
  }
  // next: a session settling, or the timeout
  auto next = stale_since_ + timing_.stale_timeout;
  for (const auto& [n, since] : up_)
    if (expected_.count(n)) next = std::min(next, since + timing_.settle_time);
  return std::max(next, now);
}

}  // namespace lanes::switches
