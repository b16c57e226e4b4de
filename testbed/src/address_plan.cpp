#include "lanes/testbed/address_plan.hpp"

#include <fmt/format.h>

#include <map>

namespace lanes::testbed {

namespace {
void check_plan(const Topology& topo, const std::string& file, std::vector<std::string>& problems);

// The next port name of NODE: swp1.. on switches, eth0.. on servers, nic0.. on hosts.
std::string port_name(const Topology& topo, std::map<int, int>& counter, int node) {
  const Node& n = topo.nodes[static_cast<size_t>(node)];
  int k = counter[node]++;
  switch (n.kind) {
    case NodeKind::spine:
    case NodeKind::rack_switch: return "swp" + std::to_string(k + 1);
    case NodeKind::server: return "eth" + std::to_string(k);
    case NodeKind::host: return "nic" + std::to_string(k);
  }
  return {};
}

}  // namespace

std::vector<std::string> plan_addresses(Topology& topo, const FixedAddresses& fixed, const std::string& file) {
  std::vector<std::string> problems;
  std::map<int, int> ports;
  auto at = [&](int line, const std::string& msg) { problems.push_back(fmt::format("{}:{}: {}", file, line, msg)); };
  auto line_in = [](const std::map<int, int>& lines, int key) {
    auto it = lines.find(key);
    return it == lines.end() ? 1 : it->second;
  };
  auto rack_line = [&](size_t r) { return line_in(fixed.rack_line, static_cast<int>(r)); };
  auto host_line = [&](int h) { return line_in(fixed.host_line, h); };
  auto& p = topo.pools;
  // links: interface names and /31 + /127 from the infra pools
  if (topo.links.size() * 2 > size_of(p.infra4) || topo.links.size() * 2 > size_of(p.infra6)) {
    problems.push_back(fmt::format("{}:1: {} links need {} addresses; infra4 {} is too small",
                                    file, topo.links.size(), topo.links.size() * 2,
                                    p.infra4.to_string()));
    return problems;
  }
  // host NIC links get the NIC's own name; order links so ports are numbered
  // in file order on each switch
  for (size_t k = 0; k < topo.links.size(); ++k) {
    Link& l = topo.links[k];
    l.a.ifname = port_name(topo, ports, l.a.node);
    l.b.ifname = l.kind == LinkKind::host_nic ? "nic" + std::to_string(l.nic) : port_name(topo, ports, l.b.node);
    l.a.addr4 = {nth(p.infra4, 2 * k), 31};
    l.b.addr4 = {nth(p.infra4, 2 * k + 1), 31};
    l.a.addr6 = {nth(p.infra6, 2 * k), 127};
    l.b.addr6 = {nth(p.infra6, 2 * k + 1), 127};
  }
  // router ids for spines and switches
  uint64_t rid = 1;
  for (auto& n : topo.nodes) {
    if (n.kind != NodeKind::spine && n.kind != NodeKind::rack_switch) continue;
    if (rid >= size_of(p.loopback4)) {
      problems.push_back(fmt::format("{}:{}: loopback4 {} has no room for router id of '{}'",
                                      file, n.loc.line, p.loopback4.to_string(), n.name));
      return problems;
    }
    n.router_id = nth(p.loopback4, rid);
    n.loopback6 = nth(p.loopback6, rid);
    ++rid;
  }
  // host <-> container links, one /31 and /127 per host NIC
  uint64_t nic_ordinal = 0;
  for (auto& n : topo.nodes) {
    for (auto& nic : n.nics) {
      if (2 * nic_ordinal + 1 >= size_of(p.hostlink4)) {
        problems.push_back(fmt::format("{}:1: hostlink4 {} is too small for every host NIC", file,
                                        p.hostlink4.to_string()));
        return problems;
      }
      nic.host_side4 = {nth(p.hostlink4, 2 * nic_ordinal), 31};
      nic.cont_side4 = {nth(p.hostlink4, 2 * nic_ordinal + 1), 31};
      nic.host_side6 = {nth(p.hostlink6, 2 * nic_ordinal), 127};
      nic.cont_side6 = {nth(p.hostlink6, 2 * nic_ordinal + 1), 127};
      ++nic_ordinal;
    }
  }
  // rack blocks
  uint64_t n_blocks4 = uint64_t{1} << (p.rack_block4_len - p.task4.prefix_length());
  uint64_t n_blocks6 = uint64_t{1} << std::min(62, p.rack_block6_len - p.task6.prefix_length());
  for (size_t r = 0; r < topo.racks.size(); ++r) {
    Rack& rack = topo.racks[r];
    auto given = fixed.block.find(static_cast<int>(r));
    auto [g4, g6] = given == fixed.block.end() ? std::pair{false, false} : given->second;
    if (!g4) {
      if (r >= n_blocks4) {
        at(rack_line(r), fmt::format("task4 {} has no /{} block left for rack '{}'",
                p.task4.to_string(), p.rack_block4_len, rack.name));
        continue;
      }
      rack.block4 = subnet(p.task4, p.rack_block4_len, r);
    }
    if (!g6) {
      if (r >= n_blocks6) {
        at(rack_line(r), fmt::format("task6 {} has no /{} block left for rack '{}'",
                p.task6.to_string(), p.rack_block6_len, rack.name));
        continue;
      }
      rack.block6 = subnet(p.task6, p.rack_block6_len, r);
    }
    for (size_t o = 0; o < r; ++o) {
      if (overlaps(rack.block4, topo.racks[o].block4) || overlaps(rack.block6, topo.racks[o].block6))
        at(rack_line(r), fmt::format("rack '{}' block {} / {} overlaps rack '{}' ({} / {})",
                rack.name, rack.block4.to_string(), rack.block6.to_string(), topo.racks[o].name,
                topo.racks[o].block4.to_string(), topo.racks[o].block6.to_string()));
    }
    if (overlaps(rack.block4, p.infra4) || overlaps(rack.block4, p.loopback4))
      at(rack_line(r), fmt::format("rack '{}' block4 {} overlaps the infra or loopback pool",
              rack.name, rack.block4.to_string()));
    if (overlaps(rack.block6, p.infra6) || overlaps(rack.block6, p.loopback6))
      at(rack_line(r), fmt::format("rack '{}' block6 {} overlaps the infra or loopback pool",
              rack.name, rack.block6.to_string()));
    // in each family: task IPs in the first quarter of the block, job NIC
    // addresses in the rest of the same block
    uint64_t size4 = size_of(rack.block4), size6 = size_of(rack.block6);
    uint64_t quarter = size4 / 4, quarter6 = size6 / 4;
    uint64_t nic_total = 0;
    for (int h : rack.hosts) nic_total += topo.nodes[h].nics.size();
    bool fits = true;
    if (rack.hosts.size() + 1 > quarter || nic_total > size4 - quarter) {
      at(rack_line(r), fmt::format("rack '{}' block4 {} is too small for {} hosts with {} NICs (use a larger block4 or "
              "rack-block4)",
              rack.name, rack.block4.to_string(), rack.hosts.size(), nic_total));
      fits = false;
    }
    if (rack.hosts.size() + 1 > quarter6 || nic_total > size6 - quarter6) {
      at(rack_line(r), fmt::format("rack '{}' block6 {} is too small for {} hosts with {} NICs (use a larger block6 or "
              "rack-block6)",
              rack.name, rack.block6.to_string(), rack.hosts.size(), nic_total));
      fits = false;
    }
    if (!fits) continue;
    std::map<std::string, std::string> taken;  // address → host
    uint64_t next_nic = quarter, next_nic6 = quarter6;
    for (size_t j = 0; j < rack.hosts.size(); ++j) {
      Node& host = topo.nodes[rack.hosts[j]];
      auto given_task = fixed.task.find(rack.hosts[j]);
      auto [t4, t6] = given_task == fixed.task.end() ? std::pair<std::optional<Ip4>, std::optional<Ip6>>{} : given_task->second;
      host.job->task_ip4 = t4 ? *t4 : nth(rack.block4, 1 + j);
      host.job->task_ip6 = t6 ? *t6 : nth(rack.block6, 1 + j);
      if (!contains(rack.block4, host.job->task_ip4))
        at(host_line(rack.hosts[j]), fmt::format("task IP {} of '{}' is outside its rack's block {}",
                host.job->task_ip4.to_string(), host.name, rack.block4.to_string()));
      if (!contains(rack.block6, host.job->task_ip6))
        at(host_line(rack.hosts[j]), fmt::format("task IP {} of '{}' is outside its rack's block {}",
                host.job->task_ip6.to_string(), host.name, rack.block6.to_string()));
      for (auto& nic : host.nics) {
        nic.job_addr4 = {nth(rack.block4, next_nic), 32};
        nic.job_addr6 = {nth(rack.block6, next_nic6), 128};
        ++next_nic;
        ++next_nic6;
      }
      if (host.asn == 0) host.asn = 4200000000u + static_cast<uint32_t>(rack.hosts[j]);
    }
    for (int h : rack.hosts) {
      const Node& host = topo.nodes[h];
      for (const std::string& a : {host.job->task_ip4.to_string(), host.job->task_ip6.to_string()}) {
        auto [it, fresh] = taken.emplace(a, host.name);
        if (!fresh)
          at(host_line(h), fmt::format("task IP {} of '{}' is already used by '{}'", a, host.name,
                  it->second));
      }
      for (const auto& nic : host.nics) {
        for (const std::string& a : {nic.job_addr4.addr.to_string(), nic.job_addr6.addr.to_string()}) {
          auto [it, fresh] = taken.emplace(a, host.name);
          if (!fresh)
            at(host_line(h), fmt::format("task IP {} collides with a NIC address of '{}'", a, it->second));
        }
      }
    }
  }
  if (problems.empty()) check_plan(topo, file, problems);
  return problems;
}

// Every address of the plan, each once: a rack block given by hand, a task
// IP given by hand or a pool laid over another must not make two interfaces
// (or a task IP and an interface) share an address.
namespace {
void check_plan(const Topology& topo, const std::string& file, std::vector<std::string>& problems) {
  std::map<std::string, std::string> owner;  // address → what holds it
  auto claim = [&](const std::string& addr, const std::string& what, int line) {
    auto [it, fresh] = owner.emplace(addr, what);
    if (!fresh)
      problems.push_back(fmt::format("{}:{}: address {} of {} is also {}", file, line, addr, what, it->second));
  };
  for (const auto& l : topo.links) {
    const std::string an = topo.nodes[l.a.node].name + ":" + l.a.ifname;
    const std::string bn = topo.nodes[l.b.node].name + ":" + l.b.ifname;
    claim(l.a.addr4.addr.to_string(), an, l.loc.line);
    claim(l.b.addr4.addr.to_string(), bn, l.loc.line);
    claim(l.a.addr6.addr.to_string(), an, l.loc.line);
    claim(l.b.addr6.addr.to_string(), bn, l.loc.line);
  }
  for (const auto& n : topo.nodes) {
    if (n.kind == NodeKind::spine || n.kind == NodeKind::rack_switch) {
      claim(n.router_id.to_string(), "the router id of " + n.name, n.loc.line);
      claim(n.loopback6.to_string(), "the loopback of " + n.name, n.loc.line);
    }
    for (const auto& nic : n.nics) {
      std::string k = std::to_string(nic.index);
      claim(nic.host_side4.addr.to_string(), n.name + ":jnic" + k, n.loc.line);
      claim(nic.cont_side4.addr.to_string(), n.name + " job:eth" + k, n.loc.line);
      claim(nic.host_side6.addr.to_string(), n.name + ":jnic" + k, n.loc.line);
      claim(nic.cont_side6.addr.to_string(), n.name + " job:eth" + k, n.loc.line);
      if (n.job) {
        claim(nic.job_addr4.addr.to_string(), "the NIC " + k + " address of " + n.name + "'s job", n.loc.line);
        claim(nic.job_addr6.addr.to_string(), "the NIC " + k + " address of " + n.name + "'s job", n.loc.line);
      }
    }
    if (n.job) {
      claim(n.job->task_ip4.to_string(), "the task IP of " + n.name, n.loc.line);
      claim(n.job->task_ip6.to_string(), "the task IP of " + n.name, n.loc.line);
    }
  }
}
}  // namespace

}  // namespace lanes::testbed
