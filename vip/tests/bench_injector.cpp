// VIP injector benchmark: time from injector start to four next hops in the
// switch's group, and from a NIC's carrier loss to the withdrawal being sent
// (read from the injector's log, same monotonic clock), to GoBGP's RIB
// losing the path, and to the switch's group shrinking. Medians; never
// fails on a number.
//
// usage: lanes_bench_injector [ITERATIONS]   (root)

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <regex>

#include "bgp_support.hpp"
#include "lanes/hostnet/hostnet.hpp"
#include "lanes/vip/deploy.hpp"

using namespace lanes::testbed;
using lanes::test::eventually;
using lanes::test::group_members;
using lanes::test::ScopedRun;
using SClock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int64_t mono_us(SClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

size_t rib_paths(ScopedRun& run, const std::string& prefix) { return lanes::test::rib_paths(run, "r1-tor", prefix); }

// The last "withdrew next hop of NIC k ... at N us" in the injector's log.
int64_t last_withdrawal_us(const std::string& log, int nic) {
  std::ifstream in(log);
  std::string line;
  int64_t t = 0;
  std::regex re("withdrew next hop of NIC " + std::to_string(nic) + " on \\S+ at (\\d+) us");
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, re)) t = std::stoll(m[1]);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  lanes::test::require_root();
  int iterations = argc > 1 ? std::atoi(argv[1]) : 10;
  auto path = std::filesystem::temp_directory_path() / "lanes-bench-injector.xml";
  std::ofstream(path) << "<topology name=\"vip\"><rack name=\"r1\"><host name=\"h\" count=\"1\" nics=\"4\">"
                      << "<job vip=\"per-nic\"/></host><server name=\"storage\"/></rack></topology>";
  ScopedRun run(path.string(), true, {std::make_shared<lanes::hostnet::HostRole>()});
  std::filesystem::remove(path);
  auto job = Netns::open(lanes::hostnet::job_netns(run.id(), "h1")).value();
  std::string dir = run.registry().dir(run.id());
  std::ofstream(dir + "/injector.json") << lanes::vip::injector_config(run.topo(), run.node("h1")).to_json().dump(2);
  std::string log = dir + "/injector.log";
  ProcessSpec spec{"injector", {std::filesystem::path(lanes::test::lanes_bin()).parent_path().string() +
                                    "/lanes-vip-injector", "--config", dir + "/injector.json", "--state",
                                dir + "/injector-state.json"}};
  spec.netns_fd = job.fd();
  spec.log_path = log;
  auto& sw = run.tb().netlink(run.node("r1-tor"));
  const std::string prefix = "198.19.0.1/32";
  auto fast = std::chrono::milliseconds(1);

  std::vector<double> start_ms;
  std::optional<Daemon> inj;
  for (int i = 0; i < 5; ++i) {
    if (inj) {
      (void)inj->stop();
      eventually([&] { return group_members(sw, prefix).empty(); }, std::chrono::seconds(10), fast);
    }
    auto t0 = SClock::now();
    inj.emplace(Daemon::start(spec).value());
    eventually([&] { return group_members(sw, prefix).size() == 4; }, std::chrono::seconds(30), fast);
    start_ms.push_back(std::chrono::duration<double, std::milli>(SClock::now() - t0).count());
  }
  std::printf("injector start -> 4 next hops in the switch's group: median %.1f ms (n=5, min %.1f, max %.1f)\n",
              median(start_ms), *std::min_element(start_ms.begin(), start_ms.end()),
              *std::max_element(start_ms.begin(), start_ms.end()));

  int h = run.node("h1");
  int nic2 = run.tb().ifindex(h, "nic2").value();
  std::vector<double> to_withdraw, to_rib, to_group;
  for (int i = 0; i < iterations; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // linkwatch: one NIC event a second
    auto t0 = SClock::now();
    (void)run.tb().netlink(h).set_link_up(nic2, false, "nic2");
    // the group first (a netlink dump per poll), then the RIB (a CLI call per poll)
    eventually([&] { return group_members(sw, prefix).size() == 3; }, std::chrono::seconds(10), fast);
    to_group.push_back(std::chrono::duration<double, std::milli>(SClock::now() - t0).count());
    eventually([&] { return rib_paths(run, prefix) == 3; }, std::chrono::seconds(10), fast);
    to_rib.push_back(std::chrono::duration<double, std::milli>(SClock::now() - t0).count());
    eventually([&] { return last_withdrawal_us(log, 2) > mono_us(t0); }, std::chrono::seconds(5));
    to_withdraw.push_back(static_cast<double>(last_withdrawal_us(log, 2) - mono_us(t0)) / 1000.0);
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    (void)run.tb().netlink(h).set_link_up(nic2, true, "nic2");
    eventually([&] { return group_members(sw, prefix).size() == 4 && rib_paths(run, prefix) == 4; },
               std::chrono::seconds(20), fast);
  }
  std::printf("NIC carrier loss -> withdrawal sent by the injector: median %.2f ms (n=%d)\n", median(to_withdraw),
              iterations);
  std::printf("NIC carrier loss -> GoBGP's RIB has 3 paths: median %.1f ms (includes a gobgp CLI call per poll)\n",
              median(to_rib));
  std::printf("NIC carrier loss -> switch group has 3 members: median %.2f ms (the kernel drops the next hop "
              "with the port's carrier)\n",
              median(to_group));
  (void)inj->stop();
  return 0;
}
