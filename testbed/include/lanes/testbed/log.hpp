#pragma once
// The logging facade: levels, one sink (stderr by default, or a file), and
// the hook that routes libnl's messages here.

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace lanes::log {

enum class Level { debug = 0, info = 1, warn = 2, error = 3, off = 4 };

void set_level(Level level);
Level level();
bool parse_level(std::string_view text, Level& out);
// Appends to PATH in addition to stderr (used for the run directory's log).
void add_file_sink(const std::string& path);
void write(Level level, std::string_view message);

inline bool enabled(Level l) { return l >= level(); }

#define LANES_LOG_FN(name)                                                   \
  template <typename... Args>                                                \
  void name(fmt::format_string<Args...> f, Args&&... args) {                 \
    if (enabled(Level::name)) write(Level::name, fmt::format(f, std::forward<Args>(args)...)); \
  }
LANES_LOG_FN(debug)
LANES_LOG_FN(info)
LANES_LOG_FN(warn)
LANES_LOG_FN(error)
#undef LANES_LOG_FN

}  // namespace lanes::log
