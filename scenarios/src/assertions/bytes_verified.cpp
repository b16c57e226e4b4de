#include <fmt/format.h>

#include "result_assertions.hpp"

namespace lanes::scenarios {

namespace {

// What a workload says went wrong with its bytes: its verify_note (a line
// or a list), else its first errors; a workload that says nothing is named
// as such, never left as "?"
std::string why_not(const reports::WorkloadResult& w) {
  auto text = [](const nlohmann::json& v) {
    if (v.is_string()) return v.get<std::string>();
    std::string s;
    if (v.is_array())
      for (const auto& x : v) s += (s.empty() ? "" : ", ") + (x.is_string() ? x.get<std::string>() : x.dump());
    return s;
  };
  for (const char* key : {"verify_note", "errors"})
    if (w.figures.contains(key))
      if (auto s = text(w.figures[key]); !s.empty()) return s;
  return "the workload recorded no reason";
}

}  // namespace

const char* BytesVerified::type() const { return "bytes-verified"; }

const Attrs& BytesVerified::attrs() const {
  static const Attrs a = {{"workload", Kind::workload}, {"phase", Kind::phase}};
  return a;
}

void BytesVerified::check(const ResultContext& ctx, reports::Assertion& out) const {
  std::string bad;
  int n = 0;
  uint64_t total = 0;
  for (const auto* x : ctx.workloads) {
    if (!x->figures.contains("bytes_verified")) continue;  // probes carry no stream
    ++n;
    total += x->figures.value("verified_bytes", uint64_t{0});
    if (!x->figures.value("bytes_verified", false)) bad += (bad.empty() ? "" : "; ") + x->name + " (" + why_not(*x) + ")";
  }
  if (n == 0) return nothing_measured(out, "no workload with a verified stream ran");
  if (!ctx.step.has("workload")) out.name += " (" + std::to_string(n) + " workloads)";
  out.expected = "every byte sent arrived and matched the pattern";
  out.measured = bad.empty() ? fmt::format("{} bytes verified", total) : "not verified: " + bad;
  out.passed = bad.empty();
}

}  // namespace lanes::scenarios
