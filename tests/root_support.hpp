#pragma once
// Fixtures for root-tier tests: a run built from a topology file, owned by
// the test and torn down however the test ends.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "lanes/testbed/input_file.hpp"
#include "lanes/testbed/live_run.hpp"
#include "lanes/testbed/netns.hpp"
#include "lanes/testbed/process.hpp"
#include "lanes/testbed/run_registry.hpp"
#include "lanes/testbed/supervisor.hpp"
#include "lanes/testbed/fabric.hpp"
#include "lanes/testbed/topology_loader.hpp"
#include "lanes/switches/switches.hpp"
#include "support.hpp"

namespace lanes::test {

// True once a TCP socket listens on PORT in namespace NS_FD (ss inside it).
inline bool listening(int ns_fd, int port) {
  testbed::ProcessSpec spec{"ss", {"ss", "-Hltn", "sport = :" + std::to_string(port)}};
  spec.netns_fd = ns_fd;
  spec.new_session = false;
  auto r = testbed::run_capture(spec, std::chrono::seconds(2));
  return r && r.value().status == 0 && r.value().out.find("LISTEN") != std::string::npos;
}

inline void wait_listening(int ns_fd, int port) {
  if (!eventually([&] { return listening(ns_fd, port); })) throw std::runtime_error("nothing listens on port " + std::to_string(port));
}

// True once the links of NL named IFNAMES have together sent BYTES more
// than when asked (a transfer is under way), within TIMEOUT: a bounded
// wait on what the kernel counts, where a test would otherwise sleep.
inline bool traffic_flowing(testbed::Netlink& nl, const std::vector<std::string>& ifnames, uint64_t bytes,
                            std::chrono::milliseconds timeout = std::chrono::milliseconds(15'000)) {
  auto sent = [&] {
    uint64_t n = 0;
    if (auto links = nl.links())
      for (const auto& l : links.value())
        for (const auto& i : ifnames)
          if (l.name == i) n += l.tx_bytes;
    return n;
  };
  uint64_t start = sent();
  return eventually([&] { return sent() >= start + bytes; }, timeout, std::chrono::milliseconds(20));
}

// A run brought up as `lanes up` does (LiveRun::start, held by the test
// process), and down when the test ends.
class ScopedRun {
 public:
  // WITH_SWITCHES: gobgpd and the FIB agent on every switch (SwitchRole);
  // MORE: the roles deployed after it (hosts' containers, injectors).
  // Without either: the bare namespaces and links, no supervisor.
  explicit ScopedRun(const std::string& topology_file, bool with_switches = false, testbed::Roles more = {}) {
    require_root();
    testbed::LiveRunOptions o;
    o.topology_xml = testbed::read_input_file(topology_file, "topology file");
    o.topology_file = topology_file;
    o.bin_dir = std::filesystem::path(lanes_bin()).parent_path().string();
    o.held = true;  // dead with the test process: its supervisor stops, a clean removes it
    if (with_switches) o.roles.push_back(std::make_shared<switches::SwitchRole>());
    o.roles.insert(o.roles.end(), more.begin(), more.end());
    auto run = testbed::LiveRun::start(testbed::load_topology(topology_file), reg_, o);
    if (!run) throw run.error();
    run_.emplace(std::move(run).value());
  }
  ScopedRun(const ScopedRun&) = delete;
  ScopedRun& operator=(const ScopedRun&) = delete;

  testbed::Fabric& tb() { return run_->tb(); }
  const testbed::Topology& topo() { return run_->topology(); }
  const std::string& id() const { return run_->id(); }
  const testbed::RunRegistry& registry() const { return run_->registry(); }
  int node(const std::string& name) { return topo().find_node(name); }

  // Runs ARGV inside NODE's namespace and returns its exit status.
  int run_in(const std::string& node_name, std::vector<std::string> argv) {
    testbed::ProcessSpec spec;
    spec.name = argv[0] + " on " + node_name;
    spec.argv = std::move(argv);
    spec.netns_fd = tb().netns(node(node_name)).fd();
    spec.log_path = registry().dir(id()) + "/cmd.log";
    auto d = testbed::Daemon::start(spec);
    if (!d) return -1;
    return d.value().wait();
  }

 private:
  testbed::RunRegistry reg_;
  std::optional<testbed::LiveRun> run_;
};

// The ICMP echo requests the kernel of network namespace NS_FD has
// received (Icmp InEchos of its /proc/net/snmp, read by a thread that
// entered it): what reached a node's own stack, BFD and BGP not counted.
// -1 if the namespace could not be entered or read.
inline long icmp_in_echos(int ns_fd) {
  long n = -1;
  std::thread t([&] {
    if (::setns(ns_fd, CLONE_NEWNET) != 0) return;
    std::ifstream in("/proc/thread-self/net/snmp");
    std::string names, values;
    while (std::getline(in, names) && std::getline(in, values)) {
      if (names.rfind("Icmp:", 0) != 0) continue;
      std::istringstream a(names), b(values);
      std::string name, value;
      while (a >> name && b >> value)
        if (name == "InEchos") n = std::stol(value);
      return;
    }
  });
  t.join();
  return n;
}

// `lanes run DIR/SCENARIO EXTRA... --out DIR/out-<stem> -q` (SCENARIO may
// be an absolute path), its log in DIR/<stem>.log: its exit status and the
// first scenario of its results.json, once every namespace its phases made
// is checked gone.
struct ScenarioRun {
  int status = -1;
  nlohmann::json scenario;
};
inline ScenarioRun lanes_run(const std::filesystem::path& dir, const std::string& scenario,
                             const std::vector<std::string>& extra = {}) {
  std::string stem = std::filesystem::path(scenario).stem().string();
  std::string out = (dir / ("out-" + stem)).string();
  testbed::ProcessSpec run{"lanes run", {lanes_bin(), "run", (dir / scenario).string()}};
  run.argv.insert(run.argv.end(), extra.begin(), extra.end());
  run.argv.insert(run.argv.end(), {"--out", out, "-q"});
  run.log_path = (dir / (stem + ".log")).string();
  auto r = testbed::run_capture(run, std::chrono::seconds(300));
  REQUIRE(r.ok());
  std::ifstream in(out + "/results.json");
  REQUIRE(in);
  ScenarioRun res{r.value().status, nlohmann::json::parse(in)["scenarios"].at(0)};
  for (const auto& ph : res.scenario["phases"]) {
    std::string id = ph.value("run_id", "");
    if (!id.empty()) CHECK(testbed::list_netns(testbed::RunRegistry::netns_prefix(id)).empty());
  }
  return res;
}

// Two namespaces of the test's own, TAG-<pid>-a and -b, joined by a veth
// pair: DEV_A (198.18.NET.0/31) in a, DEV_B (198.18.NET.1, MAC
// 02:00:00:00:NET%256:02) in b; nothing on the link but the test's own
// datagrams (no IPv6 and its listener reports, no ARP: a permanent
// neighbour); removed however the test ends.
struct NsPair {
  std::string a, b;
  NsPair(const std::string& tag, int net, const std::string& dev_a, const std::string& dev_b)
      : a(tag + "-" + std::to_string(::getpid()) + "-a"), b(tag + "-" + std::to_string(::getpid()) + "-b") {
    std::string pre = "198.18." + std::to_string(net) + ".";
    char mac[18];
    std::snprintf(mac, sizeof mac, "02:00:00:00:%02x:02", net % 256);
    for (const auto& c : {"ip netns add " + a, "ip netns add " + b,
                          "ip -n " + a + " link add " + dev_a + " type veth peer name " + dev_b + " netns " + b,
                          "ip -n " + a + " addr add " + pre + "0/31 dev " + dev_a,
                          "ip -n " + b + " addr add " + pre + "1/31 dev " + dev_b,
                          "ip netns exec " + a + " sysctl -qw net.ipv6.conf.all.disable_ipv6=1",
                          "ip netns exec " + b + " sysctl -qw net.ipv6.conf.all.disable_ipv6=1",
                          "ip -n " + a + " neigh add " + pre + "1 lladdr " + mac + " dev " + dev_a + " nud permanent",
                          "ip -n " + b + " link set " + dev_b + " address " + mac, "ip -n " + a + " link set " + dev_a + " up",
                          "ip -n " + b + " link set " + dev_b + " up"})
      if (run_command(c).status != 0) throw std::runtime_error("failed: " + c);
  }
  ~NsPair() {
    (void)run_command("ip netns del " + a);
    (void)run_command("ip netns del " + b);
  }
  NsPair(const NsPair&) = delete;
  NsPair& operator=(const NsPair&) = delete;
  static int fd(const std::string& ns) { return ::open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC); }
};

// a UDP socket made inside namespace NS (it stays there), bound to ADDR:PORT, a big receive buffer
inline int udp_socket_in(const std::string& ns, const char* addr, uint16_t port) {
  int nsfd = NsPair::fd(ns);
  int out = -1;
  auto st = testbed::run_in_netns(
      nsfd,
      [&]() -> testbed::Status {
        out = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        int big = 64 << 20;
        ::setsockopt(out, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_port = htons(port);
        ::inet_pton(AF_INET, addr, &sa.sin_addr);
        if (::bind(out, reinterpret_cast<sockaddr*>(&sa), sizeof sa)) return testbed::errno_error("bind");
        return {};
      },
      "a UDP socket");
  ::close(nsfd);
  REQUIRE(st.ok());
  return out;
}

}  // namespace lanes::test
