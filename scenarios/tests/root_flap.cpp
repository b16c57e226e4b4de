// root tier: links that something other than lanes takes down and up (an
// operator's `ip link set ... down; ... up`, a container runtime, a
// script). Taking a device down flushes its permanent neighbours and its
// routes, and the kernel drops the next hops over it; lanes' agents must
// put back what the link needs, so the path returns as after lanes' own
// faults: every NIC's next hop in the switch's groups, both families, and
// no neighbour left for ARP or ND to find (those count against the
// kernel-wide limit every namespace shares).

#include <linux/neighbour.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>

#include "bgp_support.hpp"
#include "engine_support.hpp"
#include "lanes/hostnet/hostnet.hpp"

using namespace lanes::testbed;
using lanes::test::eventually;
using lanes::test::group_members;
using lanes::test::ScopedRun;

namespace {

constexpr auto kBgpWait = std::chrono::seconds(40);  // an injector's reconnect waits out gobgpd's idle hold

// The entries on IFNAME in NL's namespace that the kernel counts (learnt
// by ARP or ND, not put there by lanes), and how many are permanent.
std::pair<size_t, size_t> neighbours_on(Netlink& nl, int ifindex) {
  auto all = nl.neighbors();
  REQUIRE(all.ok());
  size_t counted = 0, permanent = 0;
  for (const auto& n : all.value()) {
    if (n.ifindex != ifindex || n.ip.rfind("fe80", 0) == 0) continue;
    if (n.counted()) ++counted;
    if (n.state & NUD_PERMANENT) ++permanent;
  }
  return {counted, permanent};
}

}  // namespace

TEST_CASE("a link lanes did not take down gets its path back: either end of a container link, a NIC, a switch port",
          "[root]") {
  lanes::test::require_root();
  ScopedRun run(lanes::test::topology("laptop.xml"), true, lanes::test::host_roles());
  auto& sw = run.tb().netlink(run.node("r1-tor"));
  auto members = [&] {
    return std::min(group_members(sw, "198.19.0.1/32").size(), group_members(sw, "2001:2:0:100::1/128").size());
  };
  REQUIRE(eventually([&] { return members() == 4; }, kBgpWait));
  auto job = Netns::open(lanes::hostnet::job_netns(run.id(), "h1"));
  REQUIRE(job.ok());
  auto jnl = Netlink::open_in(job.value().fd(), "h1's job");
  REQUIRE(jnl.ok());
  Netlink& host = run.tb().netlink(run.node("h1"));

  struct Flap {
    const char* what;
    Netlink* nl;
    std::string ifname;
  };
  // one device of each kind, each on its own NIC's path, one after the
  // other in one run: each must leave the run as whole as it found it
  for (const Flap& f : {Flap{"the container link's host side", &host, "jnic0"},
                        Flap{"the container link's container side", &jnl.value(), "eth1"},
                        Flap{"the host's NIC", &host, "nic2"}, Flap{"the switch port", &sw, "swp4"}}) {
    INFO(f.what << ": " << f.ifname);
    auto idx = f.nl->ifindex(f.ifname);
    REQUIRE(idx.ok());
    REQUIRE(neighbours_on(*f.nl, idx.value()).second == 2);  // lanes put both families' there
    REQUIRE(f.nl->set_link_up(idx.value(), false, f.ifname).ok());
    // the path goes (the injector's session with it)
    CHECK(eventually([&] { return members() == 3; }, kBgpWait));
    CHECK(neighbours_on(*f.nl, idx.value()).second == 0);  // taking it down flushed them
    REQUIRE(f.nl->set_link_up(idx.value(), true, f.ifname).ok());
    // and comes back, whoever took it away
    CHECK(eventually([&] { return members() == 4; }, kBgpWait));
    auto [counted, permanent] = neighbours_on(*f.nl, idx.value());
    CHECK(permanent == 2);
    CHECK(counted == 0);
    // the task IP answers in both families
    CHECK(run.run_in("storage", {"ping", "-c", "1", "-W", "2", "198.19.0.1"}) == 0);
    CHECK(run.run_in("storage", {"ping", "-c", "1", "-W", "2", "2001:2:0:100::1"}) == 0);
  }
}
