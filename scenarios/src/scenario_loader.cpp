#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <functional>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <pugixml.hpp>
#include <set>
#include <sstream>

#include "lanes/testbed/impair.hpp"
#include "lanes/testbed/input_file.hpp"
#include "lanes/testbed/topology_loader.hpp"
#include "lanes/scenarios/live_assertion.hpp"
#include "lanes/scenarios/result_assertion.hpp"
#include "lanes/scenarios/scenario.hpp"
#include "lanes/scenarios/workload.hpp"

namespace lanes::scenarios {

using testbed::InputError;
using testbed::NodeKind;
using testbed::Topology;

namespace {

// ATTRS and every attribute a scenario may override the topology's with
std::set<std::string> with_overrides(std::set<std::string> attrs) {
  for (const auto& a : testbed::override_attrs()) attrs.insert(a.name);
  return attrs;
}

// element -> type -> attributes ("" = the element has no type attribute);
// the typed elements' types are plug-ins (below)
const std::map<std::string, std::map<std::string, Attrs>>& base_schema() {
  static const std::map<std::string, std::map<std::string, Attrs>> s = {
      {"converge", {{"", {{"timeout", Kind::duration}, {"mark", Kind::name}}}}},
      {"sleep", {{"", {{"duration", Kind::duration, true}, {"mark", Kind::name}}}}},
      {"mark", {{"", {{"name", Kind::name, true}}}}},
      {"stop", {{"", {{"workload", Kind::workload, true}, {"mark", Kind::name}}}}},
      {"wait",
       {{"", {{"workload", Kind::workload}, {"condition", Kind::choice, false, "members"}, {"host", Kind::host},
              {"rack", Kind::rack}, {"count", Kind::integer}, {"timeout", Kind::duration}, {"mark", Kind::name},
              {"family", Kind::choice, false, "ipv4|ipv6"}}}}},
      {"workload", {}},  // plug-ins (workload.hpp)
      {"fault", {}},
      {"assert", {}},
  };
  return s;
}

// The schema: the table above, and every plug-in's own declaration.
const std::map<std::string, std::map<std::string, Attrs>>& schema() {
  static const std::map<std::string, std::map<std::string, Attrs>> s = [] {
    auto all = base_schema();
    for (const auto* p : live_assertions()) all["assert"][p->type()] = p->attrs();
    for (const auto* p : result_assertions()) all["assert"][p->type()] = p->attrs();
    for (const auto* p : workloads()) all["workload"][p->type()] = p->attrs();
    for (const auto* p : faults()) all["fault"][p->type()] = p->attrs();
    return all;
  }();
  return s;
}


std::string read_text(const std::string& path, const std::string& what = "scenario file") {
  return testbed::read_input_file(path, what);
}

// PATH as one spelling, so that a cycle is found however its includes are written.
std::string same_file_key(const std::string& path) {
  std::error_code ec;
  auto c = std::filesystem::weakly_canonical(path, ec);
  return ec ? std::filesystem::path(path).lexically_normal().string() : c.string();
}

class Loader {
 public:
  // CHAIN: the files that include this one, outermost first (for cycles).
  // SET: overrides over every phase's own (lanes run --set).
  Loader(std::string text, std::string file, Overrides set, std::vector<std::string> chain = {})
      : text_(std::move(text)), file_(std::move(file)), set_(std::move(set)), chain_(std::move(chain)) {
    chain_.push_back(same_file_key(file_));
    for (size_t i = 0; i < text_.size(); ++i)
      if (text_[i] == '\n') newlines_.push_back(static_cast<ptrdiff_t>(i));
  }

  std::vector<Scenario> load() {
    pugi::xml_document doc;
    auto res = doc.load_buffer(text_.data(), text_.size(), pugi::parse_default | pugi::parse_ws_pcdata_single);
    if (!res) throw InputError({fmt::format("{}:{}: not well-formed XML: {}", file_, line_of(res.offset),
                                            res.description())});
    for (auto& p : testbed::xml_shape_problems(doc, text_, file_)) problems_.push_back(std::move(p));
    auto root = doc.document_element();
    std::vector<Scenario> out;
    if (std::string(root.name()) == "suite") {
      check_only(root, {"name", "description"});
      for (auto c : root.children()) {
        if (c.type() != pugi::node_element) continue;
        if (std::string(c.name()) != "include") {
          problem(c, "<{}> is not allowed in a suite (only <include file=\"...\"/>)", c.name());
          continue;
        }
        check_only(c, {"file"});
        std::string f = c.attribute("file").value();
        if (f.empty()) {
          problem(c, "<include> needs file=\"...\"");
          continue;
        }
        std::string path = relative(f);
        std::string key = same_file_key(path);
        if (std::find(chain_.begin(), chain_.end(), key) != chain_.end()) {
          std::string cycle;
          for (auto it = std::find(chain_.begin(), chain_.end(), key); it != chain_.end(); ++it)
            cycle += std::filesystem::path(*it).filename().string() + " -> ";
          problem(c, "<include file=\"{}\">: an include cycle ({}{})", f, cycle,
                  std::filesystem::path(key).filename().string());
          continue;
        }
        std::string text;
        try {
          text = read_text(path, "scenario or suite file");
        } catch (const InputError& e) {
          // where the user wrote the include
          problem(c, "<include file=\"{}\">: {}", f, e.problems().empty() ? e.what() : e.problems()[0]);
          continue;
        }
        try {
          for (auto& s : Loader(std::move(text), path, set_, chain_).load()) out.push_back(std::move(s));
        } catch (const InputError& e) {
          problem(c, "<include file=\"{}\">: the included file has {} problem{} (below)", f, e.problems().size(),
                  e.problems().size() == 1 ? "" : "s");
          for (const auto& p : e.problems()) problems_.push_back(p);
        }
      }
      if (out.empty() && problems_.empty()) problem(root, "the suite includes no scenario");
    } else if (std::string(root.name()) == "scenario") {
      out.push_back(scenario(root));
    } else {
      problem(root, "expected <scenario> or <suite>, found <{}>", root.name());
    }
    if (!problems_.empty()) throw InputError(problems_);
    return out;
  }

 private:
  int line_of(ptrdiff_t off) const {
    return static_cast<int>(std::upper_bound(newlines_.begin(), newlines_.end(), off - 1) - newlines_.begin()) + 1;
  }
  int line_of(const pugi::xml_node& n) const { return line_of(n.offset_debug()); }

  template <typename... Args>
  void problem(const pugi::xml_node& n, fmt::format_string<Args...> f, Args&&... args) {
    problems_.push_back(fmt::format("{}:{}: {}", file_, line_of(n), fmt::format(f, std::forward<Args>(args)...)));
  }

  std::string relative(const std::string& f) const {
    std::filesystem::path p(f);
    if (p.is_absolute()) return p.string();
    return (std::filesystem::path(file_).parent_path() / p).lexically_normal().string();
  }

  void check_only(const pugi::xml_node& n, std::set<std::string> allowed) {
    for (auto a : n.attributes())
      if (!allowed.count(a.name())) {
        std::string list;
        for (const auto& x : allowed) list += (list.empty() ? "" : ", ") + x;
        problem(n, "<{}> has no attribute '{}' (it takes: {})", n.name(), a.name(), list.empty() ? "none" : list);
      }
  }

  // The overrides N gives (testbed::override_attrs), over BASE's.
  Overrides overrides_of(const pugi::xml_node& n, Overrides base) {
    for (const auto& a : testbed::override_attrs()) {
      auto v = n.attribute(a.name);
      if (!v) continue;
      std::string s = v.value();
      if (auto why = testbed::override_problem(a, s); !why.empty())
        problem(n, "{}=\"{}\": {}", a.name, s, why);
      else
        base[a.name] = s;
    }
    return base;
  }

  Scenario scenario(const pugi::xml_node& root) {
    Scenario sc;
    sc.file = file_;
    check_only(root, {"name", "description", "tcp-congestion"});
    sc.name = root.attribute("name").value();
    sc.description = root.attribute("description").value();
    if (sc.name.empty()) problem(root, "<scenario> needs name=\"...\"");
    if (auto cc = root.attribute("tcp-congestion")) {
      std::string v = cc.value();
      bool ok = !v.empty() && v.size() < 16;  // TCP_CA_NAME_MAX
      for (char c : v) ok = ok && (std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_');
      if (!ok)
        problem(root, "tcp-congestion=\"{}\" is not a congestion control's name (cubic, reno, bbr, dctcp, ...)", v);
      else
        sc.tcp_congestion = v;
    }
    auto topo_el = root.child("topology");
    Overrides base;
    std::optional<Topology> base_topo;
    if (!topo_el) {
      problem(root, "<scenario> needs a <topology file=\"...\"/>");
    } else {
      check_only(topo_el, with_overrides({"file"}));
      std::string f = topo_el.attribute("file").value();
      if (f.empty()) {
        problem(topo_el, "<topology> needs file=\"...\" (a topology file, relative to this scenario)");
      } else {
        sc.topology_file = relative(f);
        bool readable = false;
        try {
          sc.topology_text = read_text(sc.topology_file, "topology file");
          readable = true;
        } catch (const InputError& e) {
          problem(topo_el, "<topology file=\"{}\">: {}", f, e.problems().empty() ? e.what() : e.problems()[0]);
        }
        if (readable) {
          try {
            base_topo = testbed::load_topology_text(sc.topology_text, sc.topology_file);
          } catch (const InputError& e) {
            problem(topo_el, "<topology file=\"{}\">: the topology has {} problem{} (below)", f,
                    e.problems().size(), e.problems().size() == 1 ? "" : "s");
            for (const auto& p : e.problems()) problems_.push_back(p);
          }
        }
      }
      base = overrides_of(topo_el, {});
    }
    std::set<std::string> phase_names;
    std::map<std::string, std::set<std::string>> workloads_of;  // phase -> workloads
    std::set<std::string> marks_all;
    for (auto c : root.children()) {
      if (c.type() != pugi::node_element) continue;
      std::string e = c.name();
      if (e == "topology") continue;
      if (e == "phase") {
        Phase ph;
        ph.line = line_of(c);
        check_only(c, with_overrides({"name"}));
        ph.name = c.attribute("name").value();
        if (ph.name.empty()) problem(c, "<phase> needs name=\"...\"");
        if (!phase_names.insert(ph.name).second) problem(c, "a phase named '{}' exists already", ph.name);
        ph.overrides = overrides_of(c, base);
        for (const auto& [k, v] : set_) ph.overrides[k] = v;
        if (base_topo) {
          try {
            std::string where = ph.overrides.empty() ? sc.topology_file
                                                     : fmt::format("{} (as changed at {}:{}{})", sc.topology_file,
                                                                   file_, ph.line, set_.empty() ? "" : " and by --set");
            ph.topology = testbed::load_topology_text(sc.topology_text, where, ph.overrides);
          } catch (const InputError& err) {
            for (const auto& p : err.problems()) problems_.push_back(p);
            base_topo.reset();
          }
        }
        std::set<std::string> workloads, marks = {"start"};
        open_ended_.clear();
        for (auto s : c.children()) {
          if (s.type() != pugi::node_element) continue;
          auto st = step(s, base_topo ? &ph.topology : nullptr, ph.name, workloads, marks, true, workloads_of,
                         phase_names);
          if (st) ph.steps.push_back(*st);
        }
        workloads_of.emplace(ph.name, workloads);  // a duplicate phase name is reported already
        for (const auto& m : marks) marks_all.insert(m);
        sc.phases.push_back(std::move(ph));
        continue;
      }
      if (e == "assert") {
        std::set<std::string> none, marks;
        auto st = step(c, nullptr, "", none, marks, false, workloads_of, phase_names);
        if (st) sc.assertions.push_back(*st);
        continue;
      }
      problem(c, "<{}> is not allowed here (a scenario holds <topology>, <phase> and <assert>)", e);
    }
    if (sc.phases.empty()) problem(root, "<scenario> needs at least one <phase>");
    return sc;
  }

  std::optional<Step> step(const pugi::xml_node& n, const Topology* topo, const std::string& phase,
                           std::set<std::string>& workloads, std::set<std::string>& marks, bool in_phase,
                           const std::map<std::string, std::set<std::string>>& workloads_of,
                           const std::set<std::string>& phases) {
    Step st;
    st.element = n.name();
    st.line = line_of(n);
    auto el = schema().find(st.element);
    if (el == schema().end()) {
      problem(n, "<{}> is not a step (steps: converge, workload, sleep, fault, wait, stop, mark, assert)",
              st.element);
      return std::nullopt;
    }
    const Attrs* attrs = nullptr;
    if (el->second.count("")) {
      attrs = &el->second.at("");
    } else {
      st.type = n.attribute("type").value();
      auto t = el->second.find(st.type);
      if (t == el->second.end()) {
        std::string list;
        for (const auto& [k, v] : el->second) list += (list.empty() ? "" : ", ") + k;
        problem(n, "<{}> type=\"{}\": expected one of {}", st.element, st.type, list);
        return std::nullopt;
      }
      attrs = &t->second;
    }
    if (st.element == "assert" && !in_phase && find_live_assertion(st.type)) {
      problem(n, "assert type=\"{}\" looks at the running testbed, so it belongs inside a <phase>", st.type);
      return std::nullopt;
    }
    std::set<std::string> allowed;
    if (!st.type.empty()) allowed.insert("type");
    if (st.element == "workload") allowed.insert("name");
    for (const auto& a : *attrs) allowed.insert(a.name);
    check_only(n, allowed);
    if (st.element == "workload") {
      std::string name = n.attribute("name").value();
      if (name.empty()) problem(n, "<workload> needs name=\"...\"");
      else if (!workloads.insert(name).second) problem(n, "a workload named '{}' exists already in this phase", name);
      st.attrs["name"] = name;
    }
    bool ok = true;
    for (const auto& a : *attrs) {
      auto v = n.attribute(a.name);
      if (!v) {
        if (a.required) {
          problem(n, "<{}{}> needs {}=\"...\"", st.element, st.type.empty() ? "" : " type=\"" + st.type + "\"",
                  a.name);
          ok = false;
        }
        continue;
      }
      std::string s = v.value();
      if (!check_value(n, a, s, topo, phase, workloads, marks, workloads_of, phases, st)) ok = false;
      st.attrs[a.name] = a.kind == Kind::file ? relative(s) : s;
    }
    if (ok && st.has("min") && st.has("max")) {
      // numbers, or durations (blackout): compare what they mean
      auto value = [&](const std::string& k) {
        std::chrono::milliseconds d{};
        if (parse_duration(st.str(k), d)) return static_cast<double>(d.count());
        return std::stod(st.str(k));
      };
      if (value("min") > value("max")) {
        problem(n, "min=\"{}\" is above max=\"{}\": nothing could pass", st.str("min"), st.str("max"));
        ok = false;
      }
    }
    const Workload* workload = st.element == "workload" ? find_workload(st.type) : nullptr;
    if (workload && workload->open_ended()) open_ended_[st.str("name")] = st.type;
    if (st.element == "wait" && st.has("workload") && open_ended_.count(st.str("workload"))) {
      problem(n, "{} '{}' runs until <stop workload=\"{}\"/> or the end of the phase: it cannot be waited for",
              open_ended_[st.str("workload")], st.str("workload"), st.str("workload"));
      ok = false;
    }
    if (st.element == "wait" && st.has("workload") == (st.str("condition") == "members")) {
      problem(n, "<wait> takes either workload=\"...\" or condition=\"members\" host=\"...\" count=\"...\"");
      ok = false;
    }
    if (st.element == "wait" && st.str("condition") == "members" && (!(st.has("host") || st.has("rack")) || !st.has("count"))) {
      problem(n, "<wait condition=\"members\"> needs host=\"...\" (or rack=\"...\") and count=\"...\"");
      ok = false;
    }
    // a step on one job host or on every job host of a rack
    bool host_or_rack = std::any_of(attrs->begin(), attrs->end(), [](const Attr& x) { return x.kind == Kind::rack; });
    if (host_or_rack && st.has("host") && st.has("rack")) {
      problem(n, "<{}> takes host=\"...\" or rack=\"...\", not both", st.element);
      ok = false;
    } else if (host_or_rack && !st.has("host") && !st.has("rack") && st.element != "wait") {
      problem(n, "<{}{}> needs host=\"...\" or rack=\"...\"", st.element,
              st.type.empty() ? "" : " type=\"" + st.type + "\"");
      ok = false;
    }
    if (ok && st.element == "workload" && st.integer("repeat", 1) > 1 && !st.flag("wait", true)) {
      problem(n, "repeat=\"{}\" runs the workload to its end each time, so it cannot have wait=\"false\"",
              st.str("repeat"));
      ok = false;
    }
    if (ok && st.element == "workload" && st.has("repeat") && (st.integer("repeat") < 1 || st.integer("repeat") > 20)) {
      problem(n, "repeat=\"{}\": expected 1 to 20", st.str("repeat"));
      ok = false;
    }
    if (ok && workload && topo) {
      if (auto why = workload->check(st, *topo); !why.empty()) {
        problem(n, "{}", why);
        ok = false;
      }
    }
    if (ok && st.element == "fault" && topo)
      if (const Fault* fault = find_fault(st.type))
        if (auto why = fault->check(st, *topo); !why.empty()) {
          problem(n, "{}", why);
          ok = false;
        }
    if (st.element == "mark") marks.insert(st.str("name"));
    if (st.has("mark")) marks.insert(st.str("mark"));
    if (st.element == "workload") marks.insert(st.str("name") + ".start"), marks.insert(st.str("name") + ".end");
    if (st.element == "assert" && st.has("workload")) {
      std::string ph = st.has("phase") ? st.str("phase") : phase;
      if (ph.empty()) {
        problem(n, "an assert outside a phase needs phase=\"...\"");
        ok = false;
      } else {
        auto it = workloads_of.find(ph);
        const std::set<std::string>* ws = ph == phase ? &workloads : (it == workloads_of.end() ? nullptr : &it->second);
        if (ws && !ws->count(st.str("workload"))) {
          problem(n, "phase '{}' has no workload '{}' before this assert", ph, st.str("workload"));
          ok = false;
        }
      }
      for (const char* k : {"baseline"}) {
        if (!st.has(k)) continue;
        auto it = workloads_of.find(st.str(k));
        if (it != workloads_of.end() && !it->second.count(st.str("workload"))) {
          problem(n, "phase '{}' has no workload '{}'", st.str(k), st.str("workload"));
          ok = false;
        }
      }
    }
    if (!ok) return std::nullopt;
    return st;
  }

  bool check_value(const pugi::xml_node& n, const Attr& a, const std::string& s, const Topology* topo,
                   const std::string& /*phase*/, const std::set<std::string>& workloads,
                   const std::set<std::string>& marks, const std::map<std::string, std::set<std::string>>&,
                   const std::set<std::string>& phases, const Step& st) {
    auto bad = [&](const std::string& what) {
      problem(n, "{}=\"{}\": {}", a.name, s, what);
      return false;
    };
    switch (a.kind) {
      case Kind::text:
        return true;
      case Kind::file:
        if (s.empty()) return bad("expected a path");
        return true;
      case Kind::name:
        if (s.empty() || s.size() > 32 || s.find_first_of(" +\t") != std::string::npos)
          return bad("expected a name without spaces or '+'");
        return true;
      case Kind::integer: {
        try {
          size_t used = 0;
          long v = std::stol(s, &used);
          if (used != s.size() || v < 0 || v > 1'000'000) return bad("expected a whole number from 0 to 1000000");
        } catch (const std::exception&) {
          return bad("expected a whole number");
        }
        return true;
      }
      case Kind::count: {
        try {
          size_t used = 0;
          long v = std::stol(s, &used);
          if (used != s.size() || v < 1 || v > 1'000'000) return bad("expected a whole number from 1 to 1000000");
        } catch (const std::exception&) {
          return bad("expected a whole number from 1 to 1000000");
        }
        return true;
      }
      case Kind::number:
      case Kind::positive: {
        try {
          size_t used = 0;
          double v = std::stod(s, &used);
          if (used != s.size() || !std::isfinite(v)) return bad("expected a number");
          if (a.kind == Kind::positive && v <= 0) return bad("expected a number above 0");
        } catch (const std::exception&) {
          return bad("expected a number");
        }
        return true;
      }
      case Kind::size: {
        uint64_t b;
        if (!parse_size(s, b) || b == 0) return bad("expected a size like 600M, 64K or 2G");
        return true;
      }
      case Kind::duration: {
        std::chrono::milliseconds d;
        if (!parse_duration(s, d)) return bad("expected a duration like 2s, 500ms or 1m");
        return true;
      }
      case Kind::boolean:
        if (s != "true" && s != "false") return bad("expected true or false");
        return true;
      case Kind::percent: {
        std::string why;
        if (!testbed::parse_probability(s, why)) return bad(why);
        return true;
      }
      case Kind::delay: {
        std::string why;
        if (!testbed::parse_delay(s, why)) return bad(why);
        return true;
      }
      case Kind::rate: {
        uint64_t bps = 0;
        if (!testbed::parse_rate(s, bps) || bps == 0) return bad("expected a rate like 100mbit or 1gbit");
        return true;
      }
      case Kind::choice:
        if (("|" + std::string(a.choices) + "|").find("|" + s + "|") == std::string::npos)
          return bad(fmt::format("expected one of {}", a.choices));
        return true;
      case Kind::host:
      case Kind::server:
      case Kind::node: {
        if (!topo) return true;  // the topology is broken: reported already
        int i = topo->find_node(s);
        if (i < 0) return bad(fmt::format("topology '{}' has no node of that name", topo->name));
        const auto& nd = topo->nodes[i];
        if (a.kind == Kind::host && (nd.kind != NodeKind::host || !nd.job))
          return bad("expected a host with a job");
        if (a.kind == Kind::server && nd.kind != NodeKind::server) return bad("expected a server");
        return true;
      }
      case Kind::hosts:
      case Kind::servers: {
        if (!topo) return true;
        std::stringstream ss(s);
        int items = 0;
        for (std::string one; std::getline(ss, one, ',');) {
          ++items;
          int i = topo->find_node(one);
          if (i < 0) return bad(fmt::format("topology '{}' has no node '{}'", topo->name, one));
          const auto& nd = topo->nodes[i];
          if (a.kind == Kind::hosts && (nd.kind != NodeKind::host || !nd.job))
            return bad(fmt::format("'{}' is not a host with a job", one));
          if (a.kind == Kind::servers && nd.kind != NodeKind::server)
            return bad(fmt::format("'{}' is not a server", one));
        }
        if (items == 0 || s.back() == ',') return bad("expected names separated by commas");
        return true;
      }
      case Kind::rack: {
        if (!topo) return true;
        for (const auto& r : topo->racks)  // a rack holds hosts, and every host a job
          if (r.name == s) return true;
        return bad(fmt::format("topology '{}' has no rack of that name", topo->name));
      }
      case Kind::nic: {
        if (!topo) return true;
        int i = topo->find_node(st.str("host", n.attribute("host").value()));
        std::string rack = n.attribute("rack").value();
        for (const auto& r : topo->racks)  // a rack's step: the job host with the fewest NICs
          if (!rack.empty() && r.name == rack)
            for (int h : r.hosts)
              if (topo->nodes[static_cast<size_t>(h)].job &&
                  (i < 0 || topo->nodes[static_cast<size_t>(h)].nics.size() < topo->nodes[static_cast<size_t>(i)].nics.size()))
                i = h;
        int k = -1;
        try {
          size_t used = 0;
          k = std::stoi(s, &used);
          if (used != s.size()) k = -1;
        } catch (const std::exception&) {
        }
        if (i < 0) return true;
        int nics = static_cast<int>(topo->nodes[i].nics.size());
        if (k < 0 || k >= nics) return bad(fmt::format("host has NICs 0 to {} in this phase", nics - 1));
        return true;
      }
      case Kind::phase:
        if (!phases.count(s)) return bad("no phase of that name before this point");
        return true;
      case Kind::workload:
        if (st.element != "assert" && !workloads.count(s))
          return bad("no workload of that name earlier in this phase");
        return true;
      case Kind::mark:
        if (!marks.count(s)) return bad("no step with that mark earlier in this phase");
        return true;
      case Kind::timeref: {
        TimeRef r;
        if (!parse_timeref(s, r) || !marks.count(r.mark))
          return bad("expected MARK, MARK+DURATION or MARK-DURATION of a mark earlier in this phase ('start', a "
                     "step's mark, WORKLOAD.start, WORKLOAD.end)");
        return true;
      }
    }
    return true;
  }

  std::string text_;
  std::string file_;
  Overrides set_;
  std::vector<std::string> chain_;
  std::map<std::string, std::string> open_ended_;  // name → type: the phase's workloads that run until stopped (probes)
  std::vector<ptrdiff_t> newlines_;
  std::vector<std::string> problems_;
};

}  // namespace

namespace {


}  // namespace


bool parse_size(const std::string& s, uint64_t& out) {
  double v;
  std::string unit;
  if (!testbed::number_and_unit(s, v, unit)) return false;
  static const std::map<std::string, double> units = {{"", 1},         {"B", 1},           {"K", 1e3},
                                                      {"M", 1e6},      {"G", 1e9},         {"Ki", 1024.0},
                                                      {"Mi", 1048576.0}, {"Gi", 1073741824.0}};
  auto it = units.find(unit);
  if (it == units.end()) return false;
  double b = v * it->second;
  if (!std::isfinite(b) || b < 0 || b > 1e12) return false;
  out = static_cast<uint64_t>(std::llround(b));
  return true;
}

bool parse_timeref(const std::string& s, TimeRef& out) {
  auto op = s.find_last_of("+-");
  if (op != std::string::npos && op > 0) {
    std::chrono::milliseconds d;
    if (parse_duration(s.substr(op + 1), d)) {
      out.mark = s.substr(0, op);
      out.offset = s[op] == '-' ? -d : d;
      return true;
    }
  }
  out.mark = s;
  out.offset = std::chrono::milliseconds(0);
  return !s.empty();
}

std::string Step::str(const std::string& k, const std::string& def) const {
  auto it = attrs.find(k);
  return it == attrs.end() ? def : it->second;
}
double Step::num(const std::string& k, double def) const { return has(k) ? std::stod(str(k)) : def; }
int Step::integer(const std::string& k, int def) const { return has(k) ? std::stoi(str(k)) : def; }
uint64_t Step::bytes(const std::string& k, uint64_t def) const {
  uint64_t b = def;
  if (has(k)) parse_size(str(k), b);
  return b;
}
uint64_t Step::rate_bps(const std::string& k, uint64_t def) const {
  uint64_t b = def;
  if (has(k)) testbed::parse_rate(str(k), b);
  return b;
}
int64_t Step::delay_us(const std::string& k, int64_t def) const {
  std::string why;
  auto d = has(k) ? testbed::parse_delay(str(k), why) : std::nullopt;
  return d ? static_cast<int64_t>(*d) : def;
}
std::chrono::milliseconds Step::duration(const std::string& k, std::chrono::milliseconds def) const {
  auto d = def;
  if (has(k)) parse_duration(str(k), d);
  return d;
}
bool Step::flag(const std::string& k, bool def) const { return has(k) ? str(k) == "true" : def; }
std::string Step::describe() const {
  std::string s = element;
  if (has("name")) s += " " + str("name");
  if (!type.empty()) s += (has("name") ? " (" + type + ")" : " " + type);
  return s;
}

std::vector<Scenario> load_scenarios_text(const std::string& text, const std::string& file, const Overrides& set) {
  return Loader(text, file, set).load();
}

std::vector<Scenario> load_scenarios(const std::string& path, const Overrides& set) {
  return load_scenarios_text(read_text(path), path, set);
}

std::string shipped_dir() {
  if (const char* e = std::getenv("LANES_SCENARIOS_DIR"); e && *e) return e;
  return LANES_SHIPPED_SCENARIOS;
}

std::string resolve_scenario(const std::string& s) {
  if (s.find('/') != std::string::npos || std::filesystem::exists(s)) return s;
  std::string p = shipped_dir() + "/" + s + (s.size() > 4 && s.substr(s.size() - 4) == ".xml" ? "" : ".xml");
  return std::filesystem::exists(p) ? p : s;
}

}  // namespace lanes::scenarios
