#include <fmt/format.h>
#include <net/if.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "faults.hpp"
#include "lanes/testbed/delay_line.hpp"
#include "lanes/testbed/impair.hpp"
#include "lanes/testbed/netlink.hpp"
#include "lanes/testbed/netns.hpp"

namespace lanes::scenarios {

namespace {
// the impairments set by this process, by "node:device": their counters
// are read when they are cleared
struct Held {
  std::mutex m;
  std::map<std::string, testbed::DeviceImpairment> by_device;
};
Held& held() {
  static Held h;
  return h;
}
}  // namespace

const char* Impair::type() const { return set_ ? "impair" : "clear-impair"; }

const Attrs& Impair::attrs() const {
  static const Attrs set = {{"host", Kind::host},
                            {"nic", Kind::nic},
                            {"switch", Kind::node},
                            {"port", Kind::text},
                            {"direction", Kind::choice, false, "both|tx|rx"},
                            {"loss", Kind::percent},
                            {"duplicate", Kind::percent},
                            {"delay", Kind::delay},
                            {"jitter", Kind::delay},
                            {"distribution", Kind::choice, false, "uniform|normal|pareto|paretonormal"},
                            {"reorder", Kind::percent},
                            {"corrupt", Kind::percent},
                            {"mark", Kind::name}};
  static const Attrs clear = {{"host", Kind::host},
                              {"nic", Kind::nic},
                              {"switch", Kind::node},
                              {"port", Kind::text},
                              {"direction", Kind::choice, false, "both|tx|rx"},
                              {"mark", Kind::name}};
  return set_ ? set : clear;
}

namespace {

// The link a step names, and which of its ends is the named side: a host's
// NIC (side B; the switch port is side A) or a switch's port (either side).
struct Target {
  const testbed::Link* link = nullptr;
  const testbed::Endpoint* named = nullptr;  // tx: its egress
  const testbed::Endpoint* other = nullptr;  // rx: its egress
  std::string what;                          // "h1 nic2", "r1-tor swp9"
};

std::optional<Target> target_of(const Step& st, const testbed::Topology& topo) {
  if (st.has("host")) {
    int h = topo.find_node(st.str("host"));
    if (h < 0 || !st.has("nic")) return std::nullopt;
    const auto& node = topo.nodes.at(static_cast<size_t>(h));
    int nic = st.integer("nic");
    if (nic < 0 || static_cast<size_t>(nic) >= node.nics.size()) return std::nullopt;
    const auto& l = topo.links.at(static_cast<size_t>(node.nics.at(static_cast<size_t>(nic)).link));
    return Target{&l, &l.b, &l.a, fmt::format("{} nic{}", st.str("host"), nic)};
  }
  int sw = topo.find_node(st.str("switch"));
  if (sw < 0) return std::nullopt;
  for (const auto& l : topo.links) {
    if (l.a.node == sw && l.a.ifname == st.str("port")) return Target{&l, &l.a, &l.b, st.str("switch") + " " + st.str("port")};
    if (l.b.node == sw && l.b.ifname == st.str("port")) return Target{&l, &l.b, &l.a, st.str("switch") + " " + st.str("port")};
  }
  return std::nullopt;
}

}  // namespace

namespace {
// the step's impairment (its values were checked one by one at their line)
testbed::Result<testbed::Impairment> impairment_of(const Step& st) {
  std::map<std::string, std::string> a;
  for (const char* k : testbed::kImpairAttrs)
    if (st.has(k)) a[k] = st.str(k);
  return testbed::parse_impairment(a);
}
}  // namespace

std::string Impair::check(const Step& st, const testbed::Topology& topo) const {
  if (set_) {
    auto imp = impairment_of(st);
    if (!imp) return imp.error().what();
    if (!imp.value().any())
      return "fault impair names no impairment: give loss, duplicate, delay (with jitter, distribution, reorder) or "
             "corrupt";
  }
  bool nic = st.has("host") || st.has("nic"), port = st.has("switch") || st.has("port");
  if (nic == port || (nic && !(st.has("host") && st.has("nic"))) || (port && !(st.has("switch") && st.has("port"))))
    return fmt::format("fault {} takes host=\"...\" nic=\"...\" (a host's NIC) or switch=\"...\" port=\"...\" (a "
                       "switch's port: to a host, a server or a spine)",
                       type());
  if (port) {
    const auto& n = topo.nodes.at(static_cast<size_t>(topo.find_node(st.str("switch"))));
    if (n.kind != testbed::NodeKind::rack_switch && n.kind != testbed::NodeKind::spine)
      return fmt::format("switch=\"{}\": expected a rack switch or a spine", st.str("switch"));
    if (!target_of(st, topo)) {
      std::string ports;
      for (const auto& l : topo.links)
        for (const auto* e : {&l.a, &l.b})
          if (topo.nodes.at(static_cast<size_t>(e->node)).name == st.str("switch"))
            ports += (ports.empty() ? "" : ", ") + e->ifname;
      return fmt::format("port=\"{}\": {} has no such port (its ports: {})", st.str("port"), st.str("switch"), ports);
    }
  }
  return "";
}

namespace {
// what the delay line of a side measured, from the state file lanes-delay left
nlohmann::json delay_measured(const std::string& state) {
  std::ifstream in(state);
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object() || j.value("links", nlohmann::json::array()).empty())
    return {{"error", "lanes-delay left no figures in " + state}};
  auto l = j["links"][0];
  l["engine"] = "lanes-delay";
  return l;
}
}  // namespace

// tx: what the named side sends (its egress), rx: what it receives (the
// other end's egress). Each side's program is loaded and attached from
// inside its namespace; it stays when this returns. Where the topology's
// delays are lanes' delay line's (no netem, or impair-engine="lanes"),
// delay, jitter and reorder are lanes-delay's (one process a
// side, in the side's namespace, until the impairment is cleared or
// replaced or the phase ends).
void Impair::apply(const Step& st, const std::string& label, StepContext& ctx) const {
  const auto& topo = ctx.topo();
  auto t = target_of(st, topo);
  if (!t) throw std::runtime_error(fmt::format("fault {}: no such link in this phase's topology", type()));
  std::string dir = st.has("direction") ? st.str("direction") : "both";
  testbed::Impairment imp;
  if (set_) {
    auto p = impairment_of(st);  // the loader checked it
    if (!p) throw std::runtime_error(fmt::format("fault {}: {}", type(), p.error().what()));
    imp = p.value();
  }
  // delay, jitter and reorder by lanes' own delay line: where the kernel has
  // no netem, or where the topology asks for it (impair-engine)
  const bool by_lanes = testbed::delay_by_lanes(topo);
  std::vector<std::pair<const testbed::Endpoint*, const char*>> sides;
  if (dir != "rx") sides.emplace_back(t->named, "tx");
  if (dir != "tx") sides.emplace_back(t->other, "rx");
  nlohmann::json measured = nlohmann::json::object();
  std::string said;
  for (auto [ep, what] : sides) {
    const std::string& node = topo.nodes.at(static_cast<size_t>(ep->node)).name;
    std::string key = node + ":" + ep->ifname;
    std::optional<testbed::DeviceImpairment> dev;
    // the delay line before: ended (its figures kept); what it left, if it was killed, goes below
    std::string helper = "delay " + key, state = ctx.out_base(fmt::format("delay-{}-{}", node, ep->ifname)) + ".json";
    if (by_lanes && ctx.stop_helper(helper)) measured[what]["delay"] = delay_measured(state);
    auto st2 = testbed::run_in_netns(
        ctx.node_ns(node),
        [&]() -> testbed::Status {
          int idx = static_cast<int>(::if_nametoindex(ep->ifname.c_str()));
          if (idx == 0) return testbed::errno_error(node + " has no device " + ep->ifname);
          auto nl = testbed::Netlink::open_here(node);
          if (!nl) return nl.error();
          // what the step does not set goes: an impair replaces the one before it
          if (!imp.netem() && !by_lanes)
            if (auto c = testbed::clear_netem(nl.value(), idx, ep->ifname); !c) return c;
          if (by_lanes)
            if (auto c = testbed::clear_delay_tap(node, ep->ifname); !c) return c;
          if (!imp.bpf()) {
            if (auto c = testbed::DeviceImpairment::clear(idx, ep->ifname); !c) return c;
          } else {
            auto d = testbed::DeviceImpairment::attach(idx, ep->ifname, imp);
            if (!d) return d.error();
            dev.emplace(std::move(d.value()));
          }
          if (imp.netem() && !by_lanes) return testbed::set_netem(nl.value(), idx, ep->ifname, imp);
          return {};
        },
        fmt::format("{} on {}:{}", type(), node, ep->ifname));
    if (!st2) throw std::runtime_error(st2.error().what());
    // the delay line: its draws its own (a seed per side)
    if (by_lanes && imp.netem()) {
      uint64_t seed = ctx.seed() ^ std::hash<std::string>{}(key);
      std::vector<std::string> args = {"--state", state, "--seed", std::to_string(seed), ep->ifname};
      for (const char* k : testbed::kNetemOnly)
        if (st.has(k)) args.push_back(std::string(k) + "=" + st.str(k));
      std::error_code ec;
      std::filesystem::remove(state, ec);
      ctx.start_helper(helper, "lanes-delay", ctx.node_ns(node), args, state + ".log");
      auto ready = [&] {
        std::ifstream in(state);
        auto j = nlohmann::json::parse(in, nullptr, false);
        return j.is_object() && j.value("ready", false);
      };
      if (!ctx.eventually(ready, std::chrono::milliseconds(10'000), std::chrono::milliseconds(20))) {
        std::ifstream log(state + ".log");
        std::string why((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
        (void)ctx.stop_helper(helper);
        throw std::runtime_error(fmt::format("fault {}: lanes-delay on {}:{} did not start: {}", type(), node,
                                             ep->ifname, why.empty() ? "it said nothing" : why));
      }
    }
    std::lock_guard lk(held().m);
    auto& by = held().by_device;
    if (dev) {
      by.insert_or_assign(key, std::move(*dev));
    } else if (auto it = by.find(key); it != by.end()) {  // what it did while it was there
      if (auto c = it->second.stats()) {
        const auto& v = c.value();
        double pct = v.packets ? 100.0 * static_cast<double>(v.lost) / static_cast<double>(v.packets) : 0;
        auto kept = measured.contains(what) ? measured[what].value("delay", nlohmann::json()) : nlohmann::json();
        measured[what] = {{"packets", v.packets},       {"lost", v.lost},         {"duplicated", v.duplicated},
                          {"corrupted", v.corrupted}, {"lost_pct", pct}};
        if (!kept.is_null()) measured[what]["delay"] = kept;
        said += fmt::format("; {} {} packets, {} lost ({:.2f}%), {} sent twice, {} corrupted", what, v.packets, v.lost,
                            pct, v.duplicated, v.corrupted);
      } else {  // a side whose counters could not be read is recorded so: no assertion passes on the other alone
        measured[what]["error"] = c.error().what();
        said += fmt::format("; {} counters unread: {}", what, c.error().what());
      }
      by.erase(it);
    }
    if (measured.contains(what) && measured[what].contains("delay")) {
      const auto& d = measured[what]["delay"];
      if (d.contains("error"))
        said += fmt::format("; {} delay figures unread: {}", what, d.value("error", std::string()));
      else
        said += fmt::format("; {} delayed {} packets: held p50 {:.0f} us, p99 {:.0f} us (configured {} us), late p99 "
                            "{:.0f} us",
                            what, d.value("packets", uint64_t{0}), d.value("held_p50_us", 0.0),
                            d.value("held_p99_us", 0.0), d.value("configured_delay_us", 0u), d.value("late_p99_us", 0.0));
    }
  }
  ctx.mark(label, "fault");
  if (!measured.empty()) ctx.record_fault(label, {{"impairment", measured}});
  ctx.say(set_ ? fmt::format("fault: {} impaired ({}), {}{}", t->what, dir, imp.describe(),
                             imp.netem() && by_lanes ? " (the delay by lanes-delay)" : "")
               : fmt::format("fault: {} impairment cleared ({}){}", t->what, dir, said));
}

}  // namespace lanes::scenarios
