// Bring-up and teardown benchmark: runs `lanes up` and `lanes down` on a
// topology N times and prints the medians, the peak memory of `lanes up`,
// and the kernel's own floor for the same namespaces and veth pairs made
// by `ip -batch` (no addresses, qdiscs or sysctls), as a ratio.
//
// usage: lanes_bench_bringup LANES_BIN TOPOLOGY [RUNS]   (root)

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "lanes/testbed/run_registry.hpp"
#include "lanes/testbed/topology_loader.hpp"

namespace {

struct Measured {
  double seconds = 0;
  long maxrss_kb = 0;
  int status = -1;
};

Measured run(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  auto t0 = std::chrono::steady_clock::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    ::execvp(args[0], args.data());
    _exit(127);
  }
  int st = 0;
  rusage ru{};
  ::wait4(pid, &st, 0, &ru);
  Measured m;
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  m.maxrss_kb = ru.ru_maxrss;
  m.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return m;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s LANES_BIN TOPOLOGY [RUNS]\n", argv[0]);
    return 2;
  }
  if (::geteuid() != 0) {
    std::fprintf(stderr, "not run: the bring-up benchmark needs root\n");
    return 77;
  }
  std::string lanes = argv[1], topo_file = argv[2];
  int runs = argc > 3 ? std::atoi(argv[3]) : 5;
  auto topo = lanes::testbed::load_topology(topo_file);
  lanes::testbed::RunRegistry reg;

  std::vector<double> up, down;
  long peak = 0;
  for (int i = 0; i < runs; ++i) {
    std::string id = reg.new_id();
    auto u = run({lanes, "up", topo_file, "--run-id", id});
    auto d = run({lanes, "down", id});
    if (u.status != 0 || d.status != 0) {
      std::fprintf(stderr, "lanes up/down failed (%d/%d)\n", u.status, d.status);
      return 1;
    }
    up.push_back(u.seconds);
    down.push_back(d.seconds);
    peak = std::max(peak, u.maxrss_kb);
  }

  // the kernel's floor: the same namespaces and veth pairs through ip -batch,
  // every veth created inside the first switch's namespace (never the root one)
  std::vector<double> floor_s;
  for (int i = 0; i < runs; ++i) {
    std::string pre = "lanes-" + reg.new_id() + "-";  // `lanes clean` finds these if we die
    std::string nsb = "/tmp/lanes-bench-ns.batch", lb = "/tmp/lanes-bench-links.batch",
                db = "/tmp/lanes-bench-del.batch";
    {
      std::ofstream ns(nsb), links(lb), del(db);
      for (const auto& n : topo.nodes) {
        ns << "netns add " << pre << n.name << "\n";
        del << "netns del " << pre << n.name << "\n";
      }
      for (const auto& l : topo.links)
        links << "link add " << l.a.ifname << " netns " << pre << topo.nodes[l.a.node].name << " type veth peer name "
              << l.b.ifname << " netns " << pre << topo.nodes[l.b.node].name << "\n";
    }
    // `ip -n NS -batch` runs every line inside NS; "link add ... netns X"
    // then moves both ends where they belong.
    auto t0 = std::chrono::steady_clock::now();
    auto a = run({"ip", "-batch", nsb});
    auto b = run({"ip", "-n", pre + topo.nodes[0].name, "-batch", lb});
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    run({"ip", "-force", "-batch", db});
    if (a.status != 0 || b.status != 0) {
      std::fprintf(stderr, "ip -batch failed (%d/%d)\n", a.status, b.status);
      return 1;
    }
    floor_s.push_back(s);
  }

  double mu = median(up), md = median(down), mf = median(floor_s);
  std::printf("topology %s: %zu namespaces, %zu veth pairs, %d runs\n", topo.name.c_str(),
              topo.nodes.size(), topo.links.size(), runs);
  std::printf("  lanes up    median %7.3f s   (min %.3f, max %.3f)\n", mu,
              *std::min_element(up.begin(), up.end()), *std::max_element(up.begin(), up.end()));
  std::printf("  lanes down  median %7.3f s   (min %.3f, max %.3f)\n", md,
              *std::min_element(down.begin(), down.end()), *std::max_element(down.begin(), down.end()));
  std::printf("  ip -batch floor (namespaces + veths only) median %.3f s\n", mf);
  std::printf("  ratio lanes up / floor: %.2fx\n", mf > 0 ? mu / mf : 0.0);
  std::printf("  peak RSS of lanes up: %.1f MiB\n", peak / 1024.0);
  return 0;
}
