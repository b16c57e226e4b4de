#include "lanes/testbed/log.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <fstream>
#include <mutex>

namespace lanes::log {
namespace {
std::atomic<Level> g_level{Level::info};
std::mutex g_mu;
FILE* g_file = nullptr;
std::atomic<bool> g_timestamps{false};

const char* name_of(Level l) {
  switch (l) {
    case Level::debug: return "debug";
    case Level::info: return "info";
    case Level::warn: return "warn";
    case Level::error: return "error";
    case Level::off: return "off";
  }
  return "?";
}
}  // namespace

void set_level(Level l) { g_level = l; }
Level level() { return g_level; }

bool parse_level(std::string_view t, Level& out) {
  for (Level l : {Level::debug, Level::info, Level::warn, Level::error, Level::off}) {
    if (t == name_of(l)) {
      out = l;
      return true;
    }
  }
  return false;
}

void add_file_sink(const std::string& path) {
  std::lock_guard lk(g_mu);
  if (g_file) std::fclose(g_file);
  g_file = std::fopen(path.c_str(), "ae");
}

void set_timestamps(bool on) { g_timestamps = on; }

void write(Level l, std::string_view msg) {
  std::lock_guard lk(g_mu);
  std::string line = fmt::format("lanes: {}: {}\n", name_of(l), msg);
  std::string stamp;  // only where a line says when
  if (g_timestamps || g_file) {
    auto now = std::chrono::system_clock::now().time_since_epoch();
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now).count();
    stamp = fmt::format("{}.{:03} ", ms / 1000, ms % 1000);
  }
  if (g_timestamps) std::fwrite(stamp.data(), 1, stamp.size(), stderr);
  std::fwrite(line.data(), 1, line.size(), stderr);
  if (g_file) {
    std::fprintf(g_file, "%s%s", stamp.c_str(), line.c_str() + 7);
    std::fflush(g_file);
  }
}

std::string tail_of(const std::string& path, size_t lines, std::string_view indent) {
  std::ifstream in(path);
  std::deque<std::string> last;
  for (std::string l; std::getline(in, l);) {
    last.push_back(std::move(l));
    if (last.size() > lines) last.pop_front();
  }
  std::string out;
  for (const auto& l : last) out.append(indent).append(l).append("\n");
  return out;
}

}  // namespace lanes::log
