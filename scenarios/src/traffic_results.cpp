#include "lanes/scenarios/traffic_results.hpp"

#include <fstream>

namespace lanes::scenarios::traffic {

void to_json(nlohmann::json& j, const RecvFlow& x) {
  j = {{"flow", x.flow}, {"expected", x.expected}, {"verified", x.verified}, {"complete", x.complete},
       {"seconds", x.seconds}};
  if (x.first_bad_offset) j["first_bad_offset"] = *x.first_bad_offset;
}

void from_json(const nlohmann::json& j, RecvFlow& x) {
  RecvFlow d;
  x.flow = j.value("flow", d.flow);
  x.expected = j.value("expected", d.expected);
  x.verified = j.value("verified", d.verified);
  x.complete = j.value("complete", d.complete);
  x.seconds = j.value("seconds", d.seconds);
  x.first_bad_offset.reset();
  if (j.contains("first_bad_offset")) x.first_bad_offset = j.at("first_bad_offset").get<uint64_t>();
}

std::optional<nlohmann::json> last_object_line(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty() && line[0] == '{') last = line;
  if (last.empty()) return std::nullopt;
  try {
    auto j = nlohmann::json::parse(last);
    if (!j.is_object()) return std::nullopt;
    return j;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

}  // namespace lanes::scenarios::traffic
