#include "lanes/scenarios/traffic_args.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

namespace lanes::scenarios::traffic::detail {

void put(std::vector<std::string>& out, std::string_view flag, const std::string& v) {
  out.emplace_back(flag);
  out.push_back(v);
}
void put(std::vector<std::string>& out, std::string_view flag, int v) { put(out, flag, std::to_string(v)); }
void put(std::vector<std::string>& out, std::string_view flag, uint64_t v) { put(out, flag, std::to_string(v)); }
// the shortest spelling that reads back as the same double
void put(std::vector<std::string>& out, std::string_view flag, double v) { put(out, flag, fmt::format("{}", v)); }
void put(std::vector<std::string>& out, std::string_view flag, bool v) {
  if (v) out.emplace_back(flag);
}
void put(std::vector<std::string>& out, std::string_view flag, const std::vector<std::string>& v) {
  if (v.empty()) return;
  std::string joined;
  for (const auto& x : v) joined += (joined.empty() ? "" : ",") + x;
  put(out, flag, joined);
}

namespace {
// the whole word as a number of T
template <class T> bool number(std::string_view word, T& v) {
  if (word.empty()) return false;
  T x{};
  auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), x);
  if (ec != std::errc() || end != word.data() + word.size()) return false;
  v = x;
  return true;
}
}  // namespace

bool take(std::string_view word, std::string& v) {
  v = std::string(word);
  return true;
}
bool take(std::string_view word, int& v) { return number(word, v); }
bool take(std::string_view word, uint64_t& v) { return !word.starts_with('-') && number(word, v); }
bool take(std::string_view word, double& v) { return number(word, v) && std::isfinite(v); }
bool take(std::string_view word, std::vector<std::string>& v) {
  v.clear();
  size_t at = 0;
  while (at <= word.size()) {
    size_t comma = word.find(',', at);
    if (comma == std::string_view::npos) comma = word.size();
    if (comma == at) return false;  // an empty item
    v.emplace_back(word.substr(at, comma - at));
    at = comma + 1;
  }
  return true;
}

}  // namespace lanes::scenarios::traffic::detail
