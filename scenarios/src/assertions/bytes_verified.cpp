#include <fmt/format.h>

#include "result_assertions.hpp"

namespace lanes::scenarios {

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
    if (!x->figures.value("bytes_verified", false))
      bad += (bad.empty() ? "" : ", ") + x->name + " (" + x->figures.value("verify_note", std::string("?")) + ")";
  }
  if (n == 0) return nothing_measured(out, "no workload with a verified stream ran");
  if (!ctx.step.has("workload")) out.name += " (" + std::to_string(n) + " workloads)";
  out.expected = "every byte sent arrived and matched the pattern";
  out.measured = bad.empty() ? fmt::format("{} bytes verified", total) : "not verified: " + bad;
  out.passed = bad.empty();
}

}  // namespace lanes::scenarios
