// Traffic engine versus iperf3 on the same path (job container -> storage,
// NICs unshaped so the engine's own cost shows): throughput ratio.
//
// usage: lanes_bench_engine [FLOWS] [SECONDS] [RATE]   (root; RATE per NIC, default off)

#include <cstdio>
#include <fstream>

#include "bgp_support.hpp"
#include "engine_support.hpp"

using namespace lanes::testbed;
using lanes::test::ScopedRun;

int main(int argc, char** argv) {
  lanes::test::require_root();
  int flows = argc > 1 ? std::atoi(argv[1]) : 16;
  int secs = argc > 2 ? std::atoi(argv[2]) : 5;
  std::string rate = argc > 3 ? argv[3] : "off";
  auto path = std::filesystem::temp_directory_path() / "lanes-bench-engine.xml";
  std::ofstream(path) << "<topology name=\"engine\"><rack name=\"r1\"><host name=\"h\" count=\"1\" nics=\"4\" rate=\"" << rate << "\">"
                      << "<job egress=\"bpf\"/></host><server name=\"storage\"/></rack></topology>";
  ScopedRun run(path.string(), true, lanes::test::host_roles());
  std::filesystem::remove(path);
  auto job = Netns::open(lanes::hostnet::job_netns(run.id(), "h1")).value();
  int storage = run.tb().netns(run.node("storage")).fd();
  std::string dst;
  for (const auto& l : run.topo().links)
    if (l.kind == LinkKind::server) dst = l.b.addr4.addr.to_string();

  // iperf3 first: its rate sizes the engine's transfer to about the same duration
  ProcessSpec srv{"iperf3 -s", {"iperf3", "-s", "-p", "5201"}};
  srv.netns_fd = storage;
  srv.log_path = "/dev/null";
  auto server = Daemon::start(srv).value();
  lanes::test::wait_listening(storage, 5201);
  ProcessSpec cli{"iperf3", {"iperf3", "-c", dst, "-p", "5201", "-P", std::to_string(flows), "-t", std::to_string(secs),
                             "-J"}};
  cli.netns_fd = job.fd();
  cli.new_session = false;
  auto ir = run_capture(cli, std::chrono::seconds(120));
  double iperf = nlohmann::json::parse(ir.value().out)["end"]["sum_received"]["bits_per_second"].get<double>();

  uint64_t per_flow = static_cast<uint64_t>(iperf / 8 * secs / flows);
  std::string out = run.registry().dir(run.id()) + "/recv.json";
  auto recv = lanes::test::start_receiver(storage, 5301, flows, out);
  auto s = lanes::test::send(job.fd(), dst, 5301, flows, per_flow);
  recv.wait();
  auto r = lanes::test::read_json(out);
  double engine = s.value("gbps", 0.0) * 1e9;
  std::printf("container -> storage, %d flows, NICs at %s, egress bpf:\n", flows, rate.c_str());
  std::printf("  iperf3          %7.0f Mbit/s\n", iperf / 1e6);
  double steady = s.value("steady_gbps", 0.0) * 1e9;
  std::printf("  lanes-traffic   %7.0f Mbit/s start to finish, %7.0f Mbit/s steady (after the first second)\n",
              engine / 1e6, steady / 1e6);
  std::printf("                  %llu bytes verified by the receiver (%s)\n",
              static_cast<unsigned long long>(r.value("verified_bytes", uint64_t{0})),
              r.value("all_complete", false) ? "all complete" : "INCOMPLETE");
  std::printf("  ratio engine / iperf3: %.3f start to finish, %.3f steady\n", iperf > 0 ? engine / iperf : 0.0,
              iperf > 0 ? steady / iperf : 0.0);
  return 0;
}
