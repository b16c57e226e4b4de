// The FIB agent's RIB following, without gobgpd: every stale / restart /
// reconcile case the agent has met, driven with events and a clock.

#include <catch2/catch.hpp>

#include "fake_fib.hpp"
#include "lanes/switches/gobgp_client.hpp"
#include "lanes/switches/rib_follower.hpp"

using namespace lanes::testbed;
using namespace lanes::switches;
using lanes::test::FakeFib;
using lanes::test::four_nic_config;
using lanes::test::kH1;
using std::chrono::milliseconds;
using Clock = RibFollower::Clock;

namespace {

const std::vector<std::string> kH2 = {"198.19.1.4", "198.19.1.5", "198.19.1.6", "198.19.1.7"};

struct Rig {
  FakeFib k;
  FibAgent agent{four_nic_config(), k};
  bool started = agent.start().ok();
  Clock::time_point t = Clock::now();
  RibFollower f{agent, RibFollower::Timing{}, {}, false, t};
  Rig() { REQUIRE(started); }
  void advance(milliseconds d) {
    t += d;
    f.tick(t);
  }
  void up(const std::vector<std::string>& peers) {
    for (const auto& p : peers) f.peer(p, kBgpEstablished, t);
  }
  // h1's four sessions up with its task IP, then gobgpd gone and a fresh
  // one connected with an empty table
  void h1_up_then_gobgpd_restarted() {
    f.connected(t);
    up(kH1);
    f.table({{"198.19.0.1/32", kH1}}, true, t);
    f.lost(t);
    f.connected(t);
    f.table({}, true, t);
  }
  size_t members(const std::string& prefix) {
    auto it = k.routes_.find(prefix);
    return it == k.routes_.end() ? 0 : k.groups[it->second].size();
  }
};

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("rib follower: the table, then changes, then a withdrawal", "[unit]") {
  Rig r;
  r.f.connected(r.t);
  r.up(cat(kH1, kH2));
  r.f.table({{"198.19.0.1/32", kH1}, {"198.19.0.2/32", kH2}}, true, r.t);
  CHECK(r.members("198.19.0.1/32") == 4);
  CHECK(r.members("198.19.0.2/32") == 4);
  r.f.table({{"198.19.0.1/32", {"198.19.1.0", "198.19.1.1"}}}, false, r.t);
  CHECK(r.members("198.19.0.1/32") == 2);
  r.f.table({{"198.19.0.2/32", {}}}, false, r.t);
  CHECK(r.members("198.19.0.2/32") == 0);
  CHECK(r.f.events() == 2);
  CHECK(r.f.rib().size() == 1);
}

TEST_CASE("rib follower: gobgpd lost keeps every route until its sessions are back, then reconciles", "[unit]") {
  Rig r;
  r.f.connected(r.t);
  r.up(cat(kH1, kH2));
  r.f.table({{"198.19.0.1/32", kH1}, {"198.19.0.2/32", kH2}}, true, r.t);
  r.f.lost(r.t);
  CHECK(r.agent.stale());
  CHECK(r.f.losses() == 1);
  // a new gobgpd: its sessions return one by one, the groups do not shrink
  r.advance(milliseconds(500));
  r.f.connected(r.t);
  r.f.table({}, true, r.t);
  r.up({"198.19.1.0"});
  r.f.table({{"198.19.0.1/32", {"198.19.1.0"}}}, false, r.t);
  r.advance(milliseconds(100));
  CHECK(r.members("198.19.0.1/32") == 4);
  CHECK(r.members("198.19.0.2/32") == 4);
  CHECK(r.f.waiting_for(r.t).size() == 7);
  r.up({"198.19.1.1", "198.19.1.2", "198.19.1.3"});
  r.f.table({{"198.19.0.1/32", kH1}}, false, r.t);
  r.up(kH2);
  r.f.table({{"198.19.0.2/32", {"198.19.1.4", "198.19.1.5"}}}, false, r.t);
  // h2's other two sessions announce nothing: they count once settled
  r.advance(milliseconds(1900));
  CHECK(r.agent.stale());
  r.advance(milliseconds(200));  // settled: the reconcile is due 300 ms later
  CHECK(r.agent.stale());
  r.advance(milliseconds(300));
  CHECK_FALSE(r.agent.stale());
  CHECK(r.members("198.19.0.1/32") == 4);
  CHECK(r.members("198.19.0.2/32") == 2);  // what the new RIB holds
}

TEST_CASE("rib follower: a session that came up just before gobgpd died is waited for too", "[unit]") {
  Rig r;
  r.f.connected(r.t);
  r.up({"198.19.1.0", "198.19.1.1", "198.19.1.2"});
  r.f.table({{"198.19.0.1/32", {"198.19.1.0", "198.19.1.1", "198.19.1.2"}}}, true, r.t);
  r.advance(milliseconds(3000));
  // the fourth comes up and announces; gobgpd is killed at once
  r.up({"198.19.1.3"});
  r.f.table({{"198.19.0.1/32", kH1}}, false, r.t);
  r.f.lost(r.t);
  r.f.connected(r.t);
  r.f.table({}, true, r.t);
  r.up({"198.19.1.0", "198.19.1.1", "198.19.1.2"});
  r.f.table({{"198.19.0.1/32", {"198.19.1.0", "198.19.1.1", "198.19.1.2"}}}, false, r.t);
  r.advance(milliseconds(1000));
  CHECK(r.f.waiting_for(r.t) == std::set<std::string>{"198.19.1.3"});
  CHECK(r.members("198.19.0.1/32") == 4);
  r.up({"198.19.1.3"});
  r.f.table({{"198.19.0.1/32", kH1}}, false, r.t);
  r.advance(milliseconds(10));
  r.advance(milliseconds(300));
  CHECK_FALSE(r.agent.stale());
  CHECK(r.members("198.19.0.1/32") == 4);
}

TEST_CASE("rib follower: a restarted agent keeps the routes it found until the sessions it knew are back", "[unit]") {
  FakeFib k;
  {
    FibAgent before(four_nic_config(), k);
    REQUIRE(before.start().ok());
    before.update("198.19.0.1/32", kH1);
    before.update("198.19.0.2/32", kH2);
  }
  FibAgent agent(four_nic_config(), k);
  REQUIRE(agent.start().ok());
  auto t = Clock::now();
  RibFollower f(agent, {}, {kH1.begin(), kH1.end()}, true, t);
  CHECK(agent.stale());
  f.connected(t);
  f.table({{"198.19.0.1/32", {"198.19.1.0"}}}, true, t);  // gobgpd still learning
  for (const auto& p : kH1) f.peer(p, kBgpEstablished, t);
  CHECK(agent.members("198.19.0.2/32").size() == 4);      // not dropped while stale
  f.table({{"198.19.0.1/32", kH1}}, false, t);
  f.tick(t);
  f.tick(t + milliseconds(300));
  CHECK_FALSE(agent.stale());
  CHECK(agent.members("198.19.0.1/32").size() == 4);
  CHECK(agent.members("198.19.0.2/32").empty());  // gone from the RIB: removed at the reconcile
}

TEST_CASE("rib follower: sessions that never return end the stale state at the timeout", "[unit]") {
  Rig r;
  r.h1_up_then_gobgpd_restarted();
  r.advance(milliseconds(44'000));
  CHECK(r.agent.stale());
  CHECK(r.members("198.19.0.1/32") == 4);
  r.advance(milliseconds(1'100));
  r.advance(milliseconds(300));
  CHECK_FALSE(r.agent.stale());
  CHECK(r.members("198.19.0.1/32") == 0);
}

TEST_CASE("rib follower: a session that drops while stale is waited for again", "[unit]") {
  Rig r;
  r.h1_up_then_gobgpd_restarted();
  r.up(kH1);
  r.f.peer("198.19.1.2", 3, r.t);  // Active again before it settled
  r.advance(milliseconds(2500));
  CHECK(r.f.waiting_for(r.t) == std::set<std::string>{"198.19.1.2"});
  CHECK(r.agent.stale());
}

TEST_CASE("queued table changes reach the kernel once per prefix, in order against session events", "[unit]") {
  using Ev = GobgpWatch::Event;
  auto change = [](PathSets p) {
    Ev e;
    e.paths = std::move(p);
    return e;
  };
  auto peer = [](const std::string& n) {
    Ev e;
    e.kind = Ev::Kind::peer;
    e.neighbor = n;
    e.state = kBgpEstablished;
    return e;
  };
  Ev snap = change({{"198.19.0.9/32", {"198.19.1.9"}}});
  snap.snapshot = true;
  // h1's next hops one at a time, as its sessions come up, around a session event
  std::vector<Ev> q = {snap,
                       change({{"198.19.0.1/32", {kH1[0]}}}),
                       change({{"198.19.0.1/32", {kH1[0], kH1[1]}}, {"198.19.0.2/32", {kH2[0]}}}),
                       change({{"198.19.0.1/32", {kH1[0], kH1[1], kH1[2]}}}),
                       peer(kH1[3]),
                       change({{"198.19.0.1/32", {kH1[0], kH1[1], kH1[2], kH1[3]}}}),
                       change({{"198.19.0.2/32", {}}})};
  auto out = coalesce_tables(q);
  REQUIRE(out.size() == 4);
  CHECK(out[0].snapshot);  // a snapshot is never merged: it replaces the table
  CHECK(out[1].kind == Ev::Kind::table);
  CHECK(out[1].paths == PathSets{{"198.19.0.1/32", {kH1[0], kH1[1], kH1[2]}}, {"198.19.0.2/32", {kH2[0]}}});
  CHECK(out[2].kind == Ev::Kind::peer);
  CHECK(out[3].paths == PathSets{{"198.19.0.1/32", kH1}, {"198.19.0.2/32", {}}});

  // the kernel ends where the changes one by one leave it, in fewer operations
  auto apply = [](const std::vector<Ev>& events, Rig& r) {
    r.f.connected(r.t);
    for (const auto& e : events)
      if (e.kind == Ev::Kind::table)
        r.f.table(e.paths, e.snapshot, r.t);
      else
        r.f.peer(e.neighbor, e.state, r.t);
  };
  Rig one, merged;
  apply(q, one);
  apply(out, merged);
  CHECK(merged.k.routes_.size() == one.k.routes_.size());
  CHECK(merged.members("198.19.0.1/32") == 4);
  CHECK(one.members("198.19.0.1/32") == 4);
  CHECK(merged.members("198.19.0.2/32") == 0);
  CHECK(merged.agent.kernel_ops() < one.agent.kernel_ops());
}
