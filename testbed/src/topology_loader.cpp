#include "lanes/testbed/topology_loader.hpp"
#include "lanes/testbed/address_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <pugixml.hpp>
#include <set>
#include <sstream>

#include "lanes/testbed/input_file.hpp"
#include "lanes/testbed/overrides.hpp"

namespace lanes::testbed {

namespace {

std::string join_lines(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& p : v) {
    if (!s.empty()) s += '\n';
    s += p;
  }
  return s;
}

bool valid_name(const std::string& name) {
  return !name.empty() && name.size() <= 24 && std::isalnum(static_cast<unsigned char>(name[0])) &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
         });
}

constexpr int kMaxCount = 4096;
constexpr uint64_t kMaxRate = 16'000'000'000ull;  // TBF via libnl takes bytes/s in an int

// Default address plan (see README "Addresses").
constexpr const char* kLoopback4 = "198.18.0.0/22";
constexpr const char* kLoopback6 = "2001:2:0:1::/64";
constexpr const char* kInfra4 = "198.18.128.0/17";
constexpr const char* kInfra6 = "2001:2:0:2::/64";
constexpr const char* kHostlink4 = "198.18.64.0/18";
constexpr const char* kHostlink6 = "2001:2:0:3::/64";
constexpr const char* kTask4 = "198.19.0.0/16";
constexpr const char* kTask6 = "2001:2:0:100::/56";

// Parser state: the document, line lookup and the problems found so far.
class Loader {
 public:
  Loader(const std::string& text, std::string file, const Overrides& ov)
      : text_(text), file_(std::move(file)), overrides_(ov) {
    for (size_t i = 0; i < text_.size(); ++i)
      if (text_[i] == '\n') newlines_.push_back(i);
  }

  Topology load();

 private:
  int line_of(ptrdiff_t offset) const {
    if (offset < 0) return 0;
    auto it = std::lower_bound(newlines_.begin(), newlines_.end(), static_cast<size_t>(offset));
    return static_cast<int>(it - newlines_.begin()) + 1;
  }
  int line_of(const pugi::xml_node& n) const { return line_of(n.offset_debug()); }
  SourceLoc loc(const pugi::xml_node& n) const { return {file_, line_of(n)}; }

  template <typename... Args>
  void problem(const pugi::xml_node& n, fmt::format_string<Args...> f, Args&&... args) {
    problems_.push_back(
        fmt::format("{}:{}: {}", file_, line_of(n), fmt::format(f, std::forward<Args>(args)...)));
  }

  // Rejects attributes not in ALLOWED and child elements not in CHILDREN.
  void check_shape(const pugi::xml_node& n, std::initializer_list<const char*> allowed,
                   std::initializer_list<const char*> children) {
    for (auto a : n.attributes()) {
      bool ok = std::any_of(allowed.begin(), allowed.end(),
                            [&](const char* x) { return std::string_view(x) == a.name(); });
      if (!ok) {
        std::string list;
        for (auto x : allowed) list += std::string(list.empty() ? "" : ", ") + x;
        problem(n, "<{}>: unknown attribute '{}' (allowed: {})", n.name(), a.name(),
                list.empty() ? "none" : list);
      }
    }
    for (auto c : n.children()) {
      if (c.type() == pugi::node_pcdata || c.type() == pugi::node_cdata) {
        std::string_view v = c.value();
        if (std::any_of(v.begin(), v.end(), [](char ch) { return !std::isspace(static_cast<unsigned char>(ch)); }))
          problem(c.type() == pugi::node_pcdata ? n : c, "<{}>: unexpected text", n.name());
        continue;
      }
      if (c.type() != pugi::node_element) continue;
      bool ok = std::any_of(children.begin(), children.end(),
                            [&](const char* x) { return std::string_view(x) == c.name(); });
      if (!ok) problem(c, "<{}> is not allowed inside <{}>", c.name(), n.name());
    }
  }

  bool get_int(const pugi::xml_node& n, const char* attr, long long lo, long long hi, long long& out) {
    auto a = n.attribute(attr);
    if (!a) return false;
    std::string_view s = a.value();
    long long v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size() || v < lo || v > hi) {
      problem(n, "<{}> {}=\"{}\": expected an integer from {} to {}", n.name(), attr, s, lo, hi);
      return false;
    }
    out = v;
    return true;
  }

  std::string get_name(const pugi::xml_node& n, const char* fallback = nullptr) {
    auto a = n.attribute("name");
    std::string name = a ? a.value() : (fallback ? fallback : "");
    if (name.empty()) {
      problem(n, "<{}>: missing attribute 'name'", n.name());
      return {};
    }
    if (!valid_name(name)) {
      problem(n, "<{}> name=\"{}\": names are 1-24 characters of letters, digits, '-' and '_', "
                 "starting with a letter or digit", n.name(), name);
      return {};
    }
    return name;
  }

  bool get_rate(const pugi::xml_node& n, const char* attr, uint64_t& out) {
    auto a = n.attribute(attr);
    if (!a) return false;
    uint64_t bps = 0;
    if (!parse_rate(a.value(), bps)) {
      problem(n, "<{}> {}=\"{}\": expected a rate such as 500mbit, 1gbit or off", n.name(), attr,
              a.value());
      return false;
    }
    if (bps > kMaxRate) {
      problem(n, "<{}> {}=\"{}\": at most 16gbit can be shaped; scale rates down for emulation",
              n.name(), attr, a.value());
      return false;
    }
    out = bps;
    return true;
  }

  // the impairment attributes of a <nic> or a <link> (impair.hpp), and where they are
  void get_impairment(const pugi::xml_node& n, Impairment& out, SourceLoc& at) {
    std::map<std::string, std::string> attrs;
    for (const char* k : kImpairAttrs)
      if (auto a = n.attribute(k)) attrs[k] = a.value();
    if (attrs.empty()) return;
    auto imp = parse_impairment(attrs);
    if (!imp) {
      problem(n, "<{}> {}", n.name(), imp.error().what());
      return;
    }
    out = imp.value();
    at = loc(n);
  }

  template <typename Net, typename Parse>
  bool get_net(const pugi::xml_node& n, const char* attr, Parse parse, const Net& range, Net& out) {
    auto a = n.attribute(attr);
    if (!a) return false;
    auto v = parse(a.value());
    if (!v) {
      problem(n, "<{}> {}=\"{}\": expected a prefix such as {} (host bits zero)", n.name(), attr,
              a.value(), range.to_string());
      return false;
    }
    if (!contains(range, *v)) {
      problem(n, "<{}> {}=\"{}\": lanes only uses addresses inside {}", n.name(), attr, a.value(),
              range.to_string());
      return false;
    }
    out = *v;
    return true;
  }

  int add_node(Node node, const pugi::xml_node& xml) {
    auto it = names_.find(node.name);
    if (it != names_.end()) {
      problem(xml, "node name '{}' is already used at line {}", node.name, it->second);
      return -1;
    }
    names_[node.name] = node.loc.line;
    topo_.nodes.push_back(std::move(node));
    return static_cast<int>(topo_.nodes.size()) - 1;
  }

  void load_addressing(const pugi::xml_node& n);
  void load_rack(const pugi::xml_node& n, int rack_index);
  void load_hosts(const pugi::xml_node& n, int rack_index);
  void load_servers(const pugi::xml_node& n, int rack_index);
  void load_links(const pugi::xml_node& root);
  void assign_addresses();

  const std::string& text_;
  std::string file_;
  std::vector<size_t> newlines_;
  std::vector<std::string> problems_;
  Topology topo_;
  std::map<std::string, int> names_;  // node name → line
  // explicit addresses, checked for uniqueness
  std::map<std::string, int> used_addrs_;
  // per host: explicit task IPs (absent = allocate)
  std::map<int, std::pair<std::optional<Ip4>, std::optional<Ip6>>> explicit_task_;
  std::map<int, std::pair<bool, bool>> explicit_block_;  // rack → (v4 given, v6 given)
  std::map<int, std::pair<int, int>> rack_pin_;           // rack → (machine, line that pinned it)
  std::map<int, pugi::xml_node> rack_xml_;
  std::map<int, pugi::xml_node> host_xml_;
  // OVERRIDES_ set on every element below N they belong to
  // switch-stack="gobgp|frr" of a <rack> or <spine>
  SwitchStack get_stack(const pugi::xml_node& n) {
    auto a = n.attribute("switch-stack");
    if (!a) return SwitchStack::gobgp;
    auto s = parse_switch_stack(a.value());
    if (!s) problem(n, "<{}> switch-stack=\"{}\": expected gobgp or frr", n.name(), a.value());
    return s.value_or(SwitchStack::gobgp);
  }

  // machine="N": the node's machine in a run over several (0-based); -1
  // where it is not given
  int get_machine(const pugi::xml_node& n) {
    long long m = -1;
    if (!get_int(n, "machine", 0, kMaxMachines - 1, m)) return -1;
    return static_cast<int>(m);
  }

  void apply_overrides(pugi::xml_node n) {
    for (const auto& a : override_attrs()) {
      auto it = overrides_.find(a.name);
      if (it == overrides_.end() || !element_takes(a, n.name())) continue;
      if (!n.attribute(a.name)) n.append_attribute(a.name);
      n.attribute(a.name).set_value(it->second.c_str());
    }
    for (auto c : n.children())
      if (c.type() == pugi::node_element) apply_overrides(c);
  }

  const Overrides& overrides_;
  std::vector<std::pair<int, int>> server_attach_;  // server node → attach node (fabric servers)
  std::map<int, uint64_t> server_rate_;
};

Topology Loader::load() {
  pugi::xml_document doc;
  auto res = doc.load_buffer(text_.data(), text_.size(), pugi::parse_default | pugi::parse_ws_pcdata_single);
  if (!res) {
    problems_.push_back(fmt::format("{}:{}: not well-formed XML: {}", file_, line_of(res.offset),
                                    res.description()));
    throw InputError(problems_);
  }
  for (auto& p : xml_shape_problems(doc, text_, file_)) problems_.push_back(std::move(p));
  auto root = doc.document_element();
  if (std::string_view(root.name()) != "topology") {
    problem(root, "the root element must be <topology>, not <{}>", root.name());
    throw InputError(problems_);
  }
  check_shape(root, {"name", "impair-engine"}, {"addressing", "spine", "rack", "server", "link"});
  if (!overrides_.empty()) apply_overrides(root);
  topo_.file = file_;
  if (auto e = root.attribute("impair-engine")) {
    std::string v = e.value();
    if (v == "netem") topo_.impair_engine = ImpairEngine::netem;
    else if (v == "lanes") topo_.impair_engine = ImpairEngine::lanes;
    else if (v != "auto") problem(root, "<topology> impair-engine=\"{}\": expected auto, netem or lanes", v);
  }
  topo_.loc = loc(root);
  topo_.name = get_name(root, "topology");

  topo_.pools.loopback4 = *parse_net4(kLoopback4);
  topo_.pools.loopback6 = *parse_net6(kLoopback6);
  topo_.pools.infra4 = *parse_net4(kInfra4);
  topo_.pools.infra6 = *parse_net6(kInfra6);
  topo_.pools.hostlink4 = *parse_net4(kHostlink4);
  topo_.pools.hostlink6 = *parse_net6(kHostlink6);
  topo_.pools.task4 = *parse_net4(kTask4);
  topo_.pools.task6 = *parse_net6(kTask6);
  auto addressing = root.children("addressing");
  int n_addressing = 0;
  for (auto a : addressing) {
    if (n_addressing++) problem(a, "<addressing> may appear only once");
    load_addressing(a);
  }

  // spines first, then racks (switch, hosts, servers), then fabric servers
  for (auto s : root.children("spine")) {
    check_shape(s, {"name", "count", "asn", "switch-stack", "machine"}, {});
    std::string base = get_name(s);
    long long count = 1, asn = 65000;
    bool counted = get_int(s, "count", 1, kMaxCount, count);
    get_int(s, "asn", 1, 4294967294LL, asn);
    SwitchStack stack = get_stack(s);
    int machine = get_machine(s);
    for (long long i = 1; i <= count && !base.empty(); ++i) {
      Node node;
      node.name = counted ? base + std::to_string(i) : base;
      node.kind = NodeKind::spine;
      node.asn = static_cast<uint32_t>(asn);
      node.stack = stack;
      node.machine = machine;
      node.loc = loc(s);
      add_node(std::move(node), s);
    }
  }
  for (auto r : root.children("rack")) load_rack(r, static_cast<int>(topo_.racks.size()));
  for (auto s : root.children("server")) load_servers(s, -1);
  if (topo_.nodes.empty()) problem(root, "the topology has no nodes");
  load_links(root);
  if (problems_.empty()) assign_addresses();
  if (!problems_.empty()) throw InputError(problems_);
  return std::move(topo_);
}

void Loader::load_addressing(const pugi::xml_node& n) {
  check_shape(n, {"loopback4", "loopback6", "infra4", "infra6", "hostlink4", "hostlink6", "task4", "task6",
                  "rack-block4", "rack-block6"},
              {});
  auto& p = topo_.pools;
  auto r4 = benchmark_range4();
  auto r6 = benchmark_range6();
  get_net(n, "loopback4", parse_net4, r4, p.loopback4);
  get_net(n, "loopback6", parse_net6, r6, p.loopback6);
  get_net(n, "infra4", parse_net4, r4, p.infra4);
  get_net(n, "infra6", parse_net6, r6, p.infra6);
  get_net(n, "hostlink4", parse_net4, r4, p.hostlink4);
  get_net(n, "hostlink6", parse_net6, r6, p.hostlink6);
  get_net(n, "task4", parse_net4, r4, p.task4);
  get_net(n, "task6", parse_net6, r6, p.task6);
  long long len = 0;
  if (get_int(n, "rack-block4", 16, 28, len)) p.rack_block4_len = static_cast<int>(len);
  if (get_int(n, "rack-block6", 56, 120, len)) p.rack_block6_len = static_cast<int>(len);
  std::vector<Net4> v4 = {p.loopback4, p.infra4, p.hostlink4, p.task4};
  std::vector<Net6> v6 = {p.loopback6, p.infra6, p.hostlink6, p.task6};
  bool o4 = false, o6 = false;
  for (size_t i = 0; i < v4.size(); ++i)
    for (size_t j = i + 1; j < v4.size(); ++j) {
      o4 = o4 || overlaps(v4[i], v4[j]);
      o6 = o6 || overlaps(v6[i], v6[j]);
    }
  if (o4) problem(n, "<addressing>: the IPv4 pools loopback4, infra4, hostlink4 and task4 must not overlap");
  if (o6) problem(n, "<addressing>: the IPv6 pools loopback6, infra6, hostlink6 and task6 must not overlap");
  if (p.rack_block4_len < p.task4.prefix_length())
    problem(n, "<addressing>: rack-block4 /{} is larger than task4 {}", p.rack_block4_len,
            p.task4.to_string());
  if (p.rack_block6_len < p.task6.prefix_length())
    problem(n, "<addressing>: rack-block6 /{} is larger than task6 {}", p.rack_block6_len,
            p.task6.to_string());
}

void Loader::load_rack(const pugi::xml_node& n, int rack_index) {
  check_shape(n, {"name", "asn", "switch", "block4", "block6", "buckets", "idle-timer", "unbalanced-timer",
                  "max-prefixes", "hold-time", "bfd-interval", "bfd-multiplier", "switch-stack", "machine"},
              {"host", "server"});
  Rack rack;
  rack.name = get_name(n);
  rack.loc = loc(n);
  // a rack without a usable name is reported; what is inside it still gets
  // checked, under a stand-in name that cannot clash with a real one
  if (rack.name.empty()) rack.name = fmt::format("rack#{}", rack_index + 1);
  for (const auto& other : topo_.racks)
    if (other.name == rack.name)
      problem(n, "rack name '{}' is already used at line {}", rack.name, other.loc.line);
  long long asn = 65101 + rack_index;
  get_int(n, "asn", 1, 4294967294LL, asn);
  Node sw;
  sw.name = n.attribute("switch") ? n.attribute("switch").value() : rack.name + "-tor";
  bool stand_in = !valid_name(rack.name);
  sw.kind = NodeKind::rack_switch;
  sw.rack = rack_index;
  sw.asn = static_cast<uint32_t>(asn);
  sw.stack = get_stack(n);
  sw.machine = get_machine(n);
  sw.loc = loc(n);
  if (!valid_name(sw.name) && !stand_in) {
    problem(n, "<rack> switch=\"{}\": names are 1-24 characters of letters, digits, '-' and '_', "
               "starting with a letter or digit", sw.name);
  }
  if (sw.machine >= 0) rack_pin_[rack_index] = {sw.machine, line_of(n)};
  rack.switch_node = add_node(std::move(sw), n);
  long long v = 0;
  if (get_int(n, "buckets", 1, 32767, v)) rack.sw.buckets = static_cast<uint16_t>(v);
  if (get_int(n, "idle-timer", 0, 3600, v)) rack.sw.idle_timer_s = static_cast<uint32_t>(v);
  if (get_int(n, "unbalanced-timer", 0, 3600, v)) rack.sw.unbalanced_timer_s = static_cast<uint32_t>(v);
  if (get_int(n, "max-prefixes", 1, 100000, v)) rack.sw.max_prefixes = static_cast<uint32_t>(v);
  if (get_int(n, "hold-time", kHoldTimeBounds.lo, kHoldTimeBounds.hi, v)) rack.sw.hold_time_s = static_cast<uint32_t>(v);
  if (get_int(n, "bfd-interval", kBfdIntervalBounds.lo, kBfdIntervalBounds.hi, v)) {
    rack.sw.bfd_interval_ms = static_cast<uint32_t>(v);
    rack.sw.bfd_interval_given = true;
  }
  if (get_int(n, "bfd-multiplier", 1, 255, v)) rack.sw.bfd_multiplier = static_cast<uint32_t>(v);
  bool b4 = get_net(n, "block4", parse_net4, benchmark_range4(), rack.block4);
  bool b6 = get_net(n, "block6", parse_net6, benchmark_range6(), rack.block6);
  explicit_block_[rack_index] = {b4, b6};
  rack_xml_[rack_index] = n;
  topo_.racks.push_back(std::move(rack));
  for (auto h : n.children("host")) load_hosts(h, rack_index);
  for (auto s : n.children("server")) load_servers(s, rack_index);
  // the rack's pin (its own or a host's) holds for all of it
  if (auto pin = rack_pin_.find(rack_index); pin != rack_pin_.end()) {
    const Rack& r = topo_.racks[static_cast<size_t>(rack_index)];
    for (int x : r.hosts) topo_.nodes[static_cast<size_t>(x)].machine = pin->second.first;
    for (int x : r.servers) topo_.nodes[static_cast<size_t>(x)].machine = pin->second.first;
    if (r.switch_node >= 0) topo_.nodes[static_cast<size_t>(r.switch_node)].machine = pin->second.first;
  }
  if (!n.child("host"))
    problem(n, "rack '{}' has no <host>: a rack holds at least one host (its task block is theirs)",
            topo_.racks.back().name);
}

void Loader::load_hosts(const pugi::xml_node& n, int rack_index) {
  check_shape(n, {"name", "count", "nics", "rate", "numa", "asn", "machine"}, {"nic", "job"});
  std::string base = get_name(n);
  long long count = 1, nics = 4;
  bool counted = get_int(n, "count", 1, kMaxCount, count);
  get_int(n, "nics", kNicsBounds.lo, kNicsBounds.hi, nics);
  uint64_t rate = 500'000'000;
  get_rate(n, "rate", rate);
  std::vector<int> numa;
  for (int i = 0; i < nics; ++i) numa.push_back(static_cast<int>(i * 2 / nics));
  if (auto a = n.attribute("numa")) {
    std::vector<int> given;
    std::string s = a.value();
    std::replace(s.begin(), s.end(), ',', ' ');
    std::istringstream in(s);
    std::string tok;
    bool bad = false;
    while (in >> tok) {
      int v = -1;
      auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
      if (ec != std::errc() || p != tok.data() + tok.size() || v < 0 || v > 63) bad = true;
      given.push_back(v);
    }
    if (bad || given.size() != static_cast<size_t>(nics))
      problem(n, "<host> numa=\"{}\": expected {} NUMA node numbers (0-63), one per NIC", a.value(),
              nics);
    else
      numa = given;
  }
  long long asn = 0;
  bool has_asn = get_int(n, "asn", 1, 4294967294LL, asn);
  // a host pinned to a machine pins its rack: a rack's hosts, switch and
  // servers are placed together
  int host_machine = get_machine(n);
  if (host_machine >= 0) {
    int sw = topo_.racks[static_cast<size_t>(rack_index)].switch_node;
    auto [it, fresh] = rack_pin_.try_emplace(rack_index, host_machine, line_of(n));
    if (!fresh && it->second.first != host_machine)
      problem(n, "<host> machine=\"{}\": its rack '{}' is pinned to machine {} at line {}; a rack's hosts, switch "
                 "and servers share one machine, so this pins a node twice",
              host_machine, topo_.racks[static_cast<size_t>(rack_index)].name, it->second.first, it->second.second);
    else if (sw >= 0)
      topo_.nodes[static_cast<size_t>(sw)].machine = host_machine;
  }

  std::vector<Nic> nic_list(static_cast<size_t>(nics));
  for (int i = 0; i < nics; ++i) {
    nic_list[i].index = i;
    nic_list[i].rate_bps = rate;
    nic_list[i].numa = numa[i];
  }
  std::set<long long> seen_nic;
  for (auto c : n.children("nic")) {
    check_shape(c, {"index", "rate", "numa", "loss", "duplicate", "delay", "jitter", "distribution", "reorder", "corrupt"}, {});
    long long idx = -1;
    if (!c.attribute("index")) {
      problem(c, "<nic>: missing attribute 'index'");
      continue;
    }
    if (!get_int(c, "index", 0, nics - 1, idx)) continue;
    if (!seen_nic.insert(idx).second) problem(c, "<nic> index {} is given twice", idx);
    get_rate(c, "rate", nic_list[idx].rate_bps);
    get_impairment(c, nic_list[idx].impair, nic_list[idx].impair_loc);
    long long nn = 0;
    if (get_int(c, "numa", 0, 63, nn)) nic_list[idx].numa = static_cast<int>(nn);
  }
  Job job_template;
  job_template.name = "job";
  std::optional<Ip4> task4;
  std::optional<Ip6> task6;
  int n_jobs = 0;
  for (auto j : n.children("job")) {
    if (n_jobs++) {
      problem(j, "a host runs one job container; <job> is given twice");
      continue;
    }
    check_shape(j, {"name", "task-ip4", "task-ip6", "egress", "vip", "family", "injector", "injector-cmd", "program"},
                {});
    job_template.name = get_name(j, "job");
    if (auto a = j.attribute("egress")) {
      auto m = parse_egress_mode(a.value());
      if (!m)
        problem(j, "<job> egress=\"{}\": expected single, ecmp, bpf, bpf-numa, bind, active-backup or mptcp", a.value());
      else
        job_template.egress = *m;
    }
    if (auto a = j.attribute("vip")) {
      auto m = parse_vip_mode(a.value());
      if (!m)
        problem(j, "<job> vip=\"{}\": expected per-nic or add-path", a.value());
      else
        job_template.vip = *m;
    }
    if (auto a = j.attribute("family")) {
      auto f = parse_job_family(a.value());
      if (!f)
        problem(j, "<job> family=\"{}\": expected dual, ipv4 or ipv6", a.value());
      else
        job_template.family = *f;
    }
    bool bpf_egress = job_template.egress == EgressMode::bpf || job_template.egress == EgressMode::bpf_numa;
    // a scenario's egress override (a phase's egress="single" baseline)
    // sets the program aside; a file that names both is contradicting itself
    if (auto a = j.attribute("program"); a && (bpf_egress || !overrides_.count("egress"))) {
      if (!bpf_egress) {
        problem(j, "<job> program=\"{}\" replaces the BPF datapath: it needs egress=\"bpf\" or \"bpf-numa\"",
                a.value());
      } else {
        std::filesystem::path f = a.value();
        if (f.is_relative()) f = std::filesystem::path(file_).parent_path() / f;
        std::error_code ec;
        if (!std::filesystem::is_regular_file(f, ec))
          problem(j, "<job> program=\"{}\": no such file ({})", a.value(), f.string());
        else
          job_template.egress_program = std::filesystem::absolute(f, ec).lexically_normal().string();
      }
    }
    if (auto a = j.attribute("injector")) {
      auto k = parse_injector_kind(a.value());
      if (!k)
        problem(j, "<job> injector=\"{}\": expected lanes, exabgp, bird or exec", a.value());
      else
        job_template.injector = *k;
      if (k == InjectorKind::exec) {
        job_template.injector_cmd = j.attribute("injector-cmd").value();
        if (job_template.injector_cmd.empty())
          problem(j, "<job> injector=\"exec\" needs injector-cmd=\"...\": the command of your own injector");
      }
    }
    if (j.attribute("injector-cmd") && job_template.injector != InjectorKind::exec)
      problem(j, "<job> injector-cmd is for injector=\"exec\" (the default injector is lanes' own)");
    if (job_template.injector == InjectorKind::bird && job_template.vip == VipMode::add_path)
      problem(j, "<job> injector=\"bird\" with vip=\"add-path\": lanes renders BIRD with one session per NIC "
                 "only (ADD-PATH would need a route per NIC in BIRD's table, each from a protocol of its own); "
                 "use vip=\"per-nic\", or injector=\"exabgp\" for ADD-PATH");
    if (job_template.egress == EgressMode::active_backup && job_template.injector != InjectorKind::lanes)
      problem(j, "<job> egress=\"active-backup\" with injector=\"{}\": only lanes' own injector announces the task "
                 "IP through one NIC at a time (the others announce every NIC: ingress would not wait for a failure)",
              to_string(job_template.injector));
    if (j.attribute("task-ip4") && !job_template.has4())
      problem(j, "<job> task-ip4 on a job with family=\"ipv6\": an IPv6-only job has no IPv4 task IP");
    if (j.attribute("task-ip6") && !job_template.has6())
      problem(j, "<job> task-ip6 on a job with family=\"ipv4\": an IPv4-only job has no IPv6 task IP");
    if (auto a = j.attribute("task-ip4")) {
      if (count > 1) problem(j, "<job> task-ip4 cannot be given for a host with count > 1");
      task4 = parse_ip4(a.value());
      if (!task4)
        problem(j, "<job> task-ip4=\"{}\": not an IPv4 address", a.value());
    }
    if (auto a = j.attribute("task-ip6")) {
      if (count > 1) problem(j, "<job> task-ip6 cannot be given for a host with count > 1");
      task6 = parse_ip6(a.value());
      if (!task6)
        problem(j, "<job> task-ip6=\"{}\": not an IPv6 address", a.value());
    }
  }
  for (long long i = 1; i <= count && !base.empty(); ++i) {
    Node node;
    node.name = counted ? base + std::to_string(i) : base;
    node.kind = NodeKind::host;
    node.rack = rack_index;
    node.machine = -1;  // the rack's, set once the rack is read
    node.nics = nic_list;
    node.job = job_template;
    node.loc = loc(n);
    node.asn = has_asn ? static_cast<uint32_t>(asn) : 0;  // 0: allocated later
    int idx = add_node(std::move(node), n);
    if (idx < 0) continue;
    topo_.racks[rack_index].hosts.push_back(idx);
    explicit_task_[idx] = {task4, task6};
    host_xml_[idx] = n.child("job") ? n.child("job") : n;
    for (auto& nic : topo_.nodes[idx].nics) {
      Link l;
      l.kind = LinkKind::host_nic;
      l.a.node = topo_.racks[rack_index].switch_node;
      l.b.node = idx;
      l.rate_bps = nic.rate_bps;
      l.impair = nic.impair;
      l.impair_loc = nic.impair_loc;
      l.nic = nic.index;
      l.loc = loc(n);
      topo_.links.push_back(l);
      nic.link = static_cast<int>(topo_.links.size()) - 1;
    }
  }
}

void Loader::load_servers(const pugi::xml_node& n, int rack_index) {
  if (rack_index >= 0)
    check_shape(n, {"name", "count", "role", "rate"}, {});
  else
    check_shape(n, {"name", "count", "role", "rate", "attach", "machine"}, {});
  std::string base = get_name(n);
  long long count = 1;
  bool counted = get_int(n, "count", 1, kMaxCount, count);
  ServerRole role = ServerRole::storage;
  if (auto a = n.attribute("role")) {
    std::string r = a.value();
    if (r == "storage")
      role = ServerRole::storage;
    else if (r == "param")
      role = ServerRole::param;
    else
      problem(n, "<server> role=\"{}\": expected storage or param", r);
  }
  uint64_t rate = 0;
  get_rate(n, "rate", rate);
  if (rack_index < 0 && !n.attribute("attach"))
    problem(n, "<server> outside a rack needs attach=\"SPINE-OR-SWITCH\"");
  for (long long i = 1; i <= count && !base.empty(); ++i) {
    Node node;
    node.name = counted ? base + std::to_string(i) : base;
    node.kind = NodeKind::server;
    node.rack = rack_index;
    node.machine = rack_index < 0 ? get_machine(n) : -1;  // in a rack: the rack's
    node.role = role;
    node.loc = loc(n);
    int idx = add_node(std::move(node), n);
    if (idx < 0) continue;
    server_rate_[idx] = rate;
    if (rack_index >= 0) {
      topo_.racks[rack_index].servers.push_back(idx);
      server_attach_.emplace_back(idx, topo_.racks[rack_index].switch_node);
    } else if (auto a = n.attribute("attach")) {
      int target = topo_.find_node(a.value());
      if (target < 0 || (topo_.nodes[target].kind != NodeKind::spine &&
                         topo_.nodes[target].kind != NodeKind::rack_switch))
        problem(n, "<server> attach=\"{}\": no spine or rack switch has that name", a.value());
      else
        server_attach_.emplace_back(idx, target);
    }
  }
}

void Loader::load_links(const pugi::xml_node& root) {
  std::set<std::pair<int, int>> seen;
  bool any = false;
  for (auto l : root.children("link")) {
    any = true;
    check_shape(l, {"a", "b", "rate", "loss", "duplicate", "delay", "jitter", "distribution", "reorder", "corrupt"}, {});
    std::string an = l.attribute("a").value(), bn = l.attribute("b").value();
    if (an.empty() || bn.empty()) {
      problem(l, "<link> needs both a=\"NODE\" and b=\"NODE\"");
      continue;
    }
    int a = topo_.find_node(an), b = topo_.find_node(bn);
    if (a < 0) problem(l, "<link> a=\"{}\": no such node", an);
    if (b < 0) problem(l, "<link> b=\"{}\": no such node", bn);
    if (a < 0 || b < 0) continue;
    auto is_sw = [&](int i) {
      return topo_.nodes[i].kind == NodeKind::spine || topo_.nodes[i].kind == NodeKind::rack_switch;
    };
    if (!is_sw(a) || !is_sw(b)) {
      problem(l, "<link> connects switches and spines only; hosts get their NIC links from their "
                 "rack and servers from their rack or attach=\"...\"");
      continue;
    }
    if (a == b) {
      problem(l, "<link> connects '{}' to itself", an);
      continue;
    }
    // the spine (or the first switch) is side A
    if (topo_.nodes[b].kind == NodeKind::spine && topo_.nodes[a].kind != NodeKind::spine) std::swap(a, b);
    if (!seen.insert({std::min(a, b), std::max(a, b)}).second) {
      problem(l, "<link> between '{}' and '{}' is given twice", an, bn);
      continue;
    }
    Link link;
    link.kind = LinkKind::fabric;
    link.a.node = a;
    link.b.node = b;
    get_rate(l, "rate", link.rate_bps);
    get_impairment(l, link.impair, link.impair_loc);
    link.loc = loc(l);
    topo_.links.push_back(link);
  }
  if (!any) {
    // CLOS default: every spine connects to every rack switch
    for (size_t s = 0; s < topo_.nodes.size(); ++s) {
      if (topo_.nodes[s].kind != NodeKind::spine) continue;
      for (const auto& rack : topo_.racks) {
        Link link;
        link.kind = LinkKind::fabric;
        link.a.node = static_cast<int>(s);
        link.b.node = rack.switch_node;
        link.loc = topo_.nodes[s].loc;
        topo_.links.push_back(link);
      }
    }
  }
  // with spines, every spine and every rack switch is part of the fabric
  bool spines = topo_.count(NodeKind::spine) > 0;
  for (size_t i = 0; spines && i < topo_.nodes.size(); ++i) {
    const Node& nd = topo_.nodes[i];
    if (nd.kind != NodeKind::spine && nd.kind != NodeKind::rack_switch) continue;
    bool linked = std::any_of(topo_.links.begin(), topo_.links.end(), [&](const Link& l) {
      return l.kind == LinkKind::fabric && (l.a.node == static_cast<int>(i) || l.b.node == static_cast<int>(i));
    });
    if (linked) continue;
    if (nd.kind == NodeKind::spine)
      problems_.push_back(fmt::format("{}:{}: spine '{}' has no <link>: it would carry nothing{}", file_,
                                      nd.loc.line, nd.name,
                                      topo_.racks.empty() ? " (there is no rack)" : " (link it to a rack switch)"));
    else
      problems_.push_back(fmt::format("{}:{}: rack switch '{}' has no <link> to a spine: its rack would be cut off",
                                      file_, nd.loc.line, nd.name));
  }
  // racks with no way to each other: no rack's routes could reach another,
  // and a run of it never converges (converge waits for every switch to
  // reach every rack)
  if (topo_.racks.size() > 1 && problems_.empty()) {
    std::vector<std::vector<int>> adj(topo_.nodes.size());
    for (const auto& l : topo_.links)
      if (l.kind == LinkKind::fabric) adj[static_cast<size_t>(l.a.node)].push_back(l.b.node), adj[static_cast<size_t>(l.b.node)].push_back(l.a.node);
    std::vector<bool> reached(topo_.nodes.size(), false);
    std::vector<int> todo = {topo_.racks.front().switch_node};
    reached[static_cast<size_t>(todo.front())] = true;
    while (!todo.empty()) {
      int n = todo.back();
      todo.pop_back();
      for (int m : adj[static_cast<size_t>(n)])
        if (!reached[static_cast<size_t>(m)]) reached[static_cast<size_t>(m)] = true, todo.push_back(m);
    }
    for (const auto& r : topo_.racks) {
      if (reached[static_cast<size_t>(r.switch_node)]) continue;
      const Node& sw = topo_.nodes[static_cast<size_t>(r.switch_node)];
      problems_.push_back(fmt::format(
          "{}:{}: rack '{}' has no path to rack '{}': {}", file_, sw.loc.line, r.name, topo_.racks.front().name,
          spines ? "its switch's links reach no spine the other rack reaches"
                 : "with several racks, add a <spine> and a <link a=\"SPINE\" b=\"RACK-tor\"/> to each rack switch"));
    }
  }
  for (auto [server, target] : server_attach_) {
    Link link;
    link.kind = LinkKind::server;
    link.a.node = target;
    link.b.node = server;
    link.rate_bps = server_rate_[server];
    link.loc = topo_.nodes[server].loc;
    topo_.links.push_back(link);
  }
}

void Loader::assign_addresses() {
  FixedAddresses fixed;
  fixed.task = explicit_task_;
  fixed.block = explicit_block_;
  for (const auto& [r, xml] : rack_xml_) fixed.rack_line[r] = line_of(xml);
  for (const auto& [h, xml] : host_xml_) fixed.host_line[h] = line_of(xml);
  for (auto& p : plan_addresses(topo_, fixed, file_)) problems_.push_back(std::move(p));
}

}  // namespace

InputError::InputError(std::vector<std::string> problems)
    : std::runtime_error(join_lines(problems)), problems_(std::move(problems)) {}

bool number_and_unit(const std::string& s, double& v, std::string& unit) {
  if (s.empty() || !(std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '.')) return false;
  size_t used = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    return false;
  }
  unit = s.substr(used);
  return std::isfinite(v);
}

bool parse_duration(const std::string& s, std::chrono::milliseconds& out) {
  double v, ms;
  std::string unit;
  if (!number_and_unit(s, v, unit)) return false;
  if (unit == "ms") ms = v;
  else if (unit == "s" || unit.empty()) ms = v * 1000;
  else if (unit == "m") ms = v * 60'000;
  else return false;
  if (ms > 24 * 3600e3) return false;
  out = std::chrono::milliseconds(static_cast<int64_t>(std::llround(ms)));
  return true;
}

bool parse_rate(const std::string& text, uint64_t& bps) {
  std::string s;
  for (char c : text) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s == "off") {
    bps = 0;
    return true;
  }
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  if (i == 0) return false;
  double v = 0;
  try {
    size_t used = 0;
    v = std::stod(s.substr(0, i), &used);
    if (used != i) return false;
  } catch (...) {
    return false;
  }
  std::string unit = s.substr(i);
  double mul = 0;
  if (unit == "" || unit == "bit") mul = 1;
  else if (unit == "k" || unit == "kbit") mul = 1e3;
  else if (unit == "m" || unit == "mbit") mul = 1e6;
  else if (unit == "g" || unit == "gbit") mul = 1e9;
  else return false;
  double r = v * mul;
  if (r < 8000 || r > 1e12) return false;  // below 1 kB/s is a typo
  bps = static_cast<uint64_t>(r);
  return true;
}

std::string format_rate(uint64_t bps) {
  if (bps == 0) return "unshaped";
  if (bps % 1'000'000'000 == 0) return fmt::format("{}gbit", bps / 1'000'000'000);
  if (bps % 1'000'000 == 0) return fmt::format("{}mbit", bps / 1'000'000);
  if (bps % 1'000 == 0) return fmt::format("{}kbit", bps / 1'000);
  return fmt::format("{}bit", bps);
}

Topology load_topology_text(const std::string& text, const std::string& file, const Overrides& ov) {
  return Loader(text, file, ov).load();
}

Topology load_topology(const std::string& path, const Overrides& ov) {
  return load_topology_text(read_input_file(path, "topology file"), path, ov);
}

}  // namespace lanes::testbed
