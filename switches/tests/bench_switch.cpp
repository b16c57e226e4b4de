// Switch benchmark: convergence after bring-up, and how fast a resilient
// group shrinks after a NIC's carrier loss and after a BGP withdrawal.
// Prints medians; not a test (timings never fail a build).
//
// usage: lanes_bench_switch [ITERATIONS]   (root)

#include <algorithm>
#include <cstdio>

#include "bgp_support.hpp"

using namespace lanes::testbed;
using namespace lanes::switches;
using lanes::test::eventually;
using lanes::test::group_members;
using lanes::test::ScopedRun;
using lanes::test::StandIn;
using lanes::test::topology;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

size_t established(ScopedRun& run, const std::string& sw) {
  ProcessSpec spec{"gobgp", {"gobgp", "neighbor", "-j"}};
  spec.netns_fd = run.tb().netns(run.node(sw)).fd();
  spec.new_session = false;
  auto r = run_capture(spec, std::chrono::seconds(3));
  if (!r || r.value().status != 0) return 0;
  size_t n = 0;
  for (const auto& nb : nlohmann::json::parse(r.value().out)) n += nb["state"].value("session_state", 0) == 6;
  return n;
}

void converge(const char* file, std::vector<std::pair<std::string, std::string>> groups,
              std::vector<std::pair<std::string, size_t>> sessions, std::vector<std::string> hosts) {
  auto t0 = Clock::now();
  ScopedRun run(topology(file), true);
  double up = ms_since(t0);
  std::vector<std::unique_ptr<StandIn>> standins;
  for (const auto& h : hosts) standins.push_back(std::make_unique<StandIn>(run, h));
  bool ok = eventually(
      [&] {
        for (auto& [sw, n] : sessions)
          if (established(run, sw) < n) return false;
        for (auto& [sw, prefix] : groups)
          if (group_members(run.tb().netlink(run.node(sw)), prefix).empty()) return false;
        return true;
      },
      std::chrono::seconds(60), std::chrono::milliseconds(20));
  std::printf("%-16s up (namespaces + switches started) %.0f ms; all sessions established and groups installed "
              "%.0f ms after start%s\n",
              file, up, ms_since(t0), ok ? "" : " (NOT CONVERGED)");
}

}  // namespace

int main(int argc, char** argv) {
  lanes::test::require_root();
  int iterations = argc > 1 ? std::atoi(argv[1]) : 10;

  converge("laptop.xml", {{"r1-tor", "198.19.0.1/32"}, {"r1-tor", "198.19.0.2/32"},
                          {"r1-tor", "2001:2:0:100::1/128"}, {"r1-tor", "2001:2:0:100::2/128"}},
           {{"r1-tor", 8}}, {"h1", "h2"});
  converge("two-racks.xml", {{"r1-tor", "198.19.0.1/32"}, {"r2-tor", "198.19.4.1/32"}, {"spine1", "198.19.0.0/22"},
                             {"spine1", "198.19.4.0/22"}, {"r1-tor", "198.19.4.0/22"}, {"r2-tor", "198.19.0.0/22"}},
           {{"spine1", 2}, {"r1-tor", 5}, {"r2-tor", 5}}, {"r1h1", "r2h1"});

  ScopedRun run(topology("laptop.xml"), true);
  StandIn h1(run, "h1");
  auto& sw = run.tb().netlink(run.node("r1-tor"));
  const std::string prefix = "198.19.0.1/32";
  if (!eventually([&] { return group_members(sw, prefix).size() == 4; }, std::chrono::seconds(60))) {
    std::fprintf(stderr, "sessions did not come up\n");
    return 1;
  }
  int h = run.node("h1");
  int nic2 = run.tb().ifindex(h, "nic2").value();
  auto fast = std::chrono::milliseconds(1);
  std::vector<double> carrier, withdrawal, cli;
  for (int i = 0; i < iterations; ++i) {
    // The kernel's linkwatch handles a carrier change of a device whose
    // ifindex equals its peer's (as on a physical NIC, and as lanes numbers
    // veth pairs) at most once a second: space the events so each one is
    // measured, not the rate limit.
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    auto t0 = Clock::now();
    (void)run.tb().netlink(h).set_link_up(nic2, false, "nic2");
    eventually([&] { return group_members(sw, prefix).size() == 3; }, std::chrono::seconds(10), fast);
    carrier.push_back(ms_since(t0));
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    (void)run.tb().netlink(h).set_link_up(nic2, true, "nic2");
    eventually([&] { return group_members(sw, prefix).size() == 4; }, std::chrono::seconds(20), fast);
  }
  for (int i = 0; i < iterations; ++i) {
    auto c0 = Clock::now();
    h1.gobgp(2, {"global"});  // what starting the gobgp CLI costs
    cli.push_back(ms_since(c0));
    auto t0 = Clock::now();
    h1.withdraw(2);
    eventually([&] { return group_members(sw, prefix).size() == 3; }, std::chrono::seconds(10), fast);
    withdrawal.push_back(ms_since(t0));
    h1.announce(2);
    eventually([&] { return group_members(sw, prefix).size() == 4; }, std::chrono::seconds(20), fast);
  }
  std::printf("carrier loss -> group shrinks: median %.2f ms (min %.2f, max %.2f, n=%d)\n", median(carrier),
              *std::min_element(carrier.begin(), carrier.end()), *std::max_element(carrier.begin(), carrier.end()),
              iterations);
  std::printf("BGP withdrawal (gobgp CLI call) -> group shrinks: median %.1f ms; the CLI call alone takes %.1f ms, "
              "so withdrawal on the wire -> group about %.1f ms\n",
              median(withdrawal), median(cli), median(withdrawal) - median(cli));
  return 0;
}
