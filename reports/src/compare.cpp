#include "lanes/reports/compare.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cctype>
#include <cstdlib>
#include <iterator>
#include <map>
#include <string_view>

namespace lanes::reports {

const char* to_string(Change c) {
  switch (c) {
    case Change::same: return "same";
    case Change::flip: return "flip";
    case Change::fixed: return "fixed";
    case Change::drift: return "drift";
    case Change::only_a: return "only in A";
    case Change::only_b: return "only in B";
  }
  return "?";
}

std::optional<double> first_number(const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    bool digit = c >= '0' && c <= '9';
    bool sign = (c == '-' || c == '.') && i + 1 < text.size() && text[i + 1] >= '0' && text[i + 1] <= '9';
    if (!digit && !sign) continue;
    if (i > 0 && (std::isalpha(static_cast<unsigned char>(text[i - 1])) || text[i - 1] == '_')) {
      // a digit inside a word ("h1", "ipv6") is a name, not a reading
      while (i + 1 < text.size() && std::isalnum(static_cast<unsigned char>(text[i + 1]))) ++i;
      continue;
    }
    char* end = nullptr;
    double v = std::strtod(text.c_str() + i, &end);
    if (end != text.c_str() + i && std::isfinite(v)) return v;
  }
  return std::nullopt;
}

namespace {

std::optional<double> moved(std::optional<double> a, std::optional<double> b) {
  if (!a || !b) return std::nullopt;
  double scale = std::max(std::fabs(*a), std::fabs(*b));
  return scale > 0 ? (*b - *a) / scale : 0.0;
}

}  // namespace

Change classify(bool in_a, bool in_b, bool a_passed, bool b_passed, std::optional<double> a, std::optional<double> b,
                bool text_differs, const CompareThresholds& t) {
  if (!in_b) return Change::only_a;
  if (!in_a) return Change::only_b;
  if (a_passed && !b_passed) return Change::flip;
  if (!a_passed && b_passed) return Change::fixed;
  if (auto m = moved(a, b)) return std::fabs(*m) > t.drift ? Change::drift : Change::same;
  return text_differs ? Change::drift : Change::same;
}

namespace {

// the figures a workload is judged by: those its plug-in declared compared
// (either side's declarations, A's first)
std::vector<std::string> compared_figures(const WorkloadResult* a, const WorkloadResult* b) {
  std::vector<std::string> out;
  for (const auto* w : {a, b})
    if (w)
      for (const auto& d : w->declared)
        if (d.compared && std::find(out.begin(), out.end(), d.key) == out.end()) out.push_back(d.key);
  if (out.empty() && !(a && !a->declared.empty()) && !(b && !b->declared.empty()))
    // results files from before lanes wrote declarations: the figures
    // compare judged then
    out = {"throughput_gbps", "line_share",   "seconds",    "retransmits", "connection_errors", "p99_ms",
           "p99_final_ms",    "busbw_gbps",   "algbw_gbps", "efficiency",  "time_s",            "blackout_ms"};
  return out;
}

// what a phase's config holds of its setup (the rest are readings: the
// convergence time, what faults recorded, how busy the CPU was)
constexpr std::string_view kSettings[] = {"topology", "overrides", "job_hosts", "egress",
                                          "vip",      "family",    "nics",      "nic_rate"};

std::string text(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return fmt::format("{:.4g}", v.get<double>());
  return v.dump();
}

void add_config(Comparison& c, const std::string& field, const std::string& a, const std::string& b) {
  c.config.push_back({field, a, b, a != b});
}

template <typename T, typename Key>
std::vector<std::pair<const T*, const T*>> pair_up(const std::vector<T>* a, const std::vector<T>* b, Key key,
                                                   std::vector<std::string>& keys) {
  std::map<std::string, std::pair<const T*, const T*>> by;
  for (int side = 0; side < 2; ++side) {
    const auto* v = side ? b : a;
    if (!v) continue;
    for (const auto& x : *v) {
      std::string k = key(x);
      if (!by.count(k)) keys.push_back(k);
      (side ? by[k].second : by[k].first) = &x;
    }
  }
  std::vector<std::pair<const T*, const T*>> out;
  for (const auto& k : keys) out.push_back(by[k]);
  return out;
}

void count(Comparison& c, Change ch) {
  c.flips += ch == Change::flip;
  c.fixes += ch == Change::fixed;
  c.drifts += ch == Change::drift;
  c.unmatched += ch == Change::only_a || ch == Change::only_b;
}

}  // namespace

Comparison compare_runs(const RunResult& a, const RunResult& b, const CompareThresholds& t) {
  Comparison c;
  c.thresholds = t;
  add_config(c, "lanes", a.lanes_version, b.lanes_version);
  add_config(c, "kernel", a.kernel, b.kernel);
  add_config(c, "gobgpd", a.gobgpd, b.gobgpd);
  add_config(c, "seed", std::to_string(a.seed), std::to_string(b.seed));
  std::vector<std::string> fkeys;
  for (const auto* f : {&a.features, &b.features})
    if (f->is_object())
      for (const auto& [k, v] : f->items())
        if (std::find(fkeys.begin(), fkeys.end(), k) == fkeys.end()) fkeys.push_back(k);
  for (const auto& k : fkeys)
    add_config(c, "feature " + k, a.features.contains(k) ? text(a.features[k]) : "—",
               b.features.contains(k) ? text(b.features[k]) : "—");

  std::vector<std::string> names;
  auto scenarios = pair_up(&a.scenarios, &b.scenarios, [](const ScenarioResult& s) { return s.name; }, names);
  for (size_t i = 0; i < scenarios.size(); ++i) {
    auto [sa, sb] = scenarios[i];
    const std::string& sc = names[i];
    // configuration, phase by phase
    std::vector<std::string> pnames;
    auto phases = pair_up(sa ? &sa->phases : nullptr, sb ? &sb->phases : nullptr,
                          [](const PhaseResult& p) { return p.name; }, pnames);
    for (size_t j = 0; j < phases.size(); ++j) {
      auto [pa, pb] = phases[j];
      std::vector<std::string> keys;
      for (const auto* p : {pa, pb})
        if (p && p->config.is_object())
          for (const auto& [k, v] : p->config.items())
            if (std::find(std::begin(kSettings), std::end(kSettings), k) != std::end(kSettings) &&
                std::find(keys.begin(), keys.end(), k) == keys.end())
              keys.push_back(k);
      for (const auto& k : keys)
        add_config(c, fmt::format("{}/{} {}", sc, pnames[j], k),
                   pa && pa->config.contains(k) ? text(pa->config[k]) : "—",
                   pb && pb->config.contains(k) ? text(pb->config[k]) : "—");
      // the workloads' figures
      std::vector<std::string> wnames;
      auto works = pair_up(pa ? &pa->workloads : nullptr, pb ? &pb->workloads : nullptr,
                           [](const WorkloadResult& w) { return w.name; }, wnames);
      for (size_t k = 0; k < works.size(); ++k) {
        auto [wa, wb] = works[k];
        for (const auto& f : compared_figures(wa, wb)) {
          auto num = [&](const WorkloadResult* w) -> std::optional<double> {
            if (!w || !w->figures.contains(f) || !w->figures[f].is_number()) return std::nullopt;
            return w->figures[f].get<double>();
          };
          auto x = num(wa), y = num(wb);
          if (!x && !y) continue;
          CompareRow r;
          r.scenario = sc;
          r.key = fmt::format("{}/{} {}", pnames[j], wnames[k], f);
          r.a = x ? fmt::format("{:.4g}", *x) : "—";
          r.b = y ? fmt::format("{:.4g}", *y) : "—";
          r.change = classify(x.has_value(), y.has_value(), true, true, x, y, false, t);
          r.moved = moved(x, y);
          count(c, r.change);
          c.figures.push_back(std::move(r));
        }
      }
    }
    // the verdicts
    std::vector<std::string> akeys;
    auto asserts = pair_up(sa ? &sa->assertions : nullptr, sb ? &sb->assertions : nullptr,
                           [](const Assertion& x) { return x.name + (x.phase.empty() ? "" : " [" + x.phase + "]"); },
                           akeys);
    for (size_t j = 0; j < asserts.size(); ++j) {
      auto [x, y] = asserts[j];
      CompareRow r;
      r.scenario = sc;
      r.key = akeys[j];
      r.a = x ? x->measured : "—";
      r.b = y ? y->measured : "—";
      r.a_passed = x && x->passed;
      r.b_passed = y && y->passed;
      auto nx = x ? first_number(x->measured) : std::nullopt, ny = y ? first_number(y->measured) : std::nullopt;
      r.change = classify(x, y, r.a_passed, r.b_passed, nx, ny, x && y && x->measured != y->measured, t);
      r.moved = moved(nx, ny);
      count(c, r.change);
      c.assertions.push_back(std::move(r));
    }
    // a scenario that could not run in one of them has no assertions to flip
    if (sa && sb && sa->passed && !sb->passed && !sb->error.empty()) {
      CompareRow r{sc, "scenario ran to its end", "yes", sb->error, true, false, Change::flip, std::nullopt};
      count(c, r.change);
      c.assertions.push_back(std::move(r));
    }
  }
  return c;
}

}  // namespace lanes::reports
