#include "lanes/testbed/partition.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "lanes/testbed/limits.hpp"
#include "lanes/testbed/topology_loader.hpp"

namespace lanes::testbed {

namespace {

[[noreturn]] void refuse(const SourceLoc& at, const std::string& what) {
  throw InputError({fmt::format("{}:{}: {}", at.file, at.line, what)});
}

}  // namespace

Placement place(const Topology& t, int machines) {
  if (machines < 1 || machines > kMaxMachines)
    refuse(t.loc, fmt::format("a run spans 1 to {} machines, not {}", kMaxMachines, machines));
  if (machines > 1 && t.links.size() > kVniRunStride - kVniBase)
    refuse(t.loc, fmt::format("{} links: a run over several machines carries at most {} (each its VNI)",
                              t.links.size(), kVniRunStride - kVniBase));
  Placement p;
  p.machines = machines;
  p.machine_of.assign(t.nodes.size(), -1);
  p.share.resize(static_cast<size_t>(machines));
  const int k = machines;
  for (const auto& n : t.nodes)
    if (n.machine >= k)
      refuse(n.loc, fmt::format("{} is pinned to machine {}, but the run has {} machine{} (0 to {})", n.name,
                                n.machine, k, k == 1 ? "" : "s", k - 1));
  if (static_cast<int>(t.racks.size()) < k)
    refuse(t.loc, fmt::format("{} rack{} cannot be split over {} machines: each machine builds whole racks "
                              "(a switch with its hosts), so a run has at most as many machines as racks",
                              t.racks.size(), t.racks.size() == 1 ? "" : "s", k));

  // 1. racks: pinned ones first, then the rest largest first onto the
  // lightest machine
  std::vector<size_t> hosts_on(static_cast<size_t>(k), 0);
  std::vector<int> rack_machine(t.racks.size(), -1);
  std::vector<int> free_racks;
  for (size_t r = 0; r < t.racks.size(); ++r) {
    int sw = t.racks[r].switch_node;
    int pin = sw >= 0 ? t.nodes[static_cast<size_t>(sw)].machine : -1;
    if (pin >= 0) {
      rack_machine[r] = pin;
      hosts_on[static_cast<size_t>(pin)] += t.racks[r].hosts.size();
    } else {
      free_racks.push_back(static_cast<int>(r));
    }
  }
  std::stable_sort(free_racks.begin(), free_racks.end(), [&](int a, int b) {
    return t.racks[static_cast<size_t>(a)].hosts.size() > t.racks[static_cast<size_t>(b)].hosts.size();
  });
  // a machine with no rack yet comes first, whatever its count: every
  // machine builds at least one rack
  std::vector<bool> has_rack(static_cast<size_t>(k), false);
  for (int m : rack_machine)
    if (m >= 0) has_rack[static_cast<size_t>(m)] = true;
  size_t empty = static_cast<size_t>(std::count(has_rack.begin(), has_rack.end(), false));
  if (empty > free_racks.size())
    refuse(t.loc, fmt::format("{} of {} machines would build no rack: the racks pinned with machine= leave {} "
                              "unpinned rack{} for them",
                              empty, k, free_racks.size(), free_racks.size() == 1 ? "" : "s"));
  size_t left = free_racks.size();
  for (int r : free_racks) {
    int best = -1;
    for (int m = 0; m < k; ++m) {
      // while as many racks are left as machines without one, only those
      // machines may take a rack
      if (empty == left && has_rack[static_cast<size_t>(m)]) continue;
      if (best < 0 || hosts_on[static_cast<size_t>(m)] < hosts_on[static_cast<size_t>(best)]) best = m;
    }
    rack_machine[static_cast<size_t>(r)] = best;
    hosts_on[static_cast<size_t>(best)] += t.racks[static_cast<size_t>(r)].hosts.size();
    if (!has_rack[static_cast<size_t>(best)]) {
      has_rack[static_cast<size_t>(best)] = true;
      --empty;
    }
    --left;
  }
  for (size_t r = 0; r < t.racks.size(); ++r) {
    const Rack& rack = t.racks[r];
    int m = rack_machine[r];
    p.share[static_cast<size_t>(m)].racks.push_back(static_cast<int>(r));
    if (rack.switch_node >= 0) p.machine_of[static_cast<size_t>(rack.switch_node)] = m;
    for (int h : rack.hosts) p.machine_of[static_cast<size_t>(h)] = m;
    for (int s : rack.servers) p.machine_of[static_cast<size_t>(s)] = m;
  }

  // 2. spines round-robin
  int spine_i = 0;
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    const Node& n = t.nodes[i];
    if (n.kind != NodeKind::spine) continue;
    p.machine_of[i] = n.machine >= 0 ? n.machine : spine_i % k;
    ++spine_i;
  }
  // 3. fabric servers where they attach
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    const Node& n = t.nodes[i];
    if (n.kind != NodeKind::server || n.rack >= 0) continue;
    if (n.machine >= 0) {
      p.machine_of[i] = n.machine;
      continue;
    }
    for (int li : t.links_of(static_cast<int>(i))) {
      const Link& l = t.links[static_cast<size_t>(li)];
      int other = l.a.node == static_cast<int>(i) ? l.b.node : l.a.node;
      if (p.machine_of[static_cast<size_t>(other)] >= 0) {
        p.machine_of[i] = p.machine_of[static_cast<size_t>(other)];
        break;
      }
    }
    if (p.machine_of[i] < 0) p.machine_of[i] = 0;
  }

  for (size_t i = 0; i < t.nodes.size(); ++i) {
    auto& sh = p.share[static_cast<size_t>(p.machine_of[i])];
    sh.nodes.push_back(static_cast<int>(i));
    const Node& n = t.nodes[i];
    switch (n.kind) {
      case NodeKind::host:
        ++sh.hosts;
        sh.nics += n.nics.size();
        break;
      case NodeKind::server: ++sh.servers; break;
      default: ++sh.switches; break;
    }
  }
  for (size_t li = 0; li < t.links.size(); ++li) {
    const Link& l = t.links[li];
    int ma = p.machine_of[static_cast<size_t>(l.a.node)], mb = p.machine_of[static_cast<size_t>(l.b.node)];
    if (ma == mb) continue;
    p.cross.push_back({static_cast<int>(li), ma, mb, kVniBase + static_cast<uint32_t>(li)});
    ++p.share[static_cast<size_t>(ma)].tunnels;
    ++p.share[static_cast<size_t>(mb)].tunnels;
  }
  return p;
}

std::string describe(const Topology& t, const Placement& p) {
  std::string s;
  for (int m = 0; m < p.machines; ++m) {
    const auto& sh = p.share[static_cast<size_t>(m)];
    std::string racks;
    for (int r : sh.racks) racks += (racks.empty() ? "" : " ") + t.racks[static_cast<size_t>(r)].name;
    std::string spines;
    for (int n : sh.nodes)
      if (t.nodes[static_cast<size_t>(n)].kind == NodeKind::spine)
        spines += (spines.empty() ? "" : " ") + t.nodes[static_cast<size_t>(n)].name;
    // what it runs, as lanes' footprint counts it (limits.hpp)
    auto f = estimate_footprint(t, [&](int n) { return p.machine_of[static_cast<size_t>(n)] == m; });
    s += fmt::format(
        "machine {}: {} host{} ({} NICs), {} switch{}, {} server{}, {} tunnel{}, about {} daemons in {} MiB; racks "
        "{}{}\n",
        m, sh.hosts, sh.hosts == 1 ? "" : "s", sh.nics, sh.switches, sh.switches == 1 ? "" : "es", sh.servers,
        sh.servers == 1 ? "" : "s", sh.tunnels, sh.tunnels == 1 ? "" : "s", f.processes, f.memory >> 20,
        racks.empty() ? "-" : racks, spines.empty() ? "" : "; spines " + spines);
  }
  s += fmt::format("{} link{} cross between machines (VXLAN, VNI {}+link)\n", p.cross.size(),
                   p.cross.size() == 1 ? "" : "s", kVniBase);
  return s;
}

uint32_t vni_offset(const std::string& run_id) {
  uint32_t h = 2166136261u;  // FNV-1a
  for (unsigned char c : run_id) h = (h ^ c) * 16777619u;
  return kVniRunStride * (h % kVniRunSlots);
}

}  // namespace lanes::testbed
