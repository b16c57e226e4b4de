#include "lanes/testbed/slurm.hpp"

#include <netdb.h>
#include <sys/socket.h>

#include <cstdlib>
#include <fmt/format.h>
#include <sstream>

#include "lanes/testbed/netlink.hpp"
#include "lanes/testbed/process.hpp"
#include "lanes/testbed/topology_loader.hpp"

namespace lanes::testbed {

Result<std::string> slurm_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  ProcessSpec spec{argv.front(), argv};
  spec.new_session = false;
  auto r = run_capture(spec, timeout);
  if (!r) return r.error();
  if (r.value().status != 0)
    return os_error(EIO, fmt::format("{} {} exited with status {}", argv.at(0), argv.size() > 1 ? argv[1] : "",
                                     r.value().status));
  return r.value().out;
}

std::vector<std::string> parse_hostnames(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    while (!l.empty() && (l.back() == ' ' || l.back() == '\r')) l.pop_back();
    if (!l.empty()) out.push_back(l);
  }
  return out;
}

std::optional<std::string> parse_node_addr(const std::string& line) {
  std::istringstream in(line);
  for (std::string word; in >> word;)
    if (word.rfind("NodeAddr=", 0) == 0 && word.size() > 9) return word.substr(9);
  return std::nullopt;
}

std::optional<std::string> parse_node_state(const std::string& line) {
  std::istringstream in(line);
  for (std::string word; in >> word;)
    if (word.rfind("State=", 0) == 0 && word.size() > 6) return word.substr(6);
  return std::nullopt;
}

std::string node_state(const std::string& name) {
  auto r = slurm_command({"scontrol", "show", "node", "-o", name}, std::chrono::seconds(20));
  return r ? parse_node_state(r.value()).value_or("") : "";
}

std::string machines_arg(const std::vector<Machine>& machines) {
  std::string s;
  for (const auto& m : machines) s += (s.empty() ? "" : ",") + m.name + "=" + m.addr.to_string();
  return s;
}

std::vector<Machine> parse_machines_arg(const std::string& arg) {
  std::vector<Machine> out;
  std::istringstream in(arg);
  for (std::string item; std::getline(in, item, ',');) {
    auto eq = item.find('=');
    std::optional<IpAddr> a;
    if (eq != std::string::npos && eq > 0) a = parse_ip(item.substr(eq + 1));
    if (!a) throw InputError({fmt::format("--machines: '{}' is not NAME=ADDRESS", item)});
    out.push_back({item.substr(0, eq), *a});
  }
  if (out.empty()) throw InputError({"--machines: no machine given"});
  return out;
}

namespace {

// NAME as an address, or its first address from the resolver (IPv4 first)
std::optional<IpAddr> resolve(const std::string& name) {
  if (auto a = parse_ip(name)) return a;
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(name.c_str(), nullptr, &hints, &res) != 0 || !res) return std::nullopt;
  std::optional<IpAddr> v4, v6;
  for (auto* p = res; p; p = p->ai_next) {
    char buf[NI_MAXHOST];
    if (::getnameinfo(p->ai_addr, p->ai_addrlen, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST) != 0) continue;
    auto a = parse_ip(buf);
    if (!a) continue;
    if (a->is_v4() && !v4) v4 = a;
    if (a->is_v6() && !v6) v6 = a;
  }
  ::freeaddrinfo(res);
  return v4 ? v4 : v6;
}

}  // namespace

Result<Allocation> read_allocation() {
  const char* job = std::getenv("SLURM_JOB_ID");
  const char* list = std::getenv("SLURM_JOB_NODELIST");
  if (!job || !*job || !list || !*list)
    return os_error(EINVAL,
                    "not inside a Slurm allocation (SLURM_JOB_ID and SLURM_JOB_NODELIST are not set): run it under "
                    "salloc -N K or in an sbatch script");
  Allocation a;
  a.job_id = job;
  auto names = slurm_command({"scontrol", "show", "hostnames", list});
  if (!names) return names.error();
  for (const auto& n : parse_hostnames(names.value())) {
    auto line = slurm_command({"scontrol", "show", "node", "-o", n});
    if (!line) return line.error();
    auto addr = parse_node_addr(line.value());
    if (!addr) return os_error(EINVAL, fmt::format("scontrol shows no NodeAddr for machine {}", n));
    auto ip = resolve(*addr);
    if (!ip) return os_error(EINVAL, fmt::format("machine {}: its NodeAddr '{}' does not resolve", n, *addr));
    a.machines.push_back({n, *ip});
  }
  if (a.machines.empty()) return os_error(EINVAL, fmt::format("the allocation's node list '{}' names no machine", list));
  return a;
}

std::optional<int> this_machine(const std::vector<Machine>& machines) {
  if (const char* n = std::getenv("SLURMD_NODENAME"); n && *n) {
    for (size_t i = 0; i < machines.size(); ++i)
      if (machines[i].name == n) return static_cast<int>(i);
    return std::nullopt;  // a machine the list does not name
  }
  if (const char* id = std::getenv("SLURM_NODEID"); id && *id) {
    char* end = nullptr;
    long v = std::strtol(id, &end, 10);
    if (*end == '\0' && v >= 0 && v < static_cast<long>(machines.size())) return static_cast<int>(v);
  }
  return std::nullopt;
}

Result<uint32_t> mtu_of_address(const IpAddr& addr) {
  auto nl = Netlink::open_here("this machine");
  if (!nl) return nl.error();
  auto addrs = nl.value().addresses();
  if (!addrs) return addrs.error();
  int index = 0;
  for (const auto& a : addrs.value())
    if (a.addr.substr(0, a.addr.find('/')) == addr.to_string()) index = a.index;
  if (!index) return os_error(EADDRNOTAVAIL, fmt::format("no interface of this machine holds {}", addr.to_string()));
  auto links = nl.value().links();
  if (!links) return links.error();
  for (const auto& l : links.value())
    if (l.index == index) return static_cast<uint32_t>(l.mtu);
  return os_error(ENODEV, fmt::format("the interface holding {} is gone", addr.to_string()));
}

bool steps_list_has(const std::string& text, const std::string& step) {
  for (const auto& l : parse_hostnames(text))
    if (l == step) return true;
  return false;
}

std::optional<bool> step_listed(const std::string& step) {
  auto r = slurm_command({"squeue", "-h", "-s", "-o", "%i"}, std::chrono::seconds(20));
  if (!r) return std::nullopt;
  return steps_list_has(r.value(), step);
}

std::string to_line(const ShardEvent& e) {
  nlohmann::json j = e.detail;
  j["lanes_shard"] = e.machine;
  j["machine"] = e.name;
  j["event"] = e.event;
  return j.dump();
}

std::optional<ShardEvent> parse_shard_line(const std::string& line) {
  auto at = line.find('{');  // srun may put a label before it
  if (at == std::string::npos) return std::nullopt;
  auto j = nlohmann::json::parse(line.substr(at), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("lanes_shard") || !j["lanes_shard"].is_number_integer())
    return std::nullopt;
  ShardEvent e;
  e.machine = j["lanes_shard"].get<int>();
  e.name = j.value("machine", "");
  e.event = j.value("event", "");
  j.erase("lanes_shard");
  j.erase("machine");
  j.erase("event");
  e.detail = std::move(j);
  return e;
}

}  // namespace lanes::testbed
