#pragma once
// The logging facade: levels and sinks (stderr, plus a file if asked), and
// reading back the end of a log for error messages.

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
// Daemons: every stderr line starts with the wall-clock time (seconds.ms
// since the epoch, as the file sink and the supervisor's log write it), so
// one daemon's log lines up with another's and with the run's events.
void set_timestamps(bool on);

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

// The last LINES lines of the file at PATH, each prefixed with INDENT and
// ended by a newline ("" when it cannot be read).
std::string tail_of(const std::string& path, size_t lines, std::string_view indent = "");

}  // namespace lanes::log
