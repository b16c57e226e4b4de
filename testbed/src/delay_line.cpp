#include "lanes/testbed/delay_line.hpp"

#include <bpf/libbpf.h>
#include <fmt/format.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "delay_abi.h"
#include "delay_tap.skel.h"
#include "lanes/testbed/delay_schedule.hpp"
#include "lanes/testbed/deploy.hpp"
#include "lanes/testbed/features.hpp"
#include "lanes/testbed/handle.hpp"
#include "lanes/testbed/libbpf_log.hpp"
#include "lanes/testbed/log.hpp"
#include "lanes/testbed/netlink.hpp"
#include "lanes/testbed/netns.hpp"
#include "lanes/testbed/run_layout.hpp"

namespace lanes::testbed {

namespace {
// its place on the device's egress hook: before lanes' impairment program (7)
constexpr uint32_t kHandle = 0x1d;
constexpr uint32_t kPriority = 6;
constexpr size_t kFrame = 65536 + 256;  // a GSO packet, its Ethernet header and the virtio-net header
constexpr size_t kSamples = 100000;     // the last this many packets' times, for the percentiles
constexpr int kSocketBuffer = 32 << 20;
constexpr uint64_t kQueueBytes = 256ull << 20;  // what one device's delay line holds at most
// the timer fires this much before a release and the loop waits out the rest
// on the clock: a wake-up's lateness (tens of µs) is not the packet's
constexpr int64_t kEarlyNs = 60'000;

int64_t real_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

int64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

struct Packet {
  std::vector<uint8_t> bytes;  // the virtio-net header, then the frame
  int64_t arrival_ns = 0, release_ns = 0;
  uint64_t seq = 0;
};

// a packet socket bound to device INDEX: with the virtio-net header, big
// buffers. Made with protocol 0 (it takes nothing) and given PROTOCOL as it
// binds: made with ETH_P_ALL it would take every packet of the namespace
// until then, and those would go out of the device.
Result<int> packet_socket(int index, int protocol, bool tx, const std::string& what) {
  Fd fd(::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return errno_error("a packet socket for " + what);
  int one = 1, buf = kSocketBuffer;
  if (::setsockopt(fd.get(), SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one))
    return errno_error("PACKET_VNET_HDR on " + what);
  if (::setsockopt(fd.get(), SOL_SOCKET, tx ? SO_SNDBUFFORCE : SO_RCVBUFFORCE, &buf, sizeof buf))
    return errno_error("the buffer of " + what + "'s packet socket");
  if (!tx) {  // each packet's arrival as the kernel stamped it, not when the loop read it
    if (::setsockopt(fd.get(), SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one))
      return errno_error("SO_TIMESTAMPNS on " + what);
  }
  if (tx) {
    uint32_t mark = LANES_DELAY_MARK;
    if (::setsockopt(fd.get(), SOL_SOCKET, SO_MARK, &mark, sizeof mark)) return errno_error("SO_MARK on " + what);
  }
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = static_cast<uint16_t>(protocol);
  sll.sll_ifindex = index;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sll), sizeof sll)) return errno_error("binding to " + what);
  return fd.release();
}
}  // namespace

std::string delay_tap_name(int index, char end) { return fmt::format("dl{}{}", index, end); }

Status clear_delay_tap(const std::string& where, const std::string& ifname) {
  auto nl = Netlink::open_here(where);
  if (!nl) return nl.error();
  auto idx = nl.value().ifindex(ifname);
  if (!idx) return {};  // no device, nothing of the delay line's on it
  LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = idx.value(), .attach_point = BPF_TC_EGRESS);
  LIBBPF_OPTS(bpf_tc_opts, opts, .handle = kHandle, .priority = kPriority);
  {
    QuietLibbpf quiet;
    int err = bpf_tc_detach(&hook, &opts);
    if (err && err != -ENOENT && err != -EINVAL) return os_error(-err, "removing the delay line from " + ifname);
  }
  std::string a = delay_tap_name(idx.value(), 'a');
  if (auto old = nl.value().link(a); old && old.value())
    if (auto d = nl.value().delete_link(a); !d) return d;
  return {};
}

bool delay_by_lanes() {
  static const bool v = [] {
    auto f = probe_kernel_features();
    return !f.netem && f.bpf;
  }();
  return v;
}

bool delay_by_lanes(const Topology& t) { return delay_by_lanes(t.impair_engine); }

bool delay_by_lanes(ImpairEngine e) {
  switch (e) {
    case ImpairEngine::netem: return false;
    case ImpairEngine::lanes: return true;
    case ImpairEngine::automatic: break;
  }
  return delay_by_lanes();
}

std::vector<std::string> delay_args(const Impairment& imp) {
  std::vector<std::string> a;
  if (imp.delay_us) a.push_back(fmt::format("delay={}us", imp.delay_us));
  if (imp.jitter_us) a.push_back(fmt::format("jitter={}us", imp.jitter_us));
  if (!imp.distribution.empty()) a.push_back("distribution=" + imp.distribution);
  if (imp.reorder_ppm) a.push_back(fmt::format("reorder={:.4f}%", imp.reorder_ppm / 1e4));
  return a;
}

Status deploy_delay_lines(DeployContext& ctx) {
  const auto& t = ctx.tb.topology();
  bool any = false;
  for (const auto& l : t.links) any = any || l.impair.netem();
  if (!any || !delay_by_lanes(t)) return {};
  RunLayout layout(ctx.reg.dir(ctx.run_id));
  for (const auto& l : t.links) {
    if (!l.impair.netem()) continue;
    for (const Endpoint* e : {&l.a, &l.b}) {
      if (!ctx.local(e->node)) continue;
      const std::string& node = t.nodes.at(static_cast<size_t>(e->node)).name;
      std::string dir = layout.node_dir("delay", node);
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      if (ec) return os_error(ec.value(), "making " + dir);
      DaemonRequest d;
      d.node = node;
      d.name = "delay-" + e->ifname;
      std::string state = dir + "/" + e->ifname + ".json";
      d.argv = {ctx.bin_dir + "/lanes-delay", "--state", state, "--seed", "1", e->ifname};
      for (auto& a : delay_args(l.impair)) d.argv.push_back(std::move(a));
      d.netns = ctx.tb.netns_name(e->node);
      d.ready_file = state;
      d.wave = kWaveFabric;  // before any BGP session: the sessions see the delay from their start
      ctx.daemons.push_back(std::move(d));
    }
  }
  return {};
}

nlohmann::json delay_line_states(const RunLayout& layout, const Topology& t) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& l : t.links) {
    if (!l.impair.netem()) continue;
    for (const Endpoint* e : {&l.a, &l.b}) {
      const std::string& node = t.nodes.at(static_cast<size_t>(e->node)).name;
      std::string state = layout.node_dir("delay", node) + "/" + e->ifname + ".json";
      std::ifstream in(state);
      if (!in) continue;  // not a delay line's end (netem's, or another machine's)
      auto j = nlohmann::json::parse(in, nullptr, false);
      nlohmann::json x = j.is_object() && j.contains("links") && j["links"].is_array() && !j["links"].empty()
                             ? j["links"][0]
                             : nlohmann::json{{"error", "unreadable: " + state},
                                              {"configured_delay_us", l.impair.delay_us},
                                              {"configured_jitter_us", l.impair.jitter_us}};
      x["where"] = node + ":" + e->ifname;  // (lanes-delay knows only its device)
      x["link"] = t.nodes.at(static_cast<size_t>(l.a.node)).name + " " + t.nodes.at(static_cast<size_t>(l.b.node)).name;
      x["engine"] = "lanes-delay";
      out.push_back(std::move(x));
    }
  }
  return out;
}

struct DelayLine::Link {
  DelayLinkStats st;
  std::string ifname;
  int ns_fd = -1;  // the namespace's, duplicated
  int index = 0, tap_a = 0;
  Fd rx, tx;
  delay_tap_bpf* skel = nullptr;
  std::unique_ptr<DelaySchedule> schedule;
  ReleaseQueue<Packet> queue;
  uint64_t next_seq = 0, highest_sent = 0, queued_bytes = 0;
  int64_t last_arrival_ns = 0;
  double held_sum_us = 0;
  bool sent_any = false;
  std::vector<double> held, late;  // rings of kSamples
  mutable uint64_t tap_drops = 0;
  size_t sample = 0;
  ~Link() {
    if (skel) delay_tap_bpf__destroy(skel);
  }
};

DelayLine::DelayLine(uint64_t seed) : seed_(seed) {}

DelayLine::~DelayLine() {
  if (loop_) {
    for (auto& l : links_)
      if (l->rx) loop_->unwatch(l->rx.get());
    if (timer_ >= 0) loop_->unwatch(timer_);
  }
  if (timer_ >= 0) ::close(timer_);
  // the programs off the devices and the taps gone, each from inside its namespace
  for (auto& l : links_) {
    Link* p = l.get();
    (void)run_in_netns(
        p->ns_fd,
        [p]() -> Status {
          LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = p->index, .attach_point = BPF_TC_EGRESS);
          LIBBPF_OPTS(bpf_tc_opts, opts, .handle = kHandle, .priority = kPriority);
          {
            QuietLibbpf quiet;
            (void)bpf_tc_detach(&hook, &opts);
          }
          p->rx.reset();
          p->tx.reset();
          if (auto nl = Netlink::open_here(p->st.where)) (void)nl.value().delete_link(delay_tap_name(p->index, 'a'));
          return {};
        },
        "removing the delay of " + p->st.where);
    ::close(p->ns_fd);
  }
}

Status DelayLine::add(int ns_fd, const std::string& where, const std::string& ifname, const Impairment& imp) {
  libbpf_to_log();
  std::vector<int16_t> table;
  if (!imp.distribution.empty()) {
    auto t = netem_distribution(imp.distribution);
    if (!t) return t.error();
    table = std::move(t.value());
  }
  auto l = std::make_unique<Link>();
  l->st.where = where;
  l->st.configured = imp;
  l->ifname = ifname;
  l->schedule = std::make_unique<DelaySchedule>(imp, std::move(table), seed_ + links_.size() * 0x9E3779B97F4A7C15ull);
  l->ns_fd = ::fcntl(ns_fd, F_DUPFD_CLOEXEC, 0);
  if (l->ns_fd < 0) return errno_error("the namespace of " + where);
  Link* p = l.get();
  auto made = run_in_netns(
      ns_fd,
      [&]() -> Status {
        auto nl = Netlink::open_here(where);
        if (!nl) return nl.error();
        auto idx = nl.value().ifindex(ifname);
        if (!idx) return idx.error();
        p->index = idx.value();
        std::string a = delay_tap_name(p->index, 'a'), b = delay_tap_name(p->index, 'b');
        if (auto old = nl.value().link(a); old && old.value()) (void)nl.value().delete_link(a);  // a killed one's
        if (auto v = nl.value().create_veth(a, 0, b, 0, -1, where, false); !v) return v;
        auto ia = nl.value().ifindex(a), ib = nl.value().ifindex(b);
        if (!ia) return ia.error();
        if (!ib) return ib.error();
        p->tap_a = ia.value();
        // no IPv6 of their own: nothing but the device's packets on the tap
        for (const auto& n : {a, b})
          if (auto sc = write_sysctl({"net.ipv6.conf." + n + ".disable_ipv6", "1"}); !sc) return sc;
        // the tap carries what the device does: its MTU
        if (auto dev = nl.value().link(ifname); dev && dev.value() && dev.value()->mtu > 0) {
          Fd s(::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
          if (!s) s.reset(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
          for (const auto& n : {a, b}) {
            ifreq r{};
            std::snprintf(r.ifr_name, IFNAMSIZ, "%s", n.c_str());
            r.ifr_mtu = static_cast<int>(dev.value()->mtu);
            if (s && ::ioctl(s.get(), SIOCSIFMTU, &r)) return errno_error("the MTU of the delay tap " + n);
          }
        }
        if (auto up = nl.value().set_link_up(ia.value(), true, a); !up) return up;
        if (auto up = nl.value().set_link_up(ib.value(), true, b); !up) return up;
        auto rx = packet_socket(ib.value(), htons(ETH_P_ALL), false, where + "'s tap");
        if (!rx) return rx.error();
        p->rx.reset(rx.value());
        auto tx = packet_socket(p->index, 0, true, where);
        if (!tx) return tx.error();
        p->tx.reset(tx.value());
        // the program last: from now on the device's packets go through the tap
        p->skel = delay_tap_bpf__open();
        if (!p->skel) return errno_error("opening the delay line's BPF program");
        p->skel->rodata->tap_ifindex = static_cast<uint32_t>(p->tap_a);
        if (int err = delay_tap_bpf__load(p->skel); err)
          return os_error(-err, "loading the delay line's BPF program (it needs root or CAP_BPF)");
        LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = p->index, .attach_point = BPF_TC_EGRESS);
        LIBBPF_OPTS(bpf_tc_opts, opts, .prog_fd = bpf_program__fd(p->skel->progs.lanes_delay_tap),
                    .flags = BPF_TC_F_REPLACE, .handle = kHandle, .priority = kPriority);
        int err;
        {
          QuietLibbpf quiet;
          err = bpf_tc_hook_create(&hook);
        }
        if (err && err != -EEXIST) return os_error(-err, "creating the clsact hook on " + ifname);
        if ((err = bpf_tc_attach(&hook, &opts))) return os_error(-err, "attaching the delay line to " + ifname);
        return {};
      },
      "delaying " + where);
  if (!made) {
    // nothing half-made: the tap (and with it the sockets' device) goes
    (void)run_in_netns(
        ns_fd,
        [&]() -> Status {
          p->rx.reset();
          p->tx.reset();
          if (p->skel) {  // (its filter, or a killed predecessor's, off the device)
            delay_tap_bpf__destroy(p->skel);
            p->skel = nullptr;
          }
          (void)clear_delay_tap(where, ifname);
          return {};
        },
        "undoing the delay of " + where);
    ::close(p->ns_fd);
    p->ns_fd = -1;
    return made;
  }
  links_.push_back(std::move(l));
  if (loop_) {
    Link* lp = links_.back().get();
    if (auto w = loop_->watch(lp->rx.get(), EPOLLIN, [this, lp](uint32_t) { on_packets(*lp); }); !w) return w;
  }
  return {};
}

Status DelayLine::attach(EventLoop& loop) {
  if (loop_) return {};
  // timers to the microsecond: a packet is held to the time drawn for it
  ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  timer_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (timer_ < 0) return errno_error("the delay line's timer");
  loop_ = &loop;
  if (auto w = loop.watch(timer_, EPOLLIN, [this](uint32_t) { on_timer(); }); !w) return w;
  for (auto& l : links_) {
    Link* lp = l.get();
    if (auto w = loop.watch(lp->rx.get(), EPOLLIN, [this, lp](uint32_t) { on_packets(*lp); }); !w) return w;
  }
  return {};
}

ssize_t recv_stamped(int fd, void* buf, size_t len, int flags, int64_t& stamp_ns) {
  iovec iov{buf, len};
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(timespec))];
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = ctl;
  mh.msg_controllen = sizeof ctl;
  ssize_t got = ::recvmsg(fd, &mh, flags);
  stamp_ns = -1;
  if (got < 0) return got;
  for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
      timespec ts{};
      std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
      stamp_ns = int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
    }
  return got;
}

void DelayLine::on_packets(Link& l) {
  static thread_local std::vector<uint8_t> buf(kFrame);
  // the kernel's stamps are on the real-time clock: the monotonic one is
  // that minus their difference now
  int64_t mono_minus_real = now_ns() - real_ns();
  for (int n = 0; n < 256; ++n) {
    int64_t stamped = -1;
    ssize_t got = recv_stamped(l.rx.get(), buf.data(), buf.size(), MSG_TRUNC, stamped);
    if (got < 0) {
      if (errno == EAGAIN || errno == EINTR) break;
      ++l.st.rx_errors;  // (the packet is gone: a GSO type the virtio-net header cannot say)
      continue;
    }
    if (stamped >= 0) stamped += mono_minus_real;
    int64_t t = DelaySchedule::arrival_ns(stamped, now_ns(), l.last_arrival_ns);
    if (static_cast<size_t>(got) > buf.size()) {  // larger than a GSO packet can be: not one of the device's
      log::warn("delay line {}: a {}-byte packet on the tap, dropped", l.st.where, got);
      continue;
    }
    if (l.queued_bytes + static_cast<uint64_t>(got) > kQueueBytes) {  // the delay line's own limit
      ++l.st.queue_drops;
      continue;
    }
    Packet p;
    p.bytes.assign(buf.begin(), buf.begin() + got);
    l.queued_bytes += static_cast<uint64_t>(got);
    p.arrival_ns = t;
    l.last_arrival_ns = t;
    p.release_ns = l.schedule->release_ns(t);
    p.seq = l.next_seq++;
    l.queue.push(p.release_ns, std::move(p));
  }
  arm();
}

void DelayLine::on_timer() {
  uint64_t ticks = 0;
  (void)::read(timer_, &ticks, sizeof ticks);
  armed_ns_ = -1;
  // the timer fired early (kEarlyNs): the rest waited out on the clock
  int64_t first = -1;
  for (const auto& l : links_)
    if (!l->queue.empty() && (first < 0 || l->queue.next_ns() < first)) first = l->queue.next_ns();
  int64_t t = now_ns();
  if (first > t && first - t <= kEarlyNs)
    while ((t = now_ns()) < first) {
    }
  for (auto& lp : links_) {
    Link& l = *lp;
    for (auto& p : l.queue.pop_due(t)) {
      l.queued_bytes -= p.bytes.size();
      int64_t sent = now_ns();
      ssize_t w = ::send(l.tx.get(), p.bytes.data(), p.bytes.size(), 0);
      if (w < 0) {
        // ENOBUFS: the device's queue (its TBF) is full, EAGAIN: the socket's buffer; anything else is an error
        ++(errno == ENOBUFS || errno == EAGAIN ? l.st.send_drops : l.st.send_errors);
        continue;
      }
      ++l.st.packets;
      l.st.bytes += p.bytes.size() > 10 ? p.bytes.size() - 10 : 0;
      if (l.sent_any && p.seq < l.highest_sent) ++l.st.reordered;
      l.highest_sent = std::max(l.highest_sent, p.seq);
      l.sent_any = true;
      double held = static_cast<double>(sent - p.arrival_ns) / 1e3, late = static_cast<double>(sent - p.release_ns) / 1e3;
      if (l.held.size() < kSamples) {
        l.held.push_back(held);
        l.late.push_back(late);
      } else {
        l.held[l.sample] = held;
        l.late[l.sample] = late;
        l.sample = (l.sample + 1) % kSamples;
      }
      l.st.held_max_us = std::max(l.st.held_max_us, held);
      l.st.held_min_us = l.st.packets == 1 ? held : std::min(l.st.held_min_us, held);
      l.held_sum_us += held;
      l.st.late_max_us = std::max(l.st.late_max_us, late);
    }
  }
  arm();
}

// the timer at the earliest release of every link's queue
void DelayLine::arm() {
  int64_t next = -1;
  for (const auto& l : links_)
    if (!l->queue.empty() && (next < 0 || l->queue.next_ns() < next)) next = l->queue.next_ns();
  if (next < 0) return;
  next = std::max<int64_t>(next - kEarlyNs, 1);
  if (next == armed_ns_) return;
  itimerspec its{};
  its.it_value.tv_sec = next / 1'000'000'000;
  its.it_value.tv_nsec = next % 1'000'000'000;
  if (::timerfd_settime(timer_, TFD_TIMER_ABSTIME, &its, nullptr) == 0) armed_ns_ = next;
}

std::vector<DelayLinkStats> DelayLine::stats(bool percentiles) const {
  std::vector<DelayLinkStats> out;
  for (const auto& l : links_) {
    DelayLinkStats s = l->st;
    tpacket_stats ps{};
    socklen_t len = sizeof ps;
    if (l->rx && ::getsockopt(l->rx.get(), SOL_PACKET, PACKET_STATISTICS, &ps, &len) == 0) {
      l->tap_drops += ps.tp_drops;  // (the kernel resets them as it reports them)
    }
    s.tap_drops = l->tap_drops;
    s.held_mean_us = s.packets ? l->held_sum_us / static_cast<double>(s.packets) : 0;
    if (percentiles) {
      s.held_p50_us = percentile(l->held, 0.5);
      s.held_p99_us = percentile(l->held, 0.99);
      s.late_p50_us = percentile(l->late, 0.5);
      s.late_p99_us = percentile(l->late, 0.99);
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace lanes::testbed
