#include "lanes/hostnet/datapath.hpp"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <net/if.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include "datapath.skel.h"
#include "lanes/testbed/libbpf_log.hpp"
#include "lanes/testbed/log.hpp"

namespace lanes::hostnet {

using testbed::os_error;
using testbed::Result;
using testbed::Status;

Datapath::Datapath() = default;
Datapath::~Datapath() {
  for (int fd : links_) ::close(fd);
  if (skel_) datapath_bpf__destroy(skel_);
}
Datapath::Datapath(Datapath&& o) noexcept
    : skel_(std::exchange(o.skel_, nullptr)), links_(std::exchange(o.links_, {})) {}
Datapath& Datapath::operator=(Datapath&& o) noexcept {
  if (this != &o) {
    for (int fd : links_) ::close(fd);
    if (skel_) datapath_bpf__destroy(skel_);
    skel_ = std::exchange(o.skel_, nullptr);
    links_ = std::exchange(o.links_, {});
  }
  return *this;
}

Result<Datapath> Datapath::open_and_load() {
  testbed::libbpf_to_log();
  Datapath d;
  d.skel_ = datapath_bpf__open();
  if (!d.skel_) return os_error(errno, "opening the datapath BPF skeleton");
  if (int err = datapath_bpf__load(d.skel_); err)
    return os_error(-err, "loading the datapath BPF programs (verifier or permissions; see the log)");
  return d;
}

int Datapath::egress_fd() const { return bpf_program__fd(skel_->progs.lanes_egress); }
int Datapath::ingress_fd() const { return bpf_program__fd(skel_->progs.lanes_ingress); }
int Datapath::flows_fd() const { return bpf_map__fd(skel_->maps.flows); }

namespace {
bool put4(const std::string& s, uint32_t* out) {
  if (s.empty()) return true;
  return inet_pton(AF_INET, s.c_str(), out) == 1;
}
bool put6(const std::string& s, uint32_t* out) {
  if (s.empty()) return true;
  return inet_pton(AF_INET6, s.c_str(), out) == 1;
}
}  // namespace

Status Datapath::configure(const DatapathConfig& c) {
  if (c.nics.empty() || c.nics.size() > LANES_MAX_NICS)
    return os_error(EINVAL, "the datapath takes 1 to " + std::to_string(LANES_MAX_NICS) + " NICs");
  lanes_config cfg{};
  cfg.n_nics = static_cast<uint32_t>(c.nics.size());
  cfg.mode = static_cast<uint32_t>(c.mode);
  for (size_t i = 0; i < c.container_ifindex.size() && i < LANES_MAX_NICS; ++i) {
    cfg.container_ifindex[i] = static_cast<uint32_t>(c.container_ifindex[i]);
    if (i < c.container_mac.size()) std::memcpy(cfg.container_mac[i], c.container_mac[i].data(), 6);
    if (i < c.host_mac.size()) std::memcpy(cfg.host_mac[i], c.host_mac[i].data(), 6);
  }
  if (!put4(c.task4, &cfg.task4) || !put6(c.task6, cfg.task6)) return os_error(EINVAL, "bad task IP");
  uint32_t zero = 0;
  if (bpf_map_update_elem(bpf_map__fd(skel_->maps.config), &zero, &cfg, BPF_ANY))
    return os_error(errno, "writing the datapath config map");
  for (size_t i = 0; i < c.nics.size(); ++i) {
    lanes_nic n{};
    n.ifindex = static_cast<uint32_t>(c.nics[i].ifindex);
    n.up = c.nics[i].up;
    n.numa = static_cast<uint32_t>(c.nics[i].numa);
    if (!put4(c.nics[i].gw4, &n.gw4) || !put6(c.nics[i].gw6, n.gw6) || !put4(c.nics[i].job4, &n.job4) ||
        !put6(c.nics[i].job6, n.job6))
      return os_error(EINVAL, "bad address for NIC " + std::to_string(i));
    uint32_t k = static_cast<uint32_t>(i);
    if (bpf_map_update_elem(bpf_map__fd(skel_->maps.nics), &k, &n, BPF_ANY))
      return os_error(errno, "writing the NIC map");
  }
  for (size_t cpu = 0; cpu < c.cpu_node.size() && cpu < LANES_MAX_CPUS; ++cpu) {
    uint32_t k = static_cast<uint32_t>(cpu), v = c.cpu_node[cpu];
    if (bpf_map_update_elem(bpf_map__fd(skel_->maps.cpu_node), &k, &v, BPF_ANY))
      return os_error(errno, "writing the CPU map");
  }
  return {};
}

Status Datapath::set_nic_up(int nic, bool up) {
  uint32_t k = static_cast<uint32_t>(nic);
  lanes_nic n{};
  if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.nics), &k, &n)) return os_error(errno, "reading the NIC map");
  n.up = up;
  if (bpf_map_update_elem(bpf_map__fd(skel_->maps.nics), &k, &n, BPF_ANY)) return os_error(errno, "writing the NIC map");
  if (!up) return {};
  // a NIC is back: a new epoch, in which every open flow is weighed once
  // against the least loaded NIC (the program moves it if that balances)
  uint32_t zero = 0;
  lanes_config cfg{};
  int fd = bpf_map__fd(skel_->maps.config);
  if (bpf_map_lookup_elem(fd, &zero, &cfg)) return os_error(errno, "reading the datapath config map");
  ++cfg.epoch;
  if (bpf_map_update_elem(fd, &zero, &cfg, BPF_ANY)) return os_error(errno, "writing the datapath config map");
  return {};
}

Status Datapath::attach(int prog_fd, int ifindex, const char* what) {
  char name[IF_NAMESIZE] = "?";
  if_indextoname(static_cast<unsigned>(ifindex), name);
  LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = BPF_TC_INGRESS);
  int err = bpf_tc_hook_create(&hook);  // the clsact qdisc; EEXIST when it is there
  if (err && err != -EEXIST) return os_error(-err, std::string("creating the tc hook on ") + name);
  LIBBPF_OPTS(bpf_tc_opts, opts, .prog_fd = prog_fd, .flags = BPF_TC_F_REPLACE, .handle = 1, .priority = 1);
  if ((err = bpf_tc_attach(&hook, &opts)))
    return os_error(-err, std::string("attaching the ") + what + " program to " + name);
  lanes::log::debug("attached {} program to {} (ingress)", what, name);
  return {};
}

Status Datapath::attach_egress(int ifindex) { return attach(egress_fd(), ifindex, "egress"); }

Status Datapath::attach_netkit_egress(int ifindex) {
  // BPF_NETKIT_PRIMARY (Linux 6.7); libbpf 1.1 predates netkit, so the
  // generic link_create carries it
  constexpr int kBpfNetkitPrimary = 54;
  int fd = bpf_link_create(bpf_program__fd(skel_->progs.lanes_egress_l3), ifindex,
                           static_cast<bpf_attach_type>(kBpfNetkitPrimary), nullptr);
  if (fd < 0) return os_error(-fd, "attaching the egress program to netkit device " + std::to_string(ifindex));
  links_.push_back(fd);
  lanes::log::debug("attached egress program to netkit {} (primary)", ifindex);
  return {};
}
Status Datapath::attach_ingress(int ifindex) { return attach(ingress_fd(), ifindex, "ingress"); }

Result<std::vector<lanes_nic_stats>> Datapath::stats(int n) const {
  std::vector<lanes_nic_stats> out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    uint32_t k = static_cast<uint32_t>(i);
    if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.nic_stats), &k, &out[static_cast<size_t>(i)]))
      return os_error(errno, "reading NIC stats");
  }
  return out;
}

Result<std::vector<uint64_t>> Datapath::flows_per_nic(int n) const {
  std::vector<uint64_t> out(static_cast<size_t>(n), 0);
  lanes_flow_key key{}, next{};
  lanes_flow f{};
  int fd = flows_fd();
  void* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    if (bpf_map_lookup_elem(fd, &next, &f) == 0 && !f.closed && f.nic < static_cast<uint32_t>(n)) ++out[f.nic];
    key = next;
    prev = &key;
  }
  return out;
}

Result<std::vector<std::pair<lanes_flow_key, lanes_flow>>> Datapath::flows() const {
  std::vector<std::pair<lanes_flow_key, lanes_flow>> out;
  lanes_flow_key key{}, next{};
  lanes_flow f{};
  int fd = flows_fd();
  void* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    if (bpf_map_lookup_elem(fd, &next, &f) == 0) out.emplace_back(next, f);
    key = next;
    prev = &key;
  }
  return out;
}

std::vector<uint32_t> cpu_to_node(int emulated_nodes) {
  long ncpu = sysconf(_SC_NPROCESSORS_CONF);
  std::vector<uint32_t> map(static_cast<size_t>(std::max(1L, ncpu)), 0);
  int nodes = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/sys/devices/system/node", ec)) {
    std::string n = e.path().filename().string();
    if (n.rfind("node", 0) != 0 || n.size() < 5 || !std::isdigit(static_cast<unsigned char>(n[4]))) continue;
    ++nodes;
    int node = std::stoi(n.substr(4));
    for (const auto& c : std::filesystem::directory_iterator(e.path(), ec)) {
      std::string cn = c.path().filename().string();
      if (cn.rfind("cpu", 0) == 0 && cn.size() > 3 && std::isdigit(static_cast<unsigned char>(cn[3]))) {
        size_t cpu = std::stoul(cn.substr(3));
        if (cpu < map.size()) map[cpu] = static_cast<uint32_t>(node);
      }
    }
  }
  if (nodes <= 1 && emulated_nodes > 1)
    for (size_t c = 0; c < map.size(); ++c)
      map[c] = static_cast<uint32_t>(c * static_cast<size_t>(emulated_nodes) / map.size());
  return map;
}

}  // namespace lanes::hostnet
