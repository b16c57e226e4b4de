// BFD sessions on a real link: two namespaces joined by a veth pair, one
// bfd::LinkSession in each, driven by a loop in the test.

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "lanes/bfd/link.hpp"
#include "lanes/bfd/notify.hpp"
#include "lanes/testbed/process.hpp"
#include "lanes/testbed/netns.hpp"
#include "support.hpp"

using namespace lanes::bfd;
using lanes::test::run_command;
using namespace std::chrono_literals;

namespace {

// Two namespaces with a veth pair between them, removed at the end.
struct Names {
  std::string a = "lbfd-" + std::to_string(::getpid()) + "-a", b = "lbfd-" + std::to_string(::getpid()) + "-b";
  ~Names() {
    (void)run_command("ip netns del " + a + " 2>/dev/null");
    (void)run_command("ip netns del " + b + " 2>/dev/null");
  }
};

struct Pair : Names {
  Pair() {
    for (const auto& c : {"ip netns add " + a, "ip netns add " + b,
                          "ip -n " + a + " link add va type veth peer name vb netns " + b,
                          "ip -n " + a + " addr add 198.18.200.0/31 dev va", "ip -n " + b + " addr add 198.18.200.1/31 dev vb",
                          "ip -n " + a + " link set va up", "ip -n " + b + " link set vb up"})
      REQUIRE(run_command(c).status == 0);
  }
  std::unique_ptr<LinkSession> open(const std::string& ns, LinkConfig cfg) {
    auto n = lanes::testbed::Netns::open(ns);
    REQUIRE(n.ok());
    std::unique_ptr<LinkSession> out;
    auto st = lanes::testbed::run_in_netns(
        n.value().fd(),
        [&]() -> lanes::testbed::Status {
          auto l = LinkSession::open(cfg, Clock::now());
          if (!l) return l.error();
          out = std::move(l).value();
          return {};
        },
        "opening a BFD link");
    INFO((st ? "" : st.error().what()));
    REQUIRE(st.ok());
    return out;
  }
};

LinkConfig config(const char* ifname, const char* local, const char* remote, uint32_t disc) {
  LinkConfig c;
  c.ifname = ifname;
  c.local = local;
  c.remote = remote;
  c.session.local_disc = disc;
  return c;
}

// Runs both links until PRED or a generous deadline; the time it took.
std::chrono::milliseconds run_until(LinkSession& x, LinkSession& y, const std::function<bool()>& pred,
                                    std::chrono::milliseconds limit = 10s) {
  auto start = Clock::now();
  while (!pred() && Clock::now() - start < limit) {
    auto now = Clock::now();
    x.readable(now);
    y.readable(now);
    x.tick(now);
    y.tick(now);
    std::this_thread::sleep_for(1ms);
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
}

}  // namespace

TEST_CASE("BFD over a veth pair comes up, finds a silently dropping link, and comes back", "[root][serial]") {
  lanes::test::require_root();
  Pair p;
  auto a = p.open(p.a, config("va", "198.18.200.0", "198.18.200.1", 1));
  auto b = p.open(p.b, config("vb", "198.18.200.1", "198.18.200.0", 7));
  run_until(*a, *b, [&] { return a->session().state() == State::up && b->session().state() == State::up; });
  REQUIRE(a->session().state() == State::up);
  REQUIRE(b->session().state() == State::up);
  CHECK(a->session().remote_disc() == 7);
  CHECK(a->usable());
  // a's frames are lost on b's side (carrier stays): both declare the path failed
  REQUIRE(run_command("ip netns exec " + p.b + " nft 'add table netdev lbfd ; add chain netdev lbfd in { type filter hook "
                      "ingress device \"vb\" priority 0 ; policy drop ; }'").status == 0);
  auto took = run_until(*a, *b, [&] { return !a->usable() && !b->usable(); });
  CHECK_FALSE(b->usable());  // b hears nothing: its detection time
  CHECK(b->session().diag() == Diag::time_expired);
  CHECK_FALSE(a->usable());  // a hears b say Down
  CHECK(a->session().diag() == Diag::neighbor_down);
  std::printf("BFD 100 ms x 3 on veth: path failed after %lld ms\n", static_cast<long long>(took.count()));
  // b's detection time (3 x 100 ms) from its last packet, which came at
  // most one interval before the drop began: between 200 and 300 ms after
  // it, and the loop looks every millisecond. 150 ms below is not BFD's
  // timer; the margin above is for a loaded machine (the test runs alone)
  auto detect = std::chrono::duration_cast<std::chrono::milliseconds>(b->session().detection_time());
  INFO("detection time " << detect.count() << " ms; failed after " << took.count() << " ms");
  CHECK(detect == std::chrono::milliseconds(300));
  CHECK(took >= detect / 2);
  CHECK(took <= detect + std::chrono::milliseconds(700));
  REQUIRE(run_command("ip netns exec " + p.b + " nft delete table netdev lbfd").status == 0);
  run_until(*a, *b, [&] { return a->usable() && b->usable(); });
  CHECK(a->session().state() == State::up);
  CHECK(b->session().state() == State::up);
  // b stops: AdminDown; a goes down and keeps the path in use
  b->admin_down(Clock::now());
  run_until(*a, *b, [&] { return a->session().state() != State::up; });
  CHECK(a->session().state() == State::down);
  CHECK(a->usable());
  CHECK(a->status()["dropped"]["ttl"] == 0);
}

TEST_CASE("BFD drops packets that were forwarded, or come from elsewhere, or name another session", "[root]") {
  lanes::test::require_root();
  Pair p;
  auto a = p.open(p.a, config("va", "198.18.200.0", "198.18.200.1", 1));
  // from b's namespace with TTL 64, then with TTL 255 and a wrong Your Discriminator
  auto send = [&](int ttl, uint32_t your) {
    Control c;
    c.state = State::up;
    c.my_disc = 5;
    c.your_disc = your;
    auto wire = encode(c);
    std::string hex;
    for (auto x : wire) hex += fmt::format("\\x{:02x}", x);
    std::string cmd = "ip netns exec " + p.b + " python3 -c \"import socket;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);"
                      "s.setsockopt(socket.IPPROTO_IP,socket.IP_TTL," + std::to_string(ttl) +
                      ");s.bind(('198.18.200.1',49999));s.sendto(b'" + hex + "',('198.18.200.0',3784))\"";
    REQUIRE(run_command(cmd).status == 0);
  };
  send(64, 0);
  send(255, 99);
  run_until(*a, *a, [&] { return a->status()["dropped"]["ttl"] == 1 && a->status()["dropped"]["discriminator"] == 1; }, 3s);
  CHECK(a->status()["dropped"]["ttl"] == 1);
  CHECK(a->status()["dropped"]["discriminator"] == 1);
  CHECK(a->status()["received"] == 0);
  CHECK(a->session().state() == State::down);
}

TEST_CASE("one lanes-bfdd serves nodes in two namespaces: each node's sessions, socket and state file its own",
          "[root]") {
  lanes::test::require_root();
  Pair p;
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("lbfd-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  struct Rm {
    fs::path d;
    ~Rm() {
      std::error_code ec;
      fs::remove_all(d, ec);
    }
  } rm{dir};
  auto node = [&](const std::string& name, const std::string& ns, const char* ifname, const char* local,
                  const char* remote) {
    return nlohmann::json{{"node", name},
                          {"netns", ns},
                          {"socket", (dir / (name + ".sock")).string()},
                          {"state", (dir / (name + ".json")).string()},
                          {"links", {{{"ifname", ifname}, {"local", local}, {"remote", remote}}}}};
  };
  // both ends of the pair in one daemon: each side's socket must be made
  // in its own namespace, or it binds nowhere
  nlohmann::json plan = {{"nodes", {node("x", p.a, "va", "198.18.200.0", "198.18.200.1"),
                                    node("y", p.b, "vb", "198.18.200.1", "198.18.200.0")}}};
  {
    std::ofstream o(dir / "bfdd.json");
    o << plan.dump();
  }
  lanes::testbed::ProcessSpec spec;
  spec.name = "lanes-bfdd";
  spec.argv = {fs::path(lanes::test::lanes_bin()).parent_path() / "lanes-bfdd", "--config", (dir / "bfdd.json").string(),
               "--state", (dir / "bfdd-state.json").string()};
  spec.log_path = (dir / "bfdd.log").string();
  auto d = lanes::testbed::Daemon::start(spec);
  REQUIRE(d.ok());
  auto state = [&](const std::string& f) {
    std::ifstream in(dir / f);
    auto j = nlohmann::json::parse(in, nullptr, false);
    return j.is_object() ? j : nlohmann::json::object();
  };
  auto up = [&](const std::string& f) {
    auto s = state(f).value("sessions", nlohmann::json::array());
    return s.size() == 1 && s[0].value("state", "") == "up";
  };
  // the state files say up once both sessions are (written at once on a change)
  bool both = lanes::test::eventually([&] { return up("x.json") && up("y.json"); }, 10s, 20ms);
  auto log = run_command("cat " + (dir / "bfdd.log").string()).out;
  INFO(log);
  REQUIRE(both);
  CHECK(state("bfdd-state.json").value("ready", false));
  CHECK(state("bfdd-state.json")["nodes"] == nlohmann::json{"x", "y"});
  CHECK(state("x.json")["sessions"][0]["remote"] == "198.18.200.1");
  CHECK(state("y.json")["sessions"][0]["ifname"] == "vb");
  // each node's verdict socket tells that node's links
  for (const char* n : {"x", "y"}) {
    VerdictClient c((dir / (std::string(n) + ".sock")).string());
    REQUIRE(c.connect());
    std::optional<Verdicts> v;
    lanes::test::eventually([&] { return (v = c.read()).has_value(); }, 5s, 10ms);
    REQUIRE(v);
    CHECK(v->size() == 1);
    CHECK(v->begin()->second);
  }
  // Up on both sides, the peers' steady packets are taken by the receive
  // filter (the state file, written every 5 s, counts them)
  auto absorbed = [&](const std::string& f) {
    auto s = state(f).value("sessions", nlohmann::json::array());
    return s.size() == 1 ? s[0].value("absorbed", uint64_t{0}) : uint64_t{0};
  };
  CHECK(lanes::test::eventually([&] { return absorbed("x.json") > 0 && absorbed("y.json") > 0; }, 15s, 100ms));
  // a drop before the socket (netfilter, as the silent-drop fault) still
  // starves the session: the filter sees only what reaches the socket
  REQUIRE(run_command("ip netns exec " + p.b + " nft 'add table netdev lbfd ; add chain netdev lbfd in { type filter hook "
                      "ingress device \"vb\" priority 0 ; policy drop ; }'").status == 0);
  auto down = [&](const std::string& f) {
    auto s = state(f).value("sessions", nlohmann::json::array());
    return s.size() == 1 && !s[0].value("usable", true);
  };
  CHECK(lanes::test::eventually([&] { return down("x.json") && down("y.json"); }, 10s, 20ms));
  CHECK(state("y.json")["sessions"][0]["diag"] == "control detection time expired");  // y heard nothing
  REQUIRE(run_command("ip netns exec " + p.b + " nft delete table netdev lbfd").status == 0);
  CHECK(lanes::test::eventually([&] { return up("x.json") && up("y.json"); }, 10s, 20ms));
  auto rc = d.value().stop();
  REQUIRE(rc.ok());
  CHECK(rc.value() == 0);
  CHECK(run_command("grep -c 'sessions said AdminDown' " + (dir / "bfdd.log").string()).out.find('1') == 0);
}
