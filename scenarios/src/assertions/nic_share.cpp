#include <fmt/format.h>

#include <cmath>

#include "result_assertions.hpp"

namespace lanes::scenarios {

const char* NicShare::type() const { return "nic-share"; }

const Attrs& NicShare::attrs() const {
  static const Attrs a = {{"workload", Kind::workload, true}, {"phase", Kind::phase}, {"expected", Kind::number},
                          {"tolerance", Kind::number}};
  return a;
}

void NicShare::check(const ResultContext& ctx, reports::Assertion& out) const {
  const auto* w = ctx.workload();
  if (!w) return nothing_measured(out, "the workload did not run");
  size_t n = w->nic_share.size();
  double expected = ctx.step.num("expected", n ? 100.0 / static_cast<double>(n) : 0);
  double tol = ctx.step.num("tolerance", 2.5);
  out.expected = fmt::format("each NIC {:.1f}% ± {:.1f}", expected, tol);
  std::string m;
  bool ok = n > 0;
  for (double s : w->nic_share) {
    m += (m.empty() ? "" : " ") + fmt::format("{:.1f}%", s);
    ok = ok && std::fabs(s - expected) <= tol;
  }
  out.measured = m.empty() ? "no NIC counters" : m;
  out.passed = ok;
}

}  // namespace lanes::scenarios
