#include "lanes/hostnet/datapath.hpp"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fmt/format.h>
#include <net/if.h>
#include <unistd.h>

#include <algorithm>
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
  if (obj_) bpf_object__close(obj_);
}
Datapath::Datapath(Datapath&& o) noexcept
    : skel_(std::exchange(o.skel_, nullptr)), obj_(std::exchange(o.obj_, nullptr)),
      links_(std::exchange(o.links_, {})) {}
Datapath& Datapath::operator=(Datapath&& o) noexcept {
  if (this != &o) {
    for (int fd : links_) ::close(fd);
    if (skel_) datapath_bpf__destroy(skel_);
    if (obj_) bpf_object__close(obj_);
    skel_ = std::exchange(o.skel_, nullptr);
    obj_ = std::exchange(o.obj_, nullptr);
    links_ = std::exchange(o.links_, {});
  }
  return *this;
}

namespace {

struct MapShape {
  const char* name;
  bool required;
  std::vector<bpf_map_type> types;
  uint32_t key, value, min_entries;
};

// The maps lanes fills or reads, as hostnet_abi.h gives them
const std::vector<MapShape>& abi_maps() {
  static const std::vector<MapShape> m = {
      {"config", true, {BPF_MAP_TYPE_ARRAY}, 4, sizeof(lanes_config), 1},
      {"nics", true, {BPF_MAP_TYPE_ARRAY}, 4, sizeof(lanes_nic), LANES_MAX_NICS},
      {"cpu_node", false, {BPF_MAP_TYPE_ARRAY}, 4, 4, 1},
      {"nic_stats", false, {BPF_MAP_TYPE_ARRAY}, 4, sizeof(lanes_nic_stats), LANES_MAX_NICS},
      {"flows", false, {BPF_MAP_TYPE_HASH, BPF_MAP_TYPE_LRU_HASH}, sizeof(lanes_flow_key), sizeof(lanes_flow), 1},
  };
  return m;
}

const char* map_type_name(bpf_map_type t) {
  switch (t) {
    case BPF_MAP_TYPE_ARRAY: return "array";
    case BPF_MAP_TYPE_HASH: return "hash";
    case BPF_MAP_TYPE_LRU_HASH: return "lru_hash";
    case BPF_MAP_TYPE_PERCPU_ARRAY: return "percpu_array";
    default: return "another type";
  }
}

Status check_object(bpf_object* obj, const std::string& path) {
  auto bad = [&](const std::string& why) { return os_error(EINVAL, path + ": " + why + " (see hostnet_abi.h)"); };
  bpf_program* eg = bpf_object__find_program_by_name(obj, "lanes_egress");
  if (!eg) return bad("no program lanes_egress: the tc program lanes attaches on each container link");
  for (const char* name : {"lanes_egress", "lanes_egress_l3", "lanes_ingress"}) {
    bpf_program* p = bpf_object__find_program_by_name(obj, name);
    if (p && bpf_program__type(p) != BPF_PROG_TYPE_SCHED_CLS)
      return bad(fmt::format("program {} is not a tc program (SEC(\"tc\"))", name));
  }
  for (const auto& m : abi_maps()) {
    bpf_map* map = bpf_object__find_map_by_name(obj, m.name);
    if (!map) {
      if (m.required) return bad(fmt::format("no map {}: lanes writes it", m.name));
      continue;
    }
    auto type = bpf_map__type(map);
    if (std::find(m.types.begin(), m.types.end(), type) == m.types.end())
      return bad(fmt::format("map {} is a {} map; lanes expects {}", m.name, map_type_name(type),
                             map_type_name(m.types.front())));
    if (bpf_map__key_size(map) != m.key || bpf_map__value_size(map) != m.value)
      return bad(fmt::format("map {} has {}-byte keys and {}-byte values; lanes expects {} and {}", m.name,
                             bpf_map__key_size(map), bpf_map__value_size(map), m.key, m.value));
    if (bpf_map__max_entries(map) < m.min_entries)
      return bad(fmt::format("map {} holds {} entries; lanes needs {}", m.name, bpf_map__max_entries(map),
                             m.min_entries));
  }
  return {};
}

}  // namespace

Status check_egress_program(const std::string& path) {
  testbed::libbpf_to_log();
  bpf_object* obj = bpf_object__open_file(path.c_str(), nullptr);
  if (!obj) return os_error(errno, path + ": not a BPF object libbpf can open");
  Status st = check_object(obj, path);
  bpf_object__close(obj);
  return st;
}

Result<Datapath> Datapath::open_and_load_file(const std::string& path) {
  testbed::libbpf_to_log();
  Datapath d;
  d.obj_ = bpf_object__open_file(path.c_str(), nullptr);
  if (!d.obj_) return os_error(errno, path + ": not a BPF object libbpf can open");
  if (auto st = check_object(d.obj_, path); !st) return st.error();
  if (int err = bpf_object__load(d.obj_); err)
    return os_error(-err, path + ": the kernel refused to load it (verifier or permissions; see the log)");
  return d;
}

int Datapath::map_fd(const char* name) const {
  bpf_map* m = bpf_object__find_map_by_name(obj_ ? obj_ : skel_->obj, name);
  return m ? bpf_map__fd(m) : -1;
}

int Datapath::prog_fd(const char* name) const {
  bpf_program* p = bpf_object__find_program_by_name(obj_ ? obj_ : skel_->obj, name);
  return p ? bpf_program__fd(p) : -1;
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

int Datapath::egress_fd() const { return prog_fd("lanes_egress"); }
int Datapath::ingress_fd() const { return prog_fd("lanes_ingress"); }
int Datapath::flows_fd() const { return map_fd("flows"); }

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
  cfg.window_ns = c.window_ns;
  uint32_t zero = 0;
  if (bpf_map_update_elem(map_fd("config"), &zero, &cfg, BPF_ANY))
    return os_error(errno, "writing the datapath config map");
  for (size_t i = 0; i < c.nics.size(); ++i) {
    lanes_nic n{};
    n.ifindex = static_cast<uint32_t>(c.nics[i].ifindex);
    n.up = c.nics[i].up;
    n.numa = static_cast<uint32_t>(c.nics[i].numa);
    n.line_rate = c.nics[i].line_rate;
    if (!put4(c.nics[i].gw4, &n.gw4) || !put6(c.nics[i].gw6, n.gw6) || !put4(c.nics[i].job4, &n.job4) ||
        !put6(c.nics[i].job6, n.job6))
      return os_error(EINVAL, "bad address for NIC " + std::to_string(i));
    uint32_t k = static_cast<uint32_t>(i);
    if (bpf_map_update_elem(map_fd("nics"), &k, &n, BPF_ANY))
      return os_error(errno, "writing the NIC map");
  }
  if (map_fd("cpu_node") < 0) return {};  // a user's program may not weigh NUMA
  for (size_t cpu = 0; cpu < c.cpu_node.size() && cpu < LANES_MAX_CPUS; ++cpu) {
    uint32_t k = static_cast<uint32_t>(cpu), v = c.cpu_node[cpu];
    if (bpf_map_update_elem(map_fd("cpu_node"), &k, &v, BPF_ANY))
      return os_error(errno, "writing the CPU map");
  }
  return {};
}

Status Datapath::set_nic_up(int nic, bool up) {
  uint32_t k = static_cast<uint32_t>(nic);
  lanes_nic n{};
  if (bpf_map_lookup_elem(map_fd("nics"), &k, &n)) return os_error(errno, "reading the NIC map");
  n.up = up;
  if (bpf_map_update_elem(map_fd("nics"), &k, &n, BPF_ANY)) return os_error(errno, "writing the NIC map");
  if (!up) return {};
  // a NIC is back: a new epoch, in which every open flow is weighed once
  // against the least loaded NIC (the program moves it if that balances)
  uint32_t zero = 0;
  lanes_config cfg{};
  int fd = map_fd("config");
  if (bpf_map_lookup_elem(fd, &zero, &cfg)) return os_error(errno, "reading the datapath config map");
  ++cfg.epoch;
  if (bpf_map_update_elem(fd, &zero, &cfg, BPF_ANY)) return os_error(errno, "writing the datapath config map");
  return {};
}

Status Datapath::set_clock(uint64_t ns) {
  uint32_t zero = 0;
  lanes_config cfg{};
  int fd = map_fd("config");
  if (bpf_map_lookup_elem(fd, &zero, &cfg)) return os_error(errno, "reading the datapath config map");
  cfg.clock_ns = ns;
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

bool Datapath::has_ingress() const { return ingress_fd() >= 0; }

Status Datapath::attach_netkit_egress(int ifindex) {
  // BPF_NETKIT_PRIMARY (Linux 6.7); libbpf 1.1 predates netkit, so the
  // generic link_create carries it
  constexpr int kBpfNetkitPrimary = 54;
  int l3 = prog_fd("lanes_egress_l3");
  if (l3 < 0)
    return os_error(EINVAL, "the egress program has no lanes_egress_l3, which netkit devices (L3, no Ethernet "
                            "header) need");
  int fd = bpf_link_create(l3, ifindex,
                           static_cast<bpf_attach_type>(kBpfNetkitPrimary), nullptr);
  if (fd < 0) return os_error(-fd, "attaching the egress program to netkit device " + std::to_string(ifindex));
  links_.push_back(fd);
  lanes::log::debug("attached egress program to netkit {} (primary)", ifindex);
  return {};
}
Status Datapath::attach_ingress(int ifindex) { return attach(ingress_fd(), ifindex, "ingress"); }

Result<std::vector<lanes_nic_stats>> Datapath::stats(int n) const {
  if (map_fd("nic_stats") < 0) return os_error(ENOENT, "the egress program keeps no nic_stats map");
  std::vector<lanes_nic_stats> out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    uint32_t k = static_cast<uint32_t>(i);
    if (bpf_map_lookup_elem(map_fd("nic_stats"), &k, &out[static_cast<size_t>(i)]))
      return os_error(errno, "reading NIC stats");
  }
  return out;
}

Result<std::vector<uint64_t>> Datapath::flows_per_nic(int n) const {
  if (flows_fd() < 0) return os_error(ENOENT, "the egress program keeps no flows map");
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
  if (flows_fd() < 0) return os_error(ENOENT, "the egress program keeps no flows map");
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
