// root tier: the VIP injector against BGP speakers that are not GoBGP —
// BIRD 2 and FRR's bgpd (Debian's bird2 and frr, installed by scripts/setup)
// — run in the rack switch's namespace in its place, in both injector
// modes, IPv4 and IPv6 NLRI over IPv4 sessions, and an IPv6-only job over
// IPv6 sessions: sessions up, one path per NIC (ADD-PATH: with
// distinct path ids, or they would replace each other), one NIC down
// withdraws exactly its path and its return restores it, a route refresh
// from the peer is answered, and SIGTERM withdraws everything before the
// Cease.

#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "bgp_support.hpp"
#include "lanes/testbed/address.hpp"
#include "lanes/hostnet/hostnet.hpp"
#include "lanes/vip/deploy.hpp"

using namespace lanes::testbed;
using lanes::test::eventually;
using lanes::test::ScopedRun;

namespace {

constexpr auto kUp = std::chrono::seconds(30);    // first session: the peer's own timers
constexpr auto kChange = std::chrono::seconds(10);

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

bool installed(const char* path) { return std::filesystem::exists(path); }

// The peer in the switch's namespace, as the tests ask it things.
class Peer {
 public:
  explicit Peer(ScopedRun& run) : run_(run) {}
  virtual ~Peer() = default;
  // next hop → path id (0 if the peer does not say) of PREFIX's paths
  virtual std::map<std::string, uint32_t> paths(const std::string& prefix) = 0;
  // asks for the routes again (ROUTE-REFRESH) on the session from ADDRESS
  virtual void refresh(const std::string& address, bool v6) = 0;
  // what the peer says of the session from ADDRESS after it closed
  virtual std::string last_error(const std::string& address) = 0;
  Daemon daemon;

 protected:
  // ARGV's output, run in the switch's namespace (the peer's CLI)
  std::string cli(std::vector<std::string> argv) {
    ProcessSpec s{argv[0], argv};
    s.netns_fd = run_.tb().netns(run_.node("r1-tor")).fd();
    s.new_session = false;
    auto r = run_capture(s, std::chrono::seconds(5));
    return r ? r.value().out : "";
  }
  ScopedRun& run_;
};

struct Session {
  std::string local, neighbor;  // the switch port's address, the injector's
};

// The switch's side of the emulated rack, for the peers' configs.
struct Rack {
  uint32_t local_as = 0, peer_as = 0;
  std::string router_id;
  std::vector<Session> sessions;
  std::vector<std::pair<std::string, std::string>> behind;  // a job NIC address (prefix) → the host NIC's
};

class Bird final : public Peer {
 public:
  Bird(ScopedRun& run, const std::string& dir, const Rack& r) : Peer(run), sock_(dir + "/bird.ctl"), log_(dir + "/bird.log") {
    std::ostringstream c;
    c << "router id " << r.router_id << ";\nlog \"" << log_ << "\" all;\nprotocol device { }\n";
    c << "template bgp inj {\n  local as " << r.local_as << ";\n  multihop 3;\n  passive on;\n  hold time 9;\n"
      // BIRD waits 60 s before taking a session that failed back: not here
      << "  error wait time 1, 2;\n"
      << "  ipv4 { import all; export none; add paths rx; };\n"
      << "  ipv6 { import all; export none; add paths rx; };\n}\n";
    // the job's NIC addresses behind their ports, to resolve the next hops by
    for (const char* af : {"ipv4", "ipv6"}) {
      c << "protocol static {\n  " << af << ";\n";
      for (const auto& [dst, via] : r.behind)
        if ((dst.find(':') != std::string::npos) == (af[3] == '6')) c << "  route " << dst << " via " << via << ";\n";
      c << "}\n";
    }
    for (size_t i = 0; i < r.sessions.size(); ++i)
      c << "protocol bgp s" << i << " from inj { local " << r.sessions[i].local << " as " << r.local_as
        << "; neighbor " << r.sessions[i].neighbor << " as " << r.peer_as << "; }\n";
    std::ofstream(dir + "/bird.conf") << c.str();
    ProcessSpec spec{"bird", {"bird", "-f", "-c", dir + "/bird.conf", "-s", sock_, "-P", dir + "/bird.pid"}};
    spec.netns_fd = run.tb().netns(run.node("r1-tor")).fd();
    spec.log_path = dir + "/bird.out";
    daemon = Daemon::start(spec).value();
    for (size_t i = 0; i < r.sessions.size(); ++i) names_[r.sessions[i].neighbor] = "s" + std::to_string(i);
  }
  std::string birdc(std::vector<std::string> args) {
    std::vector<std::string> argv = {"birdc", "-s", sock_};
    argv.insert(argv.end(), args.begin(), args.end());
    return cli(argv);
  }
  std::map<std::string, uint32_t> paths(const std::string& prefix) override {
    // every route of the prefix, each with its attributes: count the
    // distinct BGP next hops (BIRD does not print path ids)
    std::map<std::string, uint32_t> out;
    std::istringstream in(birdc({"show", "route", "for", prefix, "all"}));
    for (std::string line; std::getline(in, line);) {
      auto at = line.find("BGP.next_hop:");
      if (at == std::string::npos) continue;
      std::istringstream w(line.substr(at + 13));
      std::string nh;
      w >> nh;  // an IPv6 next hop may be followed by its link-local one
      if (!nh.empty()) out[nh] = 0;
    }
    return out;
  }
  void refresh(const std::string& address, bool) override { (void)birdc({"reload", "in", names_.at(address)}); }
  std::string last_error(const std::string&) override { return slurp(log_); }

 private:
  std::string sock_, log_;
  std::map<std::string, std::string> names_;
};

class Frr final : public Peer {
 public:
  Frr(ScopedRun& run, const std::string& top, const Rack& r) : Peer(run), dir_(top + "/frr") {
    // bgpd runs as FRR's own user (it insists on a user of the frrvty
    // group): its directory is that user's
    const std::string& dir = dir_;
    std::filesystem::create_directories(dir);
    if (passwd* pw = ::getpwnam("frr")) REQUIRE(::chown(dir.c_str(), pw->pw_uid, pw->pw_gid) == 0);
    std::ostringstream c;
    c << "frr defaults datacenter\nhostname tor\nlog file " << dir << "/bgpd.log debugging\n";
    c << "router bgp " << r.local_as << "\n bgp router-id " << r.router_id << "\n no bgp ebgp-requires-policy\n";
    for (const auto& s : r.sessions)
      c << " neighbor " << s.neighbor << " remote-as " << r.peer_as << "\n neighbor " << s.neighbor
        << " ebgp-multihop 3\n neighbor " << s.neighbor << " passive\n neighbor " << s.neighbor
        << " update-source " << s.local << "\n neighbor " << s.neighbor << " timers 3 9\n neighbor " << s.neighbor
        << " timers connect 1\n";
    for (const char* af : {"ipv4", "ipv6"}) {
      c << " address-family " << af << " unicast\n";
      for (const auto& s : r.sessions) c << "  neighbor " << s.neighbor << " activate\n";
      c << " exit-address-family\n";
    }
    std::ofstream(dir + "/bgpd.conf") << c.str();
    // no zebra: bgpd alone, its vty socket in the test's directory
    ProcessSpec spec{"bgpd", {"/usr/lib/frr/bgpd", "-f", dir + "/bgpd.conf", "-i", dir + "/bgpd.pid", "-Z",
                              "--vty_socket", dir, "-u", "frr", "-g", "frr", "-P", "0"}};
    spec.netns_fd = run.tb().netns(run.node("r1-tor")).fd();
    spec.log_path = dir + "/bgpd.out";
    daemon = Daemon::start(spec).value();
  }
  std::string vtysh(const std::string& cmd) { return cli({"vtysh", "--vty_socket", dir_, "-d", "bgpd", "-c", cmd}); }
  std::map<std::string, uint32_t> paths(const std::string& prefix) override {
    std::map<std::string, uint32_t> out;
    bool v6 = prefix.find(':') != std::string::npos;
    try {
      auto j = nlohmann::json::parse(vtysh(std::string("show bgp ") + (v6 ? "ipv6" : "ipv4") + " unicast " + prefix + " json"));
      for (const auto& p : j.value("paths", nlohmann::json::array()))
        for (const auto& nh : p.value("nexthops", nlohmann::json::array()))
          if (nh.value("scope", "global") == "global") out[nh.value("ip", "")] = p.value("addpathRxId", 0u);
    } catch (const std::exception&) {
    }
    return out;
  }
  void refresh(const std::string& address, bool v6) override {
    (void)vtysh(std::string("clear bgp ") + (v6 ? "ipv6" : "ipv4") + " unicast " + address + " soft in");
  }
  std::string last_error(const std::string& address) override {
    return vtysh("show bgp neighbors " + address + " json");
  }

 private:
  std::string dir_;
};

std::string topo(const char* vip, const char* family) {
  auto path = std::filesystem::temp_directory_path() / ("lanes-interop-" + std::to_string(::getpid()) + ".xml");
  std::ofstream(path) << "<topology name=\"interop\"><rack name=\"r1\"><host name=\"h\" count=\"1\" nics=\"4\">"
                      << "<job vip=\"" << vip << "\" family=\"" << family
                      << "\"/></host><server name=\"storage\"/></rack></topology>";
  return path.string();
}

enum class Kind { bird, frr };

// FAMILY "dual": sessions over IPv4 carrying both families; "ipv6": an
// IPv6-only job, sessions over IPv6 carrying its /128 alone
void interop(Kind kind, const char* vip, const char* family = "dual") {
  lanes::test::require_root();
  const char* bin = kind == Kind::bird ? "/usr/sbin/bird" : "/usr/lib/frr/bgpd";
  INFO("the peer's binary is " << bin << " (scripts/setup installs bird2 and frr)");
  REQUIRE(installed(bin));
  auto file = topo(vip, family);
  // the switch's namespace without GoBGP and the FIB agent; the hosts'
  // agents build the job containers
  ScopedRun run(file, false, {std::make_shared<lanes::hostnet::HostRole>()});
  std::filesystem::remove(file);
  const auto& t = run.topo();
  int h = run.node("h1"), swn = run.node("r1-tor");
  const Node& host = t.nodes[h];
  std::string dir = run.registry().dir(run.id());
  auto cfg = lanes::vip::injector_config(t, h);

  // what the FIB agent would do: the job's NIC addresses behind their ports
  Rack rack{t.nodes[swn].asn, host.asn, t.nodes[swn].router_id.to_string(), {}, {}};
  auto& sw = run.tb().netlink(swn);
  for (const auto& nic : host.nics) {
    const Link& l = t.links[nic.link];
    int port = run.tb().ifindex(swn, l.a.ifname).value();
    for (bool v6 : {false, true}) {
      if (!(v6 ? host.job->has6() : host.job->has4())) continue;
      Route r{v6 ? IpNet(Net6(nic.job_addr6.addr, 128)) : IpNet(Net4(nic.job_addr4.addr, 32)),
              std::vector<Via>{{v6 ? IpAddr(l.b.addr6.addr) : IpAddr(l.b.addr4.addr), port, 1}}};
      r.replace = true;
      REQUIRE(sw.add_route(r).ok());
      rack.behind.emplace_back(r.dst.str(), v6 ? l.b.addr6.addr.to_string() : l.b.addr4.addr.to_string());
    }
  }
  for (const auto& s : cfg.sessions) rack.sessions.push_back({s.peer, s.local});
  std::unique_ptr<Peer> peer;
  if (kind == Kind::bird)
    peer = std::make_unique<Bird>(run, dir, rack);
  else
    peer = std::make_unique<Frr>(run, dir, rack);

  // the injector in the job container
  auto job = Netns::open(lanes::hostnet::job_netns(run.id(), "h1")).value();
  std::ofstream(dir + "/injector.json") << cfg.to_json().dump(2);
  ProcessSpec spec{"injector", {std::filesystem::path(lanes::test::lanes_bin()).parent_path().string() +
                                    "/lanes-vip-injector", "--config", dir + "/injector.json", "--state",
                                dir + "/injector-state.json"}};
  spec.netns_fd = job.fd();
  spec.log_path = dir + "/injector.log";
  auto injector = Daemon::start(spec).value();

  // an IPv6-only job announces no IPv4: its IPv4 checks expect nothing
  bool has4 = !cfg.task4.empty();
  std::string v4 = has4 ? cfg.task4 + "/32" : host.job->task_ip4.to_string() + "/32", v6 = cfg.task6 + "/128";
  std::set<std::string> all4, all6;
  for (const auto& n : cfg.nics) {
    if (has4) all4.insert(n.nh4);
    all6.insert(n.nh6);
  }
  auto hops = [](const std::map<std::string, uint32_t>& m) {
    std::set<std::string> s;
    for (const auto& [nh, id] : m) s.insert(nh);
    return s;
  };
  bool add_path = cfg.add_path;
  // every session of the injector established (its state file)
  auto all_up = [&] {
    try {
      auto j = nlohmann::json::parse(slurp(dir + "/injector-state.json"));
      size_t up = 0;
      for (const auto& x : j.value("sessions", nlohmann::json::array())) up += x.value("state", "") == "established";
      return up == cfg.sessions.size();
    } catch (const std::exception&) {
      return false;
    }
  };
  INFO("peer " << (kind == Kind::bird ? "BIRD" : "FRR") << ", mode " << vip << ", job " << family << "; logs in "
                << dir);

  // up: a path per NIC, both families
  CHECK(eventually([&] { return all_up() && hops(peer->paths(v4)) == all4 && hops(peer->paths(v6)) == all6; }, kUp));
  if (add_path && kind == Kind::frr) {
    // one session carries all four: each its own path id
    std::set<uint32_t> ids;
    for (const auto& [nh, id] : peer->paths(has4 ? v4 : v6)) ids.insert(id);
    CHECK(ids.size() == 4);
    CHECK_FALSE(ids.count(0));
  }

  // NIC 2 down: exactly its path goes; back: it returns. Then NIC 0 — in
  // ADD-PATH mode the first session's NIC
  for (int k : {2, 0}) {
    const auto& nic = host.nics[static_cast<size_t>(k)];
    int idx = run.tb().ifindex(h, t.links[nic.link].b.ifname).value();
    REQUIRE(run.tb().netlink(h).set_link_up(idx, false, t.links[nic.link].b.ifname).ok());
    auto less4 = all4, less6 = all6;
    if (has4) less4.erase(nic.job_addr4.addr.to_string());
    less6.erase(nic.job_addr6.addr.to_string());
    CHECK(eventually([&] { return hops(peer->paths(v4)) == less4 && hops(peer->paths(v6)) == less6; }, kChange));
    REQUIRE(run.tb().netlink(h).set_link_up(idx, true, t.links[nic.link].b.ifname).ok());
    CHECK(eventually([&] { return all_up() && hops(peer->paths(v4)) == all4 && hops(peer->paths(v6)) == all6; }, kUp));
  }

  // a route refresh from the peer is answered with the routes again
  auto log_has = [&](const std::string& s) { return slurp(dir + "/injector.log").find(s) != std::string::npos; };
  if (has4) {
    peer->refresh(cfg.sessions[0].local, false);
    CHECK(eventually([&] { return log_has("route refresh of IPv4 from " + cfg.sessions[0].peer); }, kChange));
  }
  peer->refresh(cfg.sessions[0].local, true);
  CHECK(eventually([&] { return log_has("route refresh of IPv6 from " + cfg.sessions[0].peer); }, kChange));
  CHECK(hops(peer->paths(v4)) == all4);
  CHECK(hops(peer->paths(v6)) == all6);

  // SIGTERM: everything withdrawn, then a Cease
  auto st = injector.stop(std::chrono::milliseconds(3000));
  REQUIRE(st.ok());
  CHECK(st.value() == 0);
  CHECK(eventually([&] { return peer->paths(v4).empty() && peer->paths(v6).empty(); }, kChange));
  CHECK(log_has("withdrew next hop of NIC 0"));
  // the Cease follows the withdrawals: the peer may log it a moment later
  std::string said;
  CHECK(eventually([&] {
    said = peer->last_error(cfg.sessions[0].local);
    return said.find("Cease") != std::string::npos || said.find("dministrative shutdown") != std::string::npos;
  }, kChange));
  (void)peer->daemon.stop();
}

}  // namespace

TEST_CASE("interop: BIRD 2 as the rack switch with one session per NIC", "[root]") { interop(Kind::bird, "per-nic"); }
TEST_CASE("interop: BIRD 2 as the rack switch with ADD-PATH", "[root]") { interop(Kind::bird, "add-path"); }
TEST_CASE("interop: FRR bgpd as the rack switch with one session per NIC", "[root]") { interop(Kind::frr, "per-nic"); }
TEST_CASE("interop: FRR bgpd as the rack switch with ADD-PATH", "[root]") { interop(Kind::frr, "add-path"); }
TEST_CASE("interop: BIRD 2 with an IPv6-only job over IPv6 sessions, one per NIC", "[root]") {
  interop(Kind::bird, "per-nic", "ipv6");
}
TEST_CASE("interop: BIRD 2 with an IPv6-only job over IPv6 sessions, ADD-PATH", "[root]") {
  interop(Kind::bird, "add-path", "ipv6");
}
TEST_CASE("interop: FRR bgpd with an IPv6-only job over IPv6 sessions, one per NIC", "[root]") {
  interop(Kind::frr, "per-nic", "ipv6");
}
TEST_CASE("interop: FRR bgpd with an IPv6-only job over IPv6 sessions, ADD-PATH", "[root]") {
  interop(Kind::frr, "add-path", "ipv6");
}
