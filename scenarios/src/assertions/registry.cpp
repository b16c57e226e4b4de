#include "live_assertions.hpp"
#include "result_assertions.hpp"

namespace lanes::scenarios {

const std::vector<const LiveAssertion*>& live_assertions() {
  static const MembersAssertion members;
  static const HealthyFlowsKept healthy;
  static const RateRatio rate;
  static const RateRecovery recovery;
  static const RateShare share;
  static const NoTaskRoutes containment;
  static const HijackRejected hijack;
  static const NeighborsPermanent neighbors;
  static const ImpairmentLoss loss;
  static const NicOut out;
  static const std::vector<const LiveAssertion*> all = {&rate,    &recovery,    &share,     &healthy, &members,
                                                        &containment, &hijack, &neighbors, &loss, &out};
  return all;
}

const LiveAssertion* find_live_assertion(const std::string& type) {
  for (const auto* a : live_assertions())
    if (type == a->type()) return a;
  return nullptr;
}

const std::vector<const ResultAssertion*>& result_assertions() {
  static const Ratio throughput(Ratio::Of::throughput), completion(Ratio::Of::completion),
      latency_ratio(Ratio::Of::latency), busbw_ratio(Ratio::Of::busbw);
  static const NicShare share;
  static const ConnectionErrors errors;
  static const BytesVerified verified;
  static const Blackout blackout;
  static const Latency latency;
  static const CompletionTime time;
  static const FigureBound figure;
  static const TransferFloor floor;
  static const WindowCeiling ceiling;
  static const std::vector<const ResultAssertion*> all = {&throughput, &completion, &latency_ratio, &busbw_ratio,
                                                          &share,      &errors,     &verified,      &blackout,
                                                          &latency,    &time,       &figure,        &floor,
                                                          &ceiling};
  return all;
}

const ResultAssertion* find_result_assertion(const std::string& type) {
  for (const auto* a : result_assertions())
    if (type == a->type()) return a;
  return nullptr;
}

}  // namespace lanes::scenarios
