// Bring-up and teardown benchmark: runs `lanes up --wait` and `lanes down`
// on a topology N times and prints the medians of objects up, daemons
// ready, BGP converged (read from the switches' kernels) and teardown; the
// peak memory of `lanes up`; the memory of the run's daemons (PSS, summed
// by program, and per host) and of the kernel (slab and per-CPU memory the
// run added); and the kernel's own floor for the same namespaces and veth
// pairs, job containers included, made by `ip -batch`, with and without
// their permanent neighbours (no addresses, qdiscs or sysctls), as a ratio.
//
// usage: lanes_bench_bringup LANES_BIN TOPOLOGY [RUNS]   (root)

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <map>
#include <nlohmann/json.hpp>

#include "lanes/testbed/neighbors.hpp"
#include "lanes/testbed/run_registry.hpp"
#include "lanes/testbed/topology_loader.hpp"

namespace {

struct Measured {
  double seconds = 0;
  long maxrss_kb = 0;
  int status = -1;
  std::string out;
};

Measured run(const std::vector<std::string>& argv, bool capture = false) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  auto t0 = std::chrono::steady_clock::now();
  // output to a file, not a pipe: the supervisor `lanes up` leaves running
  // would hold a pipe open
  std::string out_path = "/tmp/lanes-bench-out-" + std::to_string(::getpid());
  pid_t pid = ::fork();
  if (pid == 0) {
    int devnull = ::open("/dev/null", O_WRONLY);
    int out = capture ? ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600) : devnull;
    ::dup2(out, 1);
    ::dup2(devnull, 2);
    ::execvp(args[0], args.data());
    _exit(127);
  }
  Measured m;
  int st = 0;
  rusage ru{};
  ::wait4(pid, &st, 0, &ru);
  if (capture) {
    std::ifstream in(out_path);
    m.out.assign(std::istreambuf_iterator<char>(in), {});
    ::unlink(out_path.c_str());
  }
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  m.maxrss_kb = ru.ru_maxrss;
  m.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return m;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// A /proc/meminfo field in kB.
long meminfo_kb(const std::string& field) {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  return 0;
}
long kernel_kb() {
  return meminfo_kb("Slab") + meminfo_kb("Percpu") + meminfo_kb("KernelStack") + meminfo_kb("PageTables");
}

// Memory (PSS, kB) of ROOT and its descendants, summed by program name.
std::map<std::string, std::pair<int, long>> rss_of_tree(pid_t root) {
  std::map<pid_t, pid_t> parent;
  std::map<pid_t, std::string> comm;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    std::string n = e.path().filename().string();
    if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream st(e.path() / "stat");
    std::string line;
    if (!std::getline(st, line)) continue;
    auto open = line.find('('), close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close + 2 > line.size()) continue;
    std::istringstream rest(line.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    pid_t pid = std::stoi(n);
    parent[pid] = ppid;
    comm[pid] = line.substr(open + 1, close - open - 1);
  }
  std::map<std::string, std::pair<int, long>> out;
  for (const auto& [pid, pp] : parent) {
    pid_t p = pid;
    while (p > 1 && p != root) p = parent.count(p) ? parent[p] : 0;
    if (p != root) continue;
    // PSS: each shared page counted once over the processes that map it
    // (RSS would count libstdc++ and libnl once per daemon)
    std::ifstream status("/proc/" + std::to_string(pid) + "/smaps_rollup");
    long kb = 0;
    for (std::string line; std::getline(status, line);)
      if (line.rfind("Pss:", 0) == 0) kb = std::stol(line.substr(4));
    auto& slot = out[comm[pid]];
    ++slot.first;
    slot.second += kb;
  }
  return out;
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

  std::vector<double> up, objects, daemons, converged, down;
  long peak = 0;
  std::map<std::string, std::pair<int, long>> rss;  // of the last run
  long kernel_added_kb = 0;
  size_t hosts = topo.count(lanes::testbed::NodeKind::host);
  for (int i = 0; i < runs; ++i) {
    std::string id = reg.new_id();
    long kernel_before = kernel_kb();
    auto u = run({lanes, "up", topo_file, "--run-id", id, "--wait", "600s", "--json"}, true);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(u.out);
    } catch (const std::exception&) {
    }
    if (u.status == 0 && j.contains("converged")) {
      objects.push_back(j["timings_ms"]["total"].get<double>() / 1000);
      daemons.push_back(j["timings_ms"]["switches"].get<double>() / 1000);
      converged.push_back(j["converged"]["after_ms"].get<double>() / 1000);
      kernel_added_kb = kernel_kb() - kernel_before;
      for (const auto& sup : lanes::testbed::find_supervisors(id, reg.base())) rss = rss_of_tree(sup.first);
    }
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
  std::vector<double> floor_s, neigh_s;
  for (int i = 0; i < runs; ++i) {
    // no owner record: if we die, `lanes clean` leaves these alone
    // (`ip netns del` them by name)
    std::string pre = "lanes-" + reg.new_id() + "-";
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
      // job containers: a namespace and a veth pair per NIC
      for (const auto& n : topo.nodes) {
        if (n.kind != lanes::testbed::NodeKind::host || !n.job) continue;
        ns << "netns add " << pre << n.name << ".job\n";
        del << "netns del " << pre << n.name << ".job\n";
        for (size_t k = 0; k < n.nics.size(); ++k)
          links << "link add jnic" << k << " netns " << pre << n.name << " type veth peer name eth" << k << " netns "
                << pre << n.name << ".job\n";
      }
    }
    // the permanent neighbours lanes installs (both ends of every link, both
    // families; the container links' too): a batch per namespace, since a
    // batch line cannot name one
    std::map<std::string, std::ostringstream> neigh;
    for (const auto& e : lanes::testbed::link_neighbors(topo))
      neigh[pre + topo.nodes[e.node].name] << "neigh add " << e.ip << " lladdr " << lanes::testbed::to_string(e.mac)
                                             << " dev " << e.ifname << " nud permanent\n";
    for (size_t h = 0; h < topo.nodes.size(); ++h) {
      const auto& n = topo.nodes[h];
      if (n.kind != lanes::testbed::NodeKind::host || !n.job) continue;
      for (const auto& nic : n.nics) {
        auto hm = lanes::testbed::container_link_mac(static_cast<int>(h), nic.index, 0),
             cm = lanes::testbed::container_link_mac(static_cast<int>(h), nic.index, 1);
        std::string j = "jnic" + std::to_string(nic.index), e = "eth" + std::to_string(nic.index);
        neigh[pre + n.name] << "neigh add " << nic.cont_side4.addr.to_string() << " lladdr "
                            << lanes::testbed::to_string(cm) << " dev " << j << " nud permanent\n"
                            << "neigh add " << nic.cont_side6.addr.to_string() << " lladdr "
                            << lanes::testbed::to_string(cm) << " dev " << j << " nud permanent\n";
        neigh[pre + n.name + ".job"] << "neigh add " << nic.host_side4.addr.to_string() << " lladdr "
                                     << lanes::testbed::to_string(hm) << " dev " << e << " nud permanent\n"
                                     << "neigh add " << nic.host_side6.addr.to_string() << " lladdr "
                                     << lanes::testbed::to_string(hm) << " dev " << e << " nud permanent\n";
      }
    }
    std::vector<std::string> neigh_files;
    for (auto& [ns, text] : neigh) {
      neigh_files.push_back("/tmp/lanes-bench-neigh-" + std::to_string(neigh_files.size()) + ".batch");
      std::ofstream(neigh_files.back()) << text.str();
    }
    // `ip -n NS -batch` runs every line inside NS; "link add ... netns X"
    // then moves both ends where they belong.
    auto t0 = std::chrono::steady_clock::now();
    auto a = run({"ip", "-batch", nsb});
    auto b = run({"ip", "-n", pre + topo.nodes[0].name, "-batch", lb});
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto t1 = std::chrono::steady_clock::now();
    int neigh_failed = 0;
    size_t k = 0;
    for (auto& [ns, text] : neigh) neigh_failed += run({"ip", "-n", ns, "-batch", neigh_files[k++]}).status != 0;
    neigh_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count());
    for (const auto& f : neigh_files) std::filesystem::remove(f);
    if (neigh_failed) std::fprintf(stderr, "ip neigh batches failed in %d namespaces\n", neigh_failed);
    run({"ip", "-force", "-batch", db});
    for (const auto& f : {nsb, lb, db}) std::filesystem::remove(f);  // the bench leaves nothing behind
    if (a.status != 0 || b.status != 0) {
      std::fprintf(stderr, "ip -batch failed (%d/%d)\n", a.status, b.status);
      return 1;
    }
    floor_s.push_back(s);
  }

  double mo = median(objects), mu = median(up), md = median(down), mf = median(floor_s);
  std::printf("topology %s: %zu namespaces + %zu job containers, %zu veth pairs, %zu hosts, %d runs\n",
              topo.name.c_str(), topo.nodes.size(), hosts, topo.links.size(), hosts, runs);
  std::printf("  objects up        median %7.3f s\n", mo);
  std::printf("  daemons ready     median %7.3f s  (after the objects)\n", median(daemons));
  std::printf("  BGP converged     median %7.3f s  (after the daemons)\n", median(converged));
  std::printf("  lanes up --wait   median %7.3f s   (min %.3f, max %.3f)\n", mu,
              *std::min_element(up.begin(), up.end()), *std::max_element(up.begin(), up.end()));
  std::printf("  lanes down        median %7.3f s   (min %.3f, max %.3f)\n", md,
              *std::min_element(down.begin(), down.end()), *std::max_element(down.begin(), down.end()));
  double mn = median(neigh_s);
  std::printf("  ip -batch floor (namespaces, containers, veths) median %.3f s; their permanent neighbours %.3f s more\n"
              "    (a batch per namespace: %zu ip processes)\n",
              mf, mn, topo.nodes.size() + hosts);
  std::printf("  ratio objects up / floor: %.2fx without the neighbours, %.2fx with them\n", mf > 0 ? mo / mf : 0.0,
              mf + mn > 0 ? mo / (mf + mn) : 0.0);
  std::printf("  peak RSS of lanes up: %.1f MiB\n", peak / 1024.0);
  long total = 0;
  for (const auto& [name, v] : rss) total += v.second;
  std::printf("  memory of the run's daemons (PSS): %.1f MiB in all", total / 1024.0);
  if (hosts) std::printf(", %.2f MiB per host", total / 1024.0 / static_cast<double>(hosts));
  std::printf("\n");
  for (const auto& [name, v] : rss)
    std::printf("    %-18s %5d processes %9.1f MiB  (%.2f MiB each)\n", name.c_str(), v.first, v.second / 1024.0,
                v.second / 1024.0 / v.first);
  std::printf("  kernel memory the run added (slab, per-CPU, stacks, page tables): %.1f MiB", kernel_added_kb / 1024.0);
  if (hosts) std::printf(", %.2f MiB per host", kernel_added_kb / 1024.0 / static_cast<double>(hosts));
  std::printf("\n");
  return 0;
}
