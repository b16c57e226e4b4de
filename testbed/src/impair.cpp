#include "lanes/testbed/impair.hpp"
#include "lanes/testbed/libbpf_log.hpp"
#include "lanes/testbed/netlink.hpp"
#include "lanes/testbed/rootless.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fmt/format.h>
#include <linux/pkt_sched.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/qdisc/fifo.h>
#include <netlink/route/qdisc/netem.h>
#include <netlink/route/tc.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "impair.skel.h"
#include "impair_abi.h"

namespace lanes::testbed {

namespace {
// its own place on the device's egress hook: lanes' datapath programs use handle 1
constexpr uint32_t kHandle = 0x1a;
constexpr uint32_t kPriority = 7;

std::string percent(uint32_t ppm) {
  std::string s = fmt::format("{:.4f}", ppm / 1e4);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s + "%";
}
}  // namespace

namespace {
std::string duration(uint32_t us) {
  if (us % 1000000 == 0) return fmt::format("{}s", us / 1000000);
  if (us % 1000 == 0) return fmt::format("{}ms", us / 1000);
  if (us > 1000) return fmt::format("{:g}ms", us / 1000.0);
  return fmt::format("{}us", us);
}
}  // namespace

std::string Impairment::describe() const {
  std::vector<std::string> parts;
  if (loss_ppm) parts.push_back("loss " + percent(loss_ppm));
  if (duplicate_ppm) parts.push_back("duplicate " + percent(duplicate_ppm));
  if (corrupt_ppm) parts.push_back("corrupt " + percent(corrupt_ppm));
  if (delay_us) {
    std::string d = "delay " + duration(delay_us);
    if (jitter_us) d += " ± " + duration(jitter_us) + (distribution.empty() ? "" : " " + distribution);
    parts.push_back(d);
  }
  if (reorder_ppm) parts.push_back("reorder " + percent(reorder_ppm));
  std::string out;
  for (const auto& x : parts) out += (out.empty() ? "" : ", ") + x;
  return out.empty() ? "none" : out;
}

std::string Impairment::netem_parts() const {
  std::string out;
  auto add = [&](bool on, const char* what) {
    if (on) out += std::string(out.empty() ? "" : ", ") + what;
  };
  add(delay_us, "delay");
  add(jitter_us, "jitter");
  add(reorder_ppm, "reorder");
  return out;
}

std::optional<uint32_t> parse_probability(const std::string& value, std::string& why) {
  std::string v = value;
  double p = 0;
  size_t used = 0;
  if (!v.empty() && v.back() == '%') {
    v.pop_back();
    try {
      p = std::stod(v, &used);
    } catch (...) {
      used = 0;
    }
  }
  if (used == 0 || used != v.size() || !std::isfinite(p)) {
    why = "expected a percentage like 1% or 0.05%";
    return std::nullopt;
  }
  if (p <= 0 || p > 100) {
    why = "expected a percentage above 0% and at most 100%";
    return std::nullopt;
  }
  double ppm = std::round(p * 1e4);
  if (ppm < 1) {
    why = "expected at least one packet in a million (0.0001%)";
    return std::nullopt;
  }
  return static_cast<uint32_t>(ppm);
}

std::optional<uint32_t> parse_delay(const std::string& value, std::string& why) {
  why = "expected a delay like 5ms, 250us or 0.5ms";
  size_t used = 0;
  double x = 0;
  try {
    x = std::stod(value, &used);
  } catch (...) {
    return std::nullopt;
  }
  std::string unit = value.substr(used);
  double scale = unit == "us" ? 1 : unit == "ms" ? 1e3 : unit == "s" ? 1e6 : 0;
  if (used == 0 || scale == 0 || !std::isfinite(x) || value.find_first_of("eExXpP") < used) return std::nullopt;
  double us = std::round(x * scale);
  if (x <= 0 || us < 1) {
    why = "expected a delay of at least 1us";
    return std::nullopt;
  }
  if (us > 10e6) {
    why = "expected a delay of at most 10s";
    return std::nullopt;
  }
  return static_cast<uint32_t>(us);
}

std::string netem_missing() {
  return "needs the netem qdisc, which this kernel lacks (CONFIG_NET_SCH_NETEM); loss, duplicate and corrupt work "
         "without it (lanes' own BPF program), and `lanes features` lists what works here";
}

Result<Impairment> parse_impairment(const std::map<std::string, std::string>& attrs) {
  Impairment imp;
  auto bad = [](const std::string& k, const std::string& v, const std::string& why) {
    return os_error(EINVAL, fmt::format("{}=\"{}\": {}", k, v, why));
  };
  for (const auto& [k, v] : attrs) {
    std::string why;
    if (k == "loss" || k == "duplicate" || k == "reorder" || k == "corrupt") {
      auto p = parse_probability(v, why);
      if (!p) return bad(k, v, why);
      (k == "loss" ? imp.loss_ppm : k == "duplicate" ? imp.duplicate_ppm : k == "reorder" ? imp.reorder_ppm
                                                                                          : imp.corrupt_ppm) = *p;
    } else if (k == "delay" || k == "jitter") {
      auto d = parse_delay(v, why);
      if (!d) return bad(k, v, why);
      (k == "delay" ? imp.delay_us : imp.jitter_us) = *d;
    } else if (k == "distribution") {
      if (v != "uniform" && v != "normal" && v != "pareto" && v != "paretonormal")
        return bad(k, v, "expected one of uniform, normal, pareto, paretonormal (netem's)");
      imp.distribution = v == "uniform" ? "" : v;
    }
  }
  auto get = [&](const char* k) { return attrs.count(k) ? attrs.at(k) : std::string(); };
  if (imp.jitter_us && !imp.delay_us) return bad("jitter", get("jitter"), "a jitter needs a delay=\"...\" it varies");
  if (imp.jitter_us > imp.delay_us)
    return bad("jitter", get("jitter"), fmt::format("at most the delay ({}): netem would have to send packets "
                                                    "before they came", get("delay")));
  if (attrs.count("distribution") && !imp.jitter_us)
    return bad("distribution", get("distribution"), "a distribution is the jitter's: it needs jitter=\"...\"");
  if (imp.reorder_ppm && !imp.delay_us)
    return bad("reorder", get("reorder"), "netem reorders by sending some packets at once while the others wait "
                                          "out a delay: it needs delay=\"...\"");
  return imp;
}

uint32_t netem_limit(uint64_t rate_bps, uint64_t tbf_limit_bytes, uint32_t delay_us, uint32_t jitter_us) {
  constexpr uint64_t kFrame = 1514, kUnshaped = 16'000'000'000ull;
  uint64_t rate = rate_bps ? rate_bps : kUnshaped;
  uint64_t held = rate / 8 * (static_cast<uint64_t>(delay_us) + jitter_us) / 1'000'000;
  uint64_t pkts = 2 * ((held + kFrame - 1) / kFrame) + (tbf_limit_bytes + kFrame - 1) / kFrame;
  return static_cast<uint32_t>(std::clamp<uint64_t>(pkts, 1000, 1u << 24));
}

Result<std::vector<int16_t>> parse_distribution_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return errno_error("reading " + path);
  std::vector<int16_t> out;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ws(line);
    std::string w;
    while (ws >> w) {
      char* end = nullptr;
      long x = std::strtol(w.c_str(), &end, 0);
      if (*end || x < INT16_MIN || x > INT16_MAX)
        return os_error(EINVAL, fmt::format("{}:{}: \"{}\" is not a table entry (-32768 to 32767)", path, n, w));
      out.push_back(static_cast<int16_t>(x));
    }
  }
  // netem's table holds at most 2^16 entries (its MAXDIST is smaller still)
  if (out.empty() || out.size() > 16384)
    return os_error(EINVAL, fmt::format("{}: {} entries; a netem table has 1 to 16384", path, out.size()));
  return out;
}

Result<std::vector<int16_t>> netem_distribution(const std::string& name) {
  if (name.empty()) return std::vector<int16_t>{};
  std::vector<std::string> dirs = {"/usr/lib/tc", "/usr/lib64/tc", "/usr/local/lib/tc", "/usr/share/tc"};
  // Debian puts iproute2's tables under the multiarch directory
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/usr/lib", ec))
    if (std::filesystem::exists(e.path() / "tc" / (name + ".dist"), ec)) dirs.push_back((e.path() / "tc").string());
  for (const auto& d : dirs)
    if (std::filesystem::exists(d + "/" + name + ".dist", ec)) return parse_distribution_file(d + "/" + name + ".dist");
  return os_error(ENOENT, fmt::format("distribution=\"{}\": netem's table {}.dist is not installed (it comes with "
                                      "iproute2; looked in /usr/lib/tc, /usr/lib64/tc, /usr/local/lib/tc, "
                                      "/usr/share/tc and /usr/lib/*/tc)",
                                      name, name));
}

struct DeviceImpairment::Skel {
  impair_bpf* s = nullptr;
  ~Skel() {
    if (s) impair_bpf__destroy(s);
  }
};

DeviceImpairment::DeviceImpairment(DeviceImpairment&&) noexcept = default;
DeviceImpairment& DeviceImpairment::operator=(DeviceImpairment&&) noexcept = default;
DeviceImpairment::~DeviceImpairment() = default;

Result<DeviceImpairment> DeviceImpairment::attach(int ifindex, const std::string& ifname, const Impairment& imp) {
  libbpf_to_log();
  if (rootless::world_base())
    return os_error(EPERM, "impairing " + ifname + ": loss, duplication and corruption are lanes' tc BPF program, and lanes "
                           "without root runs in a user namespace, which cannot load BPF; run lanes as root for them "
                           "(delay, jitter and reorder are netem's, and work without root)");
  DeviceImpairment d;
  d.skel_ = std::make_unique<Skel>();
  d.skel_->s = impair_bpf__open();
  if (!d.skel_->s) return os_error(errno, "opening the impairment BPF program");
  d.skel_->s->rodata->loss_ppm = imp.loss_ppm;
  d.skel_->s->rodata->duplicate_ppm = imp.duplicate_ppm;
  d.skel_->s->rodata->corrupt_ppm = imp.corrupt_ppm;
  if (int err = impair_bpf__load(d.skel_->s); err)
    return os_error(-err, "loading the impairment BPF program (it needs root or CAP_BPF)");
  LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = BPF_TC_EGRESS);
  LIBBPF_OPTS(bpf_tc_opts, opts, .prog_fd = bpf_program__fd(d.skel_->s->progs.lanes_impair),
              .flags = BPF_TC_F_REPLACE, .handle = kHandle, .priority = kPriority);
  int err;
  {
    QuietLibbpf quiet;
    err = bpf_tc_hook_create(&hook);  // the clsact qdisc; EEXIST when it is there
  }
  if (err && err != -EEXIST) return os_error(-err, "creating the clsact hook on " + ifname);
  if ((err = bpf_tc_attach(&hook, &opts))) return os_error(-err, "attaching the impairment program to " + ifname);
  return d;
}

Status DeviceImpairment::clear(int ifindex, const std::string& ifname) {
  LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = BPF_TC_EGRESS);
  LIBBPF_OPTS(bpf_tc_opts, opts, .handle = kHandle, .priority = kPriority);
  QuietLibbpf quiet;
  int err = bpf_tc_detach(&hook, &opts);
  if (err && err != -ENOENT && err != -EINVAL) return os_error(-err, "removing the impairment of " + ifname);
  return {};
}

Result<ImpairStats> DeviceImpairment::stats() const {
  int n = libbpf_num_possible_cpus();
  if (n <= 0) return os_error(-n, "counting CPUs");
  std::vector<lanes_impair_stats> per(static_cast<size_t>(n));
  uint32_t zero = 0;
  if (bpf_map_lookup_elem(bpf_map__fd(skel_->s->maps.impair_stats), &zero, per.data()))
    return os_error(errno, "reading the impairment counters");
  ImpairStats out;
  for (const auto& p : per) {
    out.packets += p.packets;
    out.lost += p.lost;
    out.duplicated += p.duplicated;
    out.corrupted += p.corrupted;
  }
  return out;
}

}  // namespace lanes::testbed

namespace lanes::testbed {

namespace {
using QdiscPtr = std::unique_ptr<rtnl_qdisc, void (*)(rtnl_qdisc*)>;

std::system_error nl_failed(int err, const std::string& what) {
  return os_error(EIO, what + ": " + nl_geterror(err));
}

// netem's probabilities: a fraction of 2^32 - 1
int netem_probability(uint32_t ppm) {
  return static_cast<int>(static_cast<uint32_t>(std::llround(ppm / 1e6 * 4294967295.0)));
}
}  // namespace

Status set_netem(Netlink& nl, int index, const std::string& ifname, const Impairment& imp) {
  std::string what = fmt::format("setting netem ({}) on {}", imp.describe(), ifname);
  auto qs = nl.qdiscs();
  if (!qs) return qs.error();
  std::optional<QdiscInfo> tbf;
  for (const auto& q : qs.value())
    if (q.index == index && q.parent == TC_H_ROOT && q.kind == "tbf") tbf = q;
  auto dist = netem_distribution(imp.distribution);
  if (!dist) return dist.error();
  QdiscPtr q(rtnl_qdisc_alloc(), rtnl_qdisc_put);
  if (!q) return os_error(ENOMEM, what);
  auto* tc = TC_CAST(q.get());
  rtnl_tc_set_ifindex(tc, index);
  if (tbf) {  // the TBF's one class: its queue becomes netem
    rtnl_tc_set_parent(tc, TC_H_MAKE(TC_H_MAJ(tbf->handle), 1));
    rtnl_tc_set_handle(tc, TC_HANDLE(0x10, 0));
  } else {
    rtnl_tc_set_parent(tc, TC_H_ROOT);
    rtnl_tc_set_handle(tc, TC_HANDLE(1, 0));
  }
  if (int err = rtnl_tc_set_kind(tc, "netem"); err < 0) return nl_failed(err, what);
  rtnl_netem_set_limit(q.get(), static_cast<int>(netem_limit(tbf ? tbf->rate_bps : 0, tbf ? tbf->limit_bytes : 0,
                                                             imp.delay_us, imp.jitter_us)));
  if (imp.delay_us) rtnl_netem_set_delay(q.get(), static_cast<int>(imp.delay_us));
  if (imp.jitter_us) rtnl_netem_set_jitter(q.get(), static_cast<int>(imp.jitter_us));
  if (!dist.value().empty())
    if (int err = rtnl_netem_set_delay_distribution_data(q.get(), dist.value().data(), dist.value().size()); err < 0)
      return nl_failed(err, what);
  if (imp.reorder_ppm) rtnl_netem_set_reorder_probability(q.get(), netem_probability(imp.reorder_ppm));
  if (int err = rtnl_qdisc_add(nl.raw(), q.get(), NLM_F_CREATE | NLM_F_REPLACE); err < 0) {
    if (err == -NLE_OBJ_NOTFOUND || err == -NLE_OPNOTSUPP || err == -NLE_INVAL)
      return os_error(ENOTSUP, fmt::format("{}: {} ({})", what, netem_missing(), nl_geterror(err)));
    return nl_failed(err, what);
  }
  return {};
}

Status clear_netem(Netlink& nl, int index, const std::string& ifname) {
  std::string what = "removing the netem impairment of " + ifname;
  auto qs = nl.qdiscs();
  if (!qs) return qs.error();
  for (const auto& n : qs.value()) {
    if (n.index != index || n.kind != "netem") continue;
    QdiscPtr q(rtnl_qdisc_alloc(), rtnl_qdisc_put);
    if (!q) return os_error(ENOMEM, what);
    auto* tc = TC_CAST(q.get());
    rtnl_tc_set_ifindex(tc, index);
    rtnl_tc_set_parent(tc, n.parent);
    if (n.parent == TC_H_ROOT) {
      rtnl_tc_set_handle(tc, n.handle);
      if (int err = rtnl_qdisc_delete(nl.raw(), q.get()); err < 0) return nl_failed(err, what);
      continue;
    }
    // inside a TBF: the byte queue the TBF makes of its limit (deleting the
    // child would leave the TBF a queue that drops everything)
    uint64_t limit = 0;
    for (const auto& t : qs.value())
      if (t.index == index && t.kind == "tbf" && TC_H_MAJ(t.handle) == TC_H_MAJ(n.parent)) limit = t.limit_bytes;
    if (int err = rtnl_tc_set_kind(tc, "bfifo"); err < 0) return nl_failed(err, what);
    rtnl_qdisc_fifo_set_limit(q.get(), static_cast<int>(limit ? limit : 256 * 1514));
    if (int err = rtnl_qdisc_add(nl.raw(), q.get(), NLM_F_CREATE | NLM_F_REPLACE); err < 0) return nl_failed(err, what);
  }
  return {};
}

}  // namespace lanes::testbed
