#pragma once
#include <iterator>
#include <algorithm>
#include <fstream>
// Helpers shared by lanes' tests.

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>

#include "lanes/testbed/wait.hpp"

namespace lanes::test {

// Exit code CTest reports as "not run" (SKIP_RETURN_CODE): Catch2 2.x has no
// SKIP, and a privileged test must never pass where it did not run. Only
// not_run() exits with it: the tests' main (test_main.cpp) exits 1 on any
// failure, never with Catch2's count of failed assertions, so 77 failures
// cannot read as "not run".
inline constexpr int kNotRun = 77;

// Ends the test process as "not run", saying why on a line of its own.
[[noreturn]] inline void not_run(const char* why) {
  std::fprintf(stderr, "NOT RUN: %s\n", why);
  std::fflush(stderr);
  std::exit(kNotRun);
}

// Ends the test process as "not run" unless it runs as root.
inline void require_root() {
  if (::geteuid() != 0) not_run("this test needs root (network namespaces)");
}

// Polls PRED until it holds or TIMEOUT passes (lanes::testbed::eventually
// with the tests' defaults).
inline bool eventually(const std::function<bool()>& pred,
                       std::chrono::milliseconds timeout = std::chrono::milliseconds(5000),
                       std::chrono::milliseconds every = std::chrono::milliseconds(10)) {
  return testbed::eventually(pred, timeout, every);
}

// Runs a shell command; returns its exit status and stdout.
struct CommandResult {
  int status = -1;
  std::string out;
};
inline CommandResult run_command(const std::string& cmd) {
  CommandResult r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

inline std::string lanes_bin();

// A state dir of the test's own, removed at the end: a test's `lanes clean`
// or `lanes status` then sees only its own runs, whatever runs beside it.
// At the end, on every path (a failed REQUIRE included), the runs still in
// it are taken down first (`lanes clean --all` of this state dir: its
// runs only), so one failure cannot load the machine for the tests after.
struct OwnStateDir {
  std::string path;
  explicit OwnStateDir(const std::string& name)
      : path((std::filesystem::temp_directory_path() / ("lanes-" + name + "-" + std::to_string(::getpid())))
                 .string()) {
    std::filesystem::remove_all(path);
  }
  ~OwnStateDir() {
    std::error_code ec;
    bool runs = false;  // a run is a directory of the state dir
    for (const auto& e : std::filesystem::directory_iterator(path, ec)) runs = runs || e.is_directory(ec);
    if (runs) (void)run_command(env() + lanes_bin() + " clean --all");
    std::filesystem::remove_all(path, ec);
  }
  OwnStateDir(const OwnStateDir&) = delete;
  OwnStateDir& operator=(const OwnStateDir&) = delete;
  // "LANES_STATE_DIR=<path> " to put before a command
  std::string env() const { return "LANES_STATE_DIR=" + path + " "; }
};

// A folder of the test's own under the temp dir, removed at the end of the scope.
struct TempDir {
  std::string dir;
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "lanes-test-XXXXXX").string();
    if (::mkdtemp(t.data())) dir = t;
  }
  ~TempDir() {
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return dir; }
};

// `lanes down` of a run at the end of the scope, whatever was checked
// before it (a failed REQUIRE throws past the test's own down). ENV: the
// state dir's "LANES_STATE_DIR=... " or empty. A down that finds the run
// gone already does nothing.
struct DownAtEnd {
  std::string cmd;
  DownAtEnd(const std::string& env, const std::string& id) : cmd(env + lanes_bin() + " down " + id) {}
  ~DownAtEnd() { (void)run_command(cmd); }
  DownAtEnd(const DownAtEnd&) = delete;
  DownAtEnd& operator=(const DownAtEnd&) = delete;
};

inline std::string source_dir() { return LANES_SOURCE_DIR; }
inline std::string lanes_bin() { return LANES_BIN; }
inline std::string topology(const std::string& name) { return source_dir() + "/topologies/" + name; }

// A rendering compared byte for byte with the checked-in golden file
// (tests/golden/NAME); LANES_UPDATE_GOLDEN=1 writes it instead, for review.
inline std::string golden_mismatch(const std::string& name, const std::string& text) {
  std::string path = source_dir() + "/tests/golden/" + name;
  if (const char* u = std::getenv("LANES_UPDATE_GOLDEN"); u && std::string(u) == "1") {
    std::ofstream(path, std::ios::trunc) << text;
    return "";
  }
  std::ifstream in(path);
  if (!in) return path + " is missing (LANES_UPDATE_GOLDEN=1 writes it)";
  std::string want((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (want == text) return "";
  size_t at = 0;
  while (at < want.size() && at < text.size() && want[at] == text[at]) ++at;
  size_t line = static_cast<size_t>(std::count(want.begin(), want.begin() + static_cast<long>(at), '\n')) + 1;
  return path + ": differs from line " + std::to_string(line) + " on";
}

}  // namespace lanes::test
