#include "lanes/core/impair.hpp"
#include "lanes/core/rootless.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <vector>

#include "impair.skel.h"
#include "impair_abi.h"

namespace lanes::testbed {

namespace {
// libbpf logs what the kernel says of an expected failure (a clsact qdisc
// that is there already, or a filter that is not): unsaid meanwhile
struct QuietLibbpf {
  libbpf_print_fn_t old = libbpf_set_print(nullptr);
  ~QuietLibbpf() { libbpf_set_print(old); }
};

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

std::string Impairment::describe() const {
  std::string out;
  if (loss_ppm) out += "loss " + percent(loss_ppm);
  if (duplicate_ppm) out += std::string(out.empty() ? "" : ", ") + "duplicate " + percent(duplicate_ppm);
  return out.empty() ? "none" : out;
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

std::string netem_refusal() {
  return "needs the netem qdisc, which lanes does not drive yet: loss and duplicate work on any kernel (lanes' own "
         "BPF program); `lanes features` says whether this kernel has netem";
}

Result<Impairment> parse_impairment(const std::map<std::string, std::string>& attrs) {
  Impairment imp;
  for (const auto& [k, v] : attrs) {
    if (k == "loss" || k == "duplicate") {
      std::string why;
      auto p = parse_probability(v, why);
      if (!p) return os_error(EINVAL, fmt::format("{}=\"{}\": {}", k, v, why));
      (k == "loss" ? imp.loss_ppm : imp.duplicate_ppm) = *p;
    } else if (std::find(std::begin(kNetemOnly), std::end(kNetemOnly), k) != std::end(kNetemOnly)) {
      return os_error(ENOTSUP, fmt::format("{}=\"{}\": {}", k, v, netem_refusal()));
    }
  }
  return imp;
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
  if (rootless::world_base())
    return os_error(EPERM, "impairing " + ifname + ": link impairments are lanes' tc BPF program, and lanes without "
                           "root runs in a user namespace, which cannot load BPF; run lanes as root for them");
  DeviceImpairment d;
  d.skel_ = std::make_unique<Skel>();
  d.skel_->s = impair_bpf__open();
  if (!d.skel_->s) return os_error(errno, "opening the impairment BPF program");
  d.skel_->s->rodata->loss_ppm = imp.loss_ppm;
  d.skel_->s->rodata->duplicate_ppm = imp.duplicate_ppm;
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
  }
  return out;
}

}  // namespace lanes::testbed
