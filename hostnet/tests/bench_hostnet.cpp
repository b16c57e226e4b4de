// hostnet benchmark: aggregate egress throughput per mode versus single
// (4 and 16 flows, 4 NICs at RATE), per-NIC shares, where bpf-numa put
// each flow (its sender pinned to CPU 0, node 0: NICs 0 and 1), and
// the forwarding cost per packet through the BPF path versus the
// host-routed ecmp path with shaping off (forwarding() below). Prints
// figures; never fails on a number.
//
// usage: lanes_bench_hostnet [RATE] [SECONDS] [all|throughput|forwarding]
//        (root; default 1gbit 5 all)

#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
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

// ---- forwarding: what the host costs per packet, ecmp (routed) vs bpf ----
//
// Frames are made once and sent with sendmmsg from AF_PACKET sockets on the
// container's links (no UDP socket, no qdisc): 16 flows, 4 per link, from
// the task IP to storage. They are counted at the rack switch's ports
// facing the host; the switch forwards them to storage, which drops them
// (no one listens on port 9), the same work in both modes. The floor:
// frames to a MAC no one has, counted where the host side of the container
// links takes them in and drops them at once (making, sending and
// receiving a frame, without the host's forwarding). The CPU is the whole
// machine's (/proc/stat) over the run: the sender's core does the work
// (veth hands a frame to its peer on the sending CPU), and the host's
// share is a mode's cost minus the floor's. (A tc drop at the switch
// ports, which would spare the switch's and storage's work, stalled the
// container links for the rest of the run on this 6.18 kernel: left out.)

uint16_t ip_checksum(const uint8_t* h, size_t n) {
  uint32_t sum = 0;
  for (size_t i = 0; i + 1 < n; i += 2) sum += static_cast<uint32_t>(h[i] << 8 | h[i + 1]);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

// lanes_bench_hostnet --blast SECS FRAME SRC DST DEV MAC0 MAC1 MAC2 MAC3,
// run in the namespace of devices DEV0..DEV3 (the container's eth<k>, or
// the host's nic<k>): frames of FRAME bytes (Ethernet header included) out
// of each, to MACk, 4 flows per device, in bursts of 64 for SECS seconds.
// Prints the frames the kernel took.
int blast_main(int argc, char** argv) {
  auto usage = [] {
    std::fprintf(stderr, "usage: lanes_bench_hostnet --blast SECS FRAME SRC DST DEV MAC0 MAC1 MAC2 MAC3\n");
    return 2;
  };
  if (argc != 11) return usage();
  std::string prefix = argv[6];
  double secs = std::atof(argv[2]);
  size_t frame = static_cast<size_t>(std::atoi(argv[3]));
  in_addr src{}, dst{};
  if (frame < 60 || frame > 1514 || inet_pton(AF_INET, argv[4], &src) != 1 || inet_pton(AF_INET, argv[5], &dst) != 1)
    return usage();
  constexpr int kBurst = 64;
  std::vector<int> socks;
  std::vector<std::vector<uint8_t>> frames;  // link k's flows at 4k .. 4k+3
  for (int k = 0; k < 4; ++k) {
    std::string eth = prefix + std::to_string(k);
    std::array<uint8_t, 6> dmac{};
    if (std::sscanf(argv[7 + k], "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &dmac[0], &dmac[1], &dmac[2], &dmac[3], &dmac[4],
                    &dmac[5]) != 6)
      return usage();
    int fd = ::socket(AF_PACKET, SOCK_RAW, 0);
    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_IP);
    sll.sll_ifindex = static_cast<int>(if_nametoindex(eth.c_str()));
    ifreq ifr{};
    std::snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", eth.c_str());
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&sll), sizeof sll) || ::ioctl(fd, SIOCGIFHWADDR, &ifr)) {
      std::perror(eth.c_str());
      return 1;
    }
    int one = 1;  // straight to the device: a full link says so (ENOBUFS) instead of dropping
    ::setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one);
    socks.push_back(fd);
    for (int f = 0; f < 4; ++f) {
      std::vector<uint8_t> fr(frame, 0);
      std::memcpy(fr.data(), dmac.data(), 6);
      std::memcpy(fr.data() + 6, ifr.ifr_hwaddr.sa_data, 6);
      fr[12] = 0x08;
      uint8_t* ip = fr.data() + 14;
      size_t ip_len = frame - 14;
      ip[0] = 0x45;
      ip[2] = static_cast<uint8_t>(ip_len >> 8);
      ip[3] = static_cast<uint8_t>(ip_len);
      ip[8] = 64;
      ip[9] = IPPROTO_UDP;
      std::memcpy(ip + 12, &src, 4);
      std::memcpy(ip + 16, &dst, 4);
      uint16_t c = ip_checksum(ip, 20);
      ip[10] = static_cast<uint8_t>(c >> 8);
      ip[11] = static_cast<uint8_t>(c);
      uint8_t* udp = ip + 20;
      uint16_t sport = static_cast<uint16_t>(20000 + 4 * k + f), ulen = static_cast<uint16_t>(ip_len - 20);
      udp[0] = static_cast<uint8_t>(sport >> 8);
      udp[1] = static_cast<uint8_t>(sport);
      udp[3] = 9;  // discard
      udp[4] = static_cast<uint8_t>(ulen >> 8);
      udp[5] = static_cast<uint8_t>(ulen);
      frames.push_back(std::move(fr));
    }
  }
  std::vector<std::vector<mmsghdr>> msgs(4, std::vector<mmsghdr>(kBurst));
  std::vector<std::vector<iovec>> iov(4, std::vector<iovec>(kBurst));
  for (size_t k = 0; k < 4; ++k)
    for (size_t i = 0; i < kBurst; ++i) {
      auto& fr = frames[4 * k + i % 4];
      iov[k][i] = {fr.data(), fr.size()};
      msgs[k][i].msg_hdr.msg_iov = &iov[k][i];
      msgs[k][i].msg_hdr.msg_iovlen = 1;
    }
  uint64_t sent = 0;
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(secs);
  while (std::chrono::steady_clock::now() < end)
    for (size_t k = 0; k < 4; ++k) {
      int n = ::sendmmsg(socks[k], msgs[k].data(), kBurst, 0);
      if (n > 0) sent += static_cast<uint64_t>(n);
    }
  std::printf("%lu\n", static_cast<unsigned long>(sent));
  return 0;
}

// Runs a blast from HOST's container (out of its links to the host, or for
// the floor to a MAC no one has), or from HOST itself (out of its NICs to
// the switch: the path beyond the host); the frames the kernel took.
enum class From { container, floor, nics };
uint64_t blast(Bench& b, const std::string& self, const std::string& host, size_t frame, double secs, From from) {
  std::vector<std::array<uint8_t, 6>> to(4);
  int h = b.run.node(host);
  if (from == From::nics) {
    std::map<std::string, std::array<uint8_t, 6>> port;  // the switch's ports
    for (const auto& l : b.run.tb().netlink(b.run.node("r1-tor")).links().value()) port[l.name] = l.mac;
    for (const auto& l : b.run.topo().links)
      if (l.kind == LinkKind::host_nic && l.b.node == h) to[static_cast<size_t>(l.nic)] = port[l.a.ifname];
  } else {
    for (const auto& l : b.run.tb().netlink(h).links().value())
      if (l.name.size() == 5 && l.name.rfind("jnic", 0) == 0) to[static_cast<size_t>(l.name[4] - '0')] = l.mac;
    if (from == From::floor)
      for (auto& m : to) m[5] ^= 0x80;  // no one's: the host side takes it in and drops it at once
  }
  std::vector<std::string> argv = {self, "--blast", fmt::format("{}", secs), std::to_string(frame),
                                   b.run.topo().nodes[static_cast<size_t>(h)].job->task_ip4.to_string(), b.storage4,
                                   from == From::nics ? "nic" : "eth"};
  for (const auto& m : to)
    argv.push_back(fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5]));
  ProcessSpec spec{"blast", argv};
  spec.netns_fd = from == From::nics ? b.run.tb().netns(h).fd() : b.ns.at(host).fd();
  spec.new_session = false;
  auto r = run_capture(spec, std::chrono::seconds(static_cast<long>(secs) + 30));
  if (!r || r.value().status != 0) throw std::runtime_error("the blast from " + host + " failed");
  return std::stoull(r.value().out);
}

// rx packets over NODE's devices named in DEVS
uint64_t rx_packets(Bench& b, const std::string& node, const std::set<std::string>& devs) {
  uint64_t n = 0;
  for (const auto& l : b.run.tb().netlink(b.run.node(node)).links().value())
    if (devs.count(l.name)) n += l.rx_packets;
  return n;
}

void forwarding(Bench& b, const std::string& self, double secs) {
  // the switch ports facing each host's NICs count what arrives
  std::map<std::string, std::set<std::string>> ports;
  int tor = b.run.node("r1-tor");
  for (const auto& l : b.run.topo().links)
    if (l.kind == LinkKind::host_nic && l.a.node == tor)
      ports[b.run.topo().nodes[static_cast<size_t>(l.b.node)].name].insert(l.a.ifname);
  const std::set<std::string> jnics = {"jnic0", "jnic1", "jnic2", "jnic3"};
  long hz = sysconf(_SC_CLK_TCK);
  std::printf("forwarding cost per packet, shaping off, frames from AF_PACKET sendmmsg (16 flows over 4 devices), "
              "%.0f s each, counted where they arrive:\n", secs);
  struct Row {
    const char* what;
    const char* host;
    From from;
  };
  const Row rows[] = {{"floor", "ecmp", From::floor}, {"beyond", "ecmp", From::nics},
                      {"ecmp", "ecmp", From::container}, {"bpf", "bpf", From::container}};
  for (size_t frame : {64u, 1514u}) {
    std::map<std::string, double> ns_per;
    for (const auto& r : rows) {
      auto counted = [&] {
        return r.from == From::floor ? rx_packets(b, r.host, jnics) : rx_packets(b, "r1-tor", ports[r.host]);
      };
      uint64_t before = counted(), j0 = busy_jiffies();
      auto t0 = std::chrono::steady_clock::now();
      uint64_t sent = blast(b, self, r.host, frame, secs, r.from);
      double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      double busy = static_cast<double>(busy_jiffies() - j0) / static_cast<double>(hz);
      uint64_t got = counted() - before;
      ns_per[r.what] = got ? busy * 1e9 / static_cast<double>(got) : 0;
      double gbit = static_cast<double>(got) * static_cast<double>(frame) * 8 / 1e9;
      std::printf("  %4zu B  %-6s %9.0f sent %9.0f arrived (%4.2f Mpps)  %.2f busy CPU-s: %8.0f packets/s per core, "
                  "%5.0f ns per packet, %.3f CPU-s per Gbit\n",
                  frame, r.what, static_cast<double>(sent), static_cast<double>(got),
                  static_cast<double>(got) / wall / 1e6, busy, busy > 0 ? static_cast<double>(got) / busy : 0,
                  ns_per[r.what], gbit > 0 ? busy / gbit : 0);
    }
    // a mode's row minus the path beyond the host: the container link and the host's forwarding
    double host_ecmp = ns_per["ecmp"] - ns_per["beyond"], host_bpf = ns_per["bpf"] - ns_per["beyond"];
    std::printf("  %4zu B  per core bpf / ecmp: %.2f; container link + host (mode minus beyond): ecmp %.0f ns, bpf "
                "%.0f ns per packet: bpf saves %.0f%% of it\n",
                frame, ns_per["bpf"] > 0 ? ns_per["ecmp"] / ns_per["bpf"] : 0, host_ecmp, host_bpf,
                host_ecmp > 0 ? 100 * (host_ecmp - host_bpf) / host_ecmp : 0);
  }
}

}  // namespace
int bench(int argc, char** argv) {
  std::string rate = argc > 1 ? argv[1] : "1gbit";
  std::string secs = argc > 2 ? argv[2] : "5";
  std::string part = argc > 3 ? argv[3] : "all";
  if (part != "all" && part != "throughput" && part != "forwarding") {
    std::fprintf(stderr, "usage: lanes_bench_hostnet [RATE] [SECONDS] [all|throughput|forwarding]\n");
    return 2;
  }
  if (part != "forwarding") {
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
  if (part != "throughput") {
    Bench b("off", {"ecmp", "bpf"});
    forwarding(b, argv[0], std::stod(secs));
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--blast") return blast_main(argc, argv);
  lanes::test::require_root();
  try {
    return bench(argc, argv);
  } catch (const std::exception& e) {  // unwound: each run taken down on the way
    std::fprintf(stderr, "lanes_bench_hostnet: %s\n", e.what());
    return 1;
  }
}
