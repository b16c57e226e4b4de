// TBF benchmark: what one NIC of lanes carries at its line rate. Two
// namespaces of the benchmark's own joined by a veth pair, shaped on both
// sides by Netlink::set_tbf (the burst and queue lanes gives every link),
// and lanes-traffic sending F flows across for SECONDS at each rate. For
// every rate and flow count it prints the wire rate over the steady part
// (the sender's link counter, after the first second and without the
// last 0.5 s) against the line rate, the goodput, and the retransmits; and
// once, unshaped, what the machine carries at all (a rate above it cannot
// be reached whatever the TBF does). Prints figures; never fails on a
// number.
//
// TCP is cubic, as in the scenarios.
//
// usage: lanes_bench_tbf [SECONDS] [RATES] [FLOWS]   (root; default 4
//        10mbit,100mbit,1gbit,10gbit 1,8,64)

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "lanes/testbed/netlink.hpp"
#include "lanes/testbed/netns.hpp"
#include "lanes/testbed/process.hpp"
#include "lanes/testbed/topology_loader.hpp"
#include "lanes/scenarios/traffic_results.hpp"
#include "root_support.hpp"

using namespace lanes::testbed;
using lanes::test::run_command;
namespace traffic = lanes::scenarios::traffic;

namespace {

const char* kCongestion = "cubic";  // what scenarios run unless they name another
const std::string kTraffic = (std::filesystem::path(LANES_BIN).parent_path() / "lanes-traffic").string();

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) out.push_back(x);
  return out;
}

// the benchmark's two namespaces, removed however it ends
struct Pair {
  std::string a = "ltbf-" + std::to_string(::getpid()) + "-a", b = "ltbf-" + std::to_string(::getpid()) + "-b";
  Pair() {
    for (const auto& c : {"ip netns add " + a, "ip netns add " + b,
                          "ip -n " + a + " link add va type veth peer name vb netns " + b,
                          "ip -n " + a + " addr add 198.18.201.0/31 dev va",
                          "ip -n " + b + " addr add 198.18.201.1/31 dev vb", "ip -n " + a + " link set va up",
                          "ip -n " + b + " link set vb up", "ip -n " + a + " link set lo up",
                          "ip -n " + b + " link set lo up"})
      if (run_command(c).status != 0) throw std::runtime_error("failed: " + c);
  }
  ~Pair() {
    (void)run_command("ip netns del " + a + " 2>/dev/null");
    (void)run_command("ip netns del " + b + " 2>/dev/null");
  }
};

struct Cell {
  double wire_gbps = 0, goodput_gbps = 0;
  uint64_t retransmits = 0;
  bool verified = false;
};

// what left va: its TBF's count when it has one (each segment with its
// headers, as the line rate counts), else the link's (a GSO packet counts
// its headers once)
uint64_t tx_bytes(Netlink& nl, int index) {
  if (auto qs = nl.qdiscs(); qs.ok())
    for (const auto& q : qs.value())
      if (q.index == index && q.kind == "tbf") return q.bytes;
  auto l = nl.link("va");
  return l.ok() && l.value() ? l.value()->tx_bytes : 0;
}

Cell measure(Netns& na, Netns& nb, Netlink& la, int ia, double line_bps, int flows, double seconds) {
  static int port = 5601;
  ++port;
  ProcessSpec rs{"recv", {kTraffic, "recv", "--port", std::to_string(port), "--flows", std::to_string(flows),
                          "--congestion", kCongestion}};
  rs.netns_fd = nb.fd();
  rs.log_path = "/dev/null";  // the sender's result says what arrived (its receiver closes each flow once all came)
  auto recv = Daemon::start(rs);
  if (!recv) throw std::runtime_error(recv.error().what());
  lanes::test::wait_listening(nb.fd(), port);
  uint64_t total = static_cast<uint64_t>(line_bps / 8 * seconds);
  ProcessSpec ss{"send",
                 {kTraffic, "send", "--to", "198.18.201.1", "--port", std::to_string(port), "--flows",
                  std::to_string(flows), "--total", std::to_string(total), "--congestion", kCongestion}};
  ss.netns_fd = na.fd();
  // the wire rate: the link's counter, sampled every 100 ms while it sends
  std::vector<std::pair<double, uint64_t>> samples;
  auto t0 = std::chrono::steady_clock::now();
  std::optional<Result<Captured>> out;
  std::atomic<bool> sent{false};
  std::thread sender([&] {
    out.emplace(run_capture(ss, std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000 * 4 + 30'000))));
    sent = true;
  });
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  while (!sent) {  // the sender's own timeout bounds it
    samples.push_back({elapsed(), tx_bytes(la, ia)});
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  sender.join();
  recv.value().wait();
  Cell c;
  double end = samples.empty() ? 0 : samples.back().first;
  std::pair<double, uint64_t> a{0, 0}, b{0, 0};
  for (const auto& s : samples) {
    if (s.first >= 1.0 && a.first == 0) a = s;
    if (s.first <= end - 0.5) b = s;
  }
  if (b.first > a.first) c.wire_gbps = static_cast<double>(b.second - a.second) * 8 / (b.first - a.first) / 1e9;
  if (out && out->ok()) {
    std::istringstream in(out->value().out);
    std::string line, last;
    while (std::getline(in, line))
      if (!line.empty() && line[0] == '{') last = line;
    try {
      auto r = nlohmann::json::parse(last).get<traffic::SendResult>();
      c.goodput_gbps = r.steady_gbps;
      for (const auto& f : r.flows) c.retransmits += f.retransmits;
      c.verified = r.connection_errors == 0;
    } catch (const std::exception&) {
    }
  }
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  if (::geteuid() != 0) {
    std::fprintf(stderr, "lanes_bench_tbf: needs root (namespaces and qdiscs)\n");
    return 77;
  }
  double seconds = argc > 1 ? std::stod(argv[1]) : 4;
  auto rates = split(argc > 2 ? argv[2] : "10mbit,100mbit,1gbit,10gbit");
  std::vector<int> flows;
  for (const auto& f : split(argc > 3 ? argv[3] : "1,8,64")) flows.push_back(std::stoi(f));
  Pair p;
  auto na = Netns::open(p.a).value(), nb = Netns::open(p.b).value();
  auto la = Netlink::open_in(na.fd(), p.a).value(), lb = Netlink::open_in(nb.fd(), p.b).value();
  int ia = la.ifindex("va").value(), ib = lb.ifindex("vb").value();

  std::printf("unshaped veth pair, %g s per transfer, %s TCP:\n", seconds, kCongestion);
  double cap = 0;
  for (int f : flows) {
    Cell c = measure(na, nb, la, ia, 20e9, f, seconds);
    std::printf("  %3d flows: wire %.2f Gbit/s, goodput %.2f Gbit/s\n", f, c.wire_gbps, c.goodput_gbps);
    cap = std::max(cap, c.wire_gbps);
  }
  std::printf("\nTBF on both sides as lanes sets it (burst, limit), wire rate over the steady part / line rate:\n");
  std::printf("%-9s %-18s", "rate", "burst / limit");
  for (int f : flows) std::printf("  %3d flows (retrans)   ", f);
  std::printf("\n");
  for (const auto& r : rates) {
    uint64_t bps = 0;
    if (!parse_rate(r, bps)) {
      std::fprintf(stderr, "lanes_bench_tbf: bad rate %s\n", r.c_str());
      return 2;
    }
    double line = static_cast<double>(bps);
    if (!la.set_tbf(ia, bps, "va") || !lb.set_tbf(ib, bps, "vb")) {
      std::fprintf(stderr, "lanes_bench_tbf: setting TBF %s failed\n", r.c_str());
      return 1;
    }
    uint32_t burst = 0, limit = 0;
    for (const auto& q : la.qdiscs().value())
      if (q.index == ia && q.kind == "tbf") burst = q.burst_bytes, limit = q.limit_bytes;
    std::printf("%-9s %7u / %-8u", r.c_str(), burst, limit);
    std::fflush(stdout);
    for (int f : flows) {
      Cell c = measure(na, nb, la, ia, line, f, seconds);
      double reach = std::min(line / 1e9, cap);
      std::printf("  %5.1f%% (%6llu)%s   ", 100 * c.wire_gbps / (line / 1e9),
                  static_cast<unsigned long long>(c.retransmits),
                  reach < line / 1e9 * 0.99 ? " cpu" : c.verified ? "    " : " ERR");
      std::fflush(stdout);
    }
    std::printf("\n");
  }
  std::printf("\n(\"cpu\": the line rate is above what the machine carried unshaped, %.2f Gbit/s)\n", cap);
  return 0;
}
