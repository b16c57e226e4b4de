// hostnet benchmark: aggregate egress throughput per mode versus single
// (4 and 16 flows, 4 NICs at RATE), per-NIC shares, where bpf-numa put
// each flow (its sender pinned to CPU 0, node 0: NICs 0 and 1), and
// packets per second per busy core through the BPF path versus the
// host-routed ecmp path with shaping off. Prints figures; never fails on a
// number.
//
// usage: lanes_bench_hostnet [RATE] [SECONDS]   (root; default 1gbit 5)

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "bgp_support.hpp"
#include "lanes/hostnet/hostnet.hpp"

using namespace lanes::testbed;
using lanes::test::eventually;
using lanes::test::group_members;
using lanes::test::ScopedRun;
using lanes::test::StandIn;

namespace {

std::string topo(const std::string& rate, const std::vector<std::string>& modes) {
  auto path = std::filesystem::temp_directory_path() / ("lanes-bench-" + std::to_string(::getpid()) + ".xml");
  std::ofstream o(path);
  o << "<topology name=\"bench\"><rack name=\"r1\">\n";
  for (const auto& m : modes)
    o << "<host name=\"" << (m == "bpf-numa" ? "numa" : m) << "\" nics=\"4\" rate=\"" << rate << "\"><job egress=\"" << m
      << "\"/></host>\n";
  o << "<server name=\"storage\"/></rack></topology>\n";
  return path.string();
}

uint64_t busy_jiffies() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  uint64_t user, nice, sys, idle, iowait, irq, softirq, steal;
  in >> cpu >> user >> nice >> sys >> idle >> iowait >> irq >> softirq >> steal;
  return user + nice + sys + irq + softirq + steal;
}

struct Bench {
  std::string file;
  ScopedRun run;
  std::vector<std::unique_ptr<StandIn>> standins;
  std::map<std::string, Netns> ns;
  std::string storage4;
  std::optional<Daemon> server;

  Bench(const std::string& rate, const std::vector<std::string>& modes)
      : file(topo(rate, modes)), run(file, true, {std::make_shared<lanes::hostnet::HostRole>()}) {
    std::filesystem::remove(file);
    auto& sw = run.tb().netlink(run.node("r1-tor"));
    for (const auto& m : modes) {
      std::string h = m == "bpf-numa" ? "numa" : m;
      ns.emplace(h, Netns::open(lanes::hostnet::job_netns(run.id(), h)).value());
      standins.push_back(std::make_unique<StandIn>(run, h, std::vector<std::string>{}, ns.at(h).fd()));
      const auto& node = run.topo().nodes[run.node(h)];
      eventually([&] { return group_members(sw, node.job->task_ip4.to_string() + "/32").size() == 4; },
                 std::chrono::seconds(60));
    }
    for (const auto& l : run.topo().links)
      if (l.kind == LinkKind::server) storage4 = l.b.addr4.addr.to_string();
    ProcessSpec spec{"iperf3 -s", {"iperf3", "-s", "-p", "5201"}};
    spec.netns_fd = run.tb().netns(run.node("storage")).fd();
    spec.log_path = "/dev/null";
    server.emplace(Daemon::start(spec).value());
    lanes::test::wait_listening(spec.netns_fd, 5201);
  }

  std::vector<uint64_t> nic_tx(const std::string& host) {
    std::vector<uint64_t> v(4, 0);
    for (const auto& l : run.tb().netlink(run.node(host)).links().value())
      if (l.name.size() == 4 && l.name.rfind("nic", 0) == 0) v[static_cast<size_t>(l.name[3] - '0')] = l.tx_bytes;
    return v;
  }

  // the datapath's flow table as the host agent last published it
  nlohmann::json flows(const std::string& host) {
    std::ifstream in(run.registry().dir(run.id()) + "/hosts/" + host + "/host-agent-state.json");
    try {
      return nlohmann::json::parse(in).value("flows", nlohmann::json::array());
    } catch (const std::exception&) {
      return nlohmann::json::array();
    }
  }

  nlohmann::json iperf(const std::string& host, std::vector<std::string> extra) {
    std::vector<std::string> argv = {"iperf3", "-c", storage4, "-p", "5201", "-J"};
    if (host == "numa") argv.insert(argv.begin(), {"taskset", "-c", "0"});
    argv.insert(argv.end(), extra.begin(), extra.end());
    ProcessSpec spec{"iperf3", argv};
    spec.netns_fd = ns.at(host).fd();
    spec.new_session = false;
    auto r = run_capture(spec, std::chrono::seconds(120));
    try {
      return nlohmann::json::parse(r.value().out);
    } catch (const std::exception&) {
      return {};
    }
  }
};

// Where bpf-numa put the data flows of iperf3 run J (its local ports):
// the node each was opened on and the node of the NIC it ended on. The
// agent publishes its table once a second: wait for a table that has them.
void numa_placement(Bench& b, const nlohmann::json& j) {
  std::set<int> ports;
  if (j.contains("start"))
    for (const auto& c : j["start"].value("connected", nlohmann::json::array())) ports.insert(c.value("local_port", 0));
  std::map<std::pair<int, int>, int> placed;  // (opened on, NIC's node) → flows
  for (int tries = 0; tries < 30; ++tries) {
    placed.clear();
    int seen = 0;
    for (const auto& f : b.flows("numa"))
      if (ports.count(f.value("sport", 0))) ++placed[{f.value("node", -1), f.value("nic_node", -1)}], ++seen;
    if (seen >= static_cast<int>(ports.size())) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::string out;
  for (const auto& [k, n] : placed)
    out += fmt::format("{}{} opened on node {} ran on node {}", out.empty() ? "" : ", ", n, k.first, k.second);
  std::printf("          placement: %s\n", out.empty() ? "(not in the agent's table)" : out.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  lanes::test::require_root();
  std::string rate = argc > 1 ? argv[1] : "1gbit";
  std::string secs = argc > 2 ? argv[2] : "5";
  {
    Bench b(rate, {"single", "ecmp", "bpf", "bpf-numa"});
    std::printf("egress throughput, 4 NICs at %s, %s s per run, iperf3 to storage:\n", rate.c_str(), secs.c_str());
    std::map<int, double> single;
    for (int flows : {2, 4, 16}) {
      for (const char* h : {"single", "ecmp", "bpf", "numa"}) {
        auto before = b.nic_tx(h);
        auto j = b.iperf(h, {"-P", std::to_string(flows), "-t", secs});
        auto after = b.nic_tx(h);
        double bps = j.contains("end") ? j["end"]["sum_received"]["bits_per_second"].get<double>() : 0;
        if (std::string(h) == "single") single[flows] = bps;
        double total = 0;
        std::vector<double> d(4);
        for (size_t i = 0; i < 4; ++i) total += d[i] = static_cast<double>(after[i] - before[i]);
        std::printf("  %-7s %2d flows: %6.0f Mbit/s  x%.2f vs single  NIC shares %.2f %.2f %.2f %.2f\n", h, flows,
                    bps / 1e6, single[flows] > 0 ? bps / single[flows] : 0.0, d[0] / total, d[1] / total, d[2] / total,
                    d[3] / total);
        if (std::string(h) == "numa") numa_placement(b, j);
      }
    }
  }
  {
    Bench b("off", {"ecmp", "bpf"});
    std::printf("packets per second per busy core, shaping off, 64-byte UDP, 4 streams, %s s:\n", secs.c_str());
    std::map<std::string, double> ppc;
    for (const char* h : {"ecmp", "bpf"}) {
      uint64_t j0 = busy_jiffies();
      auto t0 = std::chrono::steady_clock::now();
      auto j = b.iperf(h, {"-u", "-b", "0", "-l", "64", "-P", "4", "-t", secs});
      double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      double busy = static_cast<double>(busy_jiffies() - j0) / static_cast<double>(sysconf(_SC_CLK_TCK));
      double pkts = 0;
      if (j.contains("end") && j["end"].contains("sum")) {
        pkts = j["end"]["sum"].value("packets", 0.0) - j["end"]["sum"].value("lost_packets", 0.0);
      }
      ppc[h] = busy > 0 ? pkts / busy : 0;
      std::printf("  %-5s %9.0f packets delivered, %.2f busy CPU-seconds over %.1f s: %8.0f packets/s per core\n", h,
                  pkts, busy, wall, ppc[h]);
    }
    if (ppc["ecmp"] > 0) std::printf("  ratio bpf / ecmp: %.2f\n", ppc["bpf"] / ppc["ecmp"]);
  }
  return 0;
}
