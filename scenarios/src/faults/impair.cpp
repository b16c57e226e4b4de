#include <fmt/format.h>
#include <net/if.h>

#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "faults.hpp"
#include "lanes/core/impair.hpp"
#include "lanes/core/netns.hpp"

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
  static const Attrs set = {{"host", Kind::host, true},
                            {"nic", Kind::nic, true},
                            {"direction", Kind::choice, false, "both|tx|rx"},
                            {"loss", Kind::percent},
                            {"duplicate", Kind::percent},
                            {"delay", Kind::netem},
                            {"jitter", Kind::netem},
                            {"reorder", Kind::netem},
                            {"corrupt", Kind::netem},
                            {"mark", Kind::name}};
  static const Attrs clear = {{"host", Kind::host, true},
                              {"nic", Kind::nic, true},
                              {"direction", Kind::choice, false, "both|tx|rx"},
                              {"mark", Kind::name}};
  return set_ ? set : clear;
}

// The host's NIC is the link's side B, the switch port side A (as for
// silent-drop). tx: what the host sends (the NIC's egress), rx: what it
// receives (the port's egress). Each side's program is loaded and attached
// from inside its namespace; it stays when this returns.
void Impair::apply(const Step& st, const std::string& label, StepContext& ctx) const {
  const auto& topo = ctx.topo();
  std::string host = st.str("host");
  int nic = st.integer("nic");
  std::string dir = st.has("direction") ? st.str("direction") : "both";
  const auto& h = topo.nodes.at(static_cast<size_t>(topo.find_node(host)));
  const auto& l = topo.links.at(static_cast<size_t>(h.nics.at(static_cast<size_t>(nic)).link));
  testbed::Impairment imp;
  if (set_) {
    std::map<std::string, std::string> a;
    for (const char* k : {"loss", "duplicate"})
      if (st.has(k)) a[k] = st.str(k);
    auto p = testbed::parse_impairment(a);  // the loader checked the values
    if (!p) throw std::runtime_error(fmt::format("fault {}: {}", type(), p.error().what()));
    imp = p.value();
  }
  std::vector<std::pair<const testbed::Endpoint*, const char*>> sides;
  if (dir != "rx") sides.emplace_back(&l.b, "tx");
  if (dir != "tx") sides.emplace_back(&l.a, "rx");
  nlohmann::json measured = nlohmann::json::object();
  std::string said;
  for (auto [ep, what] : sides) {
    const std::string& node = topo.nodes.at(static_cast<size_t>(ep->node)).name;
    std::string key = node + ":" + ep->ifname;
    std::optional<testbed::DeviceImpairment> dev;
    auto st2 = testbed::run_in_netns(
        ctx.node_ns(node),
        [&]() -> testbed::Status {
          int idx = static_cast<int>(::if_nametoindex(ep->ifname.c_str()));
          if (idx == 0) return testbed::errno_error(node + " has no device " + ep->ifname);
          if (!set_) return testbed::DeviceImpairment::clear(idx, ep->ifname);
          auto d = testbed::DeviceImpairment::attach(idx, ep->ifname, imp);
          if (!d) return d.error();
          dev.emplace(std::move(d.value()));
          return {};
        },
        fmt::format("{} on {}:{}", type(), node, ep->ifname));
    if (!st2) throw std::runtime_error(st2.error().what());
    std::lock_guard lk(held().m);
    auto& by = held().by_device;
    if (dev) {
      by.insert_or_assign(key, std::move(*dev));
    } else if (auto it = by.find(key); it != by.end()) {  // what it did while it was there
      if (auto c = it->second.stats()) {
        const auto& v = c.value();
        double pct = v.packets ? 100.0 * static_cast<double>(v.lost) / static_cast<double>(v.packets) : 0;
        measured[what] = {{"packets", v.packets}, {"lost", v.lost}, {"duplicated", v.duplicated}, {"lost_pct", pct}};
        said += fmt::format("; {} {} packets, {} lost ({:.2f}%), {} sent twice", what, v.packets, v.lost, pct,
                            v.duplicated);
      }
      by.erase(it);
    }
  }
  ctx.mark(label, "fault");
  if (!measured.empty()) ctx.record_fault(label, {{"impairment", measured}});
  ctx.say(set_ ? fmt::format("fault: {} nic{} impaired ({}), {}", host, nic, dir, imp.describe())
               : fmt::format("fault: {} nic{} impairment cleared ({}){}", host, nic, dir, said));
}

}  // namespace lanes::scenarios
