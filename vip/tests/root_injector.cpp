// root tier: the VIP injector against GoBGP on the rack switch, in both
// modes, IPv4 and IPv6.

#include <signal.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "bgp_support.hpp"
#include "lanes/hostnet/hostnet.hpp"
#include "lanes/vip/deploy.hpp"

using namespace lanes::testbed;
using lanes::test::eventually;
using lanes::test::group_members;
using lanes::test::ScopedRun;

namespace {

std::string topo(const char* vip) {
  auto path = std::filesystem::temp_directory_path() / ("lanes-vip-" + std::to_string(::getpid()) + ".xml");
  std::ofstream(path) << "<topology name=\"vip\"><rack name=\"r1\"><host name=\"h\" count=\"1\" nics=\"4\">"
                      << "<job vip=\"" << vip << "\"/></host><server name=\"storage\"/></rack></topology>";
  return path.string();
}

// distinct next hops: ADD-PATH mode's two sessions carry the same four
size_t rib_paths(ScopedRun& run, const std::string& prefix) {
  return lanes::test::rib_next_hops(run, "r1-tor", prefix).size();
}

struct Injected {
  std::string file;
  ScopedRun run;
  std::optional<Netns> job;
  std::optional<Daemon> injector;
  std::string state;

  explicit Injected(const char* vip) : file(topo(vip)), run(file, true, {std::make_shared<lanes::hostnet::HostRole>()}) {
    std::filesystem::remove(file);
    job.emplace(Netns::open(lanes::hostnet::job_netns(run.id(), "h1")).value());
    start();
  }
  void start() {
    std::string dir = run.registry().dir(run.id());
    std::ofstream(dir + "/injector.json") << lanes::vip::injector_config(run.topo(), run.node("h1")).to_json().dump(2);
    state = dir + "/injector-state.json";
    ProcessSpec spec{"injector", {std::filesystem::path(lanes::test::lanes_bin()).parent_path().string() +
                                      "/lanes-vip-injector", "--config", dir + "/injector.json", "--state", state}};
    spec.netns_fd = job->fd();
    spec.log_path = dir + "/injector.log";
    injector.emplace(Daemon::start(spec).value());
  }
  Netlink& sw() { return run.tb().netlink(run.node("r1-tor")); }
  bool four() {
    return group_members(sw(), "198.19.0.1/32").size() == 4 && group_members(sw(), "2001:2:0:100::1/128").size() == 4;
  }
  void nic(int k, bool up) {
    int h = run.node("h1");
    REQUIRE(run.tb().netlink(h).set_link_up(run.tb().ifindex(h, "nic" + std::to_string(k)).value(), up,
                                            "nic" + std::to_string(k))
                .ok());
  }
};

void lifecycle(const char* vip) {
  lanes::test::require_root();
  Injected t(vip);
  // as for every BGP wait in the root tier: a bound well above the usual 1-3 s
  REQUIRE(eventually([&] { return t.four(); }, std::chrono::seconds(40)));
  CHECK(rib_paths(t.run, "198.19.0.1/32") == 4);
  CHECK(rib_paths(t.run, "2001:2:0:100::1/128") == 4);
  CHECK(t.run.run_in("storage", {"ping", "-c", "1", "-W", "2", "198.19.0.1"}) == 0);
  CHECK(t.run.run_in("storage", {"ping", "-c", "1", "-W", "2", "2001:2:0:100::1"}) == 0);

  // NIC 2 down: its path is withdrawn (BGP, not just the kernel), NIC up: back
  t.nic(2, false);
  CHECK(eventually([&] { return rib_paths(t.run, "198.19.0.1/32") == 3 && rib_paths(t.run, "2001:2:0:100::1/128") == 3; },
                   std::chrono::seconds(5)));
  CHECK(group_members(t.sw(), "198.19.0.1/32").size() == 3);
  t.nic(2, true);
  CHECK(eventually([&] { return t.four() && rib_paths(t.run, "198.19.0.1/32") == 4; }, std::chrono::seconds(10)));

  // NIC 0 down — in ADD-PATH mode the NIC of the first session: exactly
  // its path goes (its session is reset at once on both ends; the other
  // session still carries NICs 1-3), and it returns with the NIC
  const auto& h = t.run.topo().nodes[t.run.node("h1")];
  std::string nic0 = h.nics[0].job_addr4.addr.to_string();
  t.nic(0, false);
  CHECK(eventually([&] {
    auto nh = lanes::test::rib_next_hops(t.run, "r1-tor", "198.19.0.1/32");
    return nh.size() == 3 && !nh.count(nic0) && rib_paths(t.run, "2001:2:0:100::1/128") == 3;
  }, std::chrono::seconds(5)));
  CHECK(group_members(t.sw(), "198.19.0.1/32").size() == 3);
  t.nic(0, true);
  CHECK(eventually([&] { return t.four() && rib_paths(t.run, "198.19.0.1/32") == 4; }, std::chrono::seconds(10)));

  // gobgpd restarted: the injector reconnects and announces again
  std::ifstream in(supervisor_state_path(t.run.registry(), t.run.id()));
  pid_t gobgpd = 0;
  auto sup = nlohmann::json::parse(in);  // the loop must not outlive it
  for (const auto& d : sup["daemons"])
    if (d["name"] == "gobgpd") gobgpd = d["pid"].get<pid_t>();
  REQUIRE(gobgpd > 0);
  ::kill(gobgpd, SIGKILL);
  CHECK(eventually([&] { return rib_paths(t.run, "198.19.0.1/32") == 0; }, std::chrono::seconds(5)));
  CHECK(eventually([&] { return rib_paths(t.run, "198.19.0.1/32") == 4 && rib_paths(t.run, "2001:2:0:100::1/128") == 4; },
                   std::chrono::seconds(30)));

  // injector stopped: everything withdrawn before the session closes
  auto st = t.injector->stop(std::chrono::milliseconds(3000));
  REQUIRE(st.ok());
  CHECK(st.value() == 0);
  CHECK(eventually([&] { return rib_paths(t.run, "198.19.0.1/32") == 0 && rib_paths(t.run, "2001:2:0:100::1/128") == 0; },
                   std::chrono::seconds(5)));
  std::ifstream log(t.run.registry().dir(t.run.id()) + "/injector.log");
  std::string all((std::istreambuf_iterator<char>(log)), {});
  CHECK(all.find("withdrew next hop of NIC 0") != std::string::npos);
}

}  // namespace

TEST_CASE("injector with one session per NIC: up, NIC down and up, NIC 0 down and up, gobgpd restart, stop", "[root]") {
  lifecycle("per-nic");
}

TEST_CASE("injector with two ADD-PATH sessions: up, NIC down and up, NIC 0 down and up, gobgpd restart, stop", "[root]") {
  lifecycle("add-path");
}

TEST_CASE("injector refuses a task IP that is not on its container", "[root]") {
  lanes::test::require_root();
  Injected t("per-nic");
  auto cfg = lanes::vip::injector_config(t.run.topo(), t.run.node("h1"));
  cfg.task4 = "198.19.0.99";  // another job's
  std::string dir = t.run.registry().dir(t.run.id());
  std::ofstream(dir + "/bad.json") << cfg.to_json().dump();
  ProcessSpec spec{"injector", {std::filesystem::path(lanes::test::lanes_bin()).parent_path().string() +
                                    "/lanes-vip-injector", "--config", dir + "/bad.json", "--state", dir + "/bad-state.json"}};
  spec.netns_fd = t.job->fd();
  spec.log_path = dir + "/bad.log";
  auto d = Daemon::start(spec);
  REQUIRE(d.ok());
  CHECK(d.value().wait() == 2);
  std::ifstream log(dir + "/bad.log");
  std::string all((std::istreambuf_iterator<char>(log)), {});
  CHECK(all.find("refusing to announce 198.19.0.99") != std::string::npos);
}
