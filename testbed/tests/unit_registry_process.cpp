#include <signal.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "lanes/testbed/process.hpp"
#include "lanes/testbed/run_registry.hpp"
#include "support.hpp"

using namespace lanes::testbed;
using lanes::test::eventually;

namespace {
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("lanes-test-" + std::to_string(::getpid()) + "-" + std::to_string(std::rand()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};
}  // namespace

TEST_CASE("run registry creates locks saves loads lists and removes runs", "[unit]") {
  TempDir tmp;
  RunRegistry reg(tmp.path.string());
  auto id = reg.new_id();
  CHECK(RunRegistry::valid_id(id));
  {
    auto lock = reg.create(id);
    REQUIRE(lock.ok());
    CHECK(reg.in_use(id));
    CHECK_FALSE(reg.create(id).ok());  // taken
    // a second lock from this process (another open file) is refused while held
    CHECK_FALSE(reg.lock(id, false).ok());
    RunState s;
    s.id = id;
    s.phase = "up";
    s.topology_name = "laptop";
    s.daemons.push_back({"gobgpd", "r1-tor", 1234, 99, "/x.log"});
    REQUIRE(reg.save(s).ok());
    auto back = reg.load(id);
    REQUIRE(back.ok());
    CHECK(back.value().phase == "up");
    CHECK(back.value().daemons.size() == 1);
    CHECK(back.value().daemons[0].start_time == 99);
  }
  CHECK_FALSE(reg.in_use(id));  // released with the lock
  CHECK(reg.list() == std::vector<std::string>{id});
  REQUIRE(reg.remove_dir(id).ok());
  CHECK(reg.list().empty());
}

TEST_CASE("daemon exit status and output are recorded", "[unit]") {
  TempDir tmp;
  ProcessSpec spec;
  spec.name = "sh";
  spec.argv = {"sh", "-c", "echo hello from $LANES_X; exit 3"};
  spec.env = {{"LANES_X", "lanes"}};
  spec.log_path = (tmp.path / "sh.log").string();
  auto d = Daemon::start(spec);
  REQUIRE(d.ok());
  CHECK(d.value().wait() == 3);
  std::ifstream in(spec.log_path);
  std::string line;
  std::getline(in, line);
  CHECK(line == "hello from lanes");
}

TEST_CASE("daemon stop sends SIGTERM then SIGKILL to a process that ignores it", "[unit]") {
  ProcessSpec polite{"sleep", {"sleep", "60"}};
  auto a = Daemon::start(polite);
  REQUIRE(a.ok());
  CHECK(a.value().running());
  auto st = a.value().stop(std::chrono::milliseconds(2000));
  REQUIRE(st.ok());
  CHECK(st.value() == 128 + SIGTERM);

  ProcessSpec stubborn{"stubborn", {"sh", "-c", "trap '' TERM; exec sleep 60"}};
  auto b = Daemon::start(stubborn);
  REQUIRE(b.ok());
  // the trap is installed once the shell has exec'd sleep (SIG_IGN survives exec)
  REQUIRE(eventually([&] {
    std::ifstream comm("/proc/" + std::to_string(b.value().pid()) + "/comm");
    std::string c;
    std::getline(comm, c);
    return c == "sleep";
  }));
  auto t0 = std::chrono::steady_clock::now();
  auto st2 = b.value().stop(std::chrono::milliseconds(300));
  REQUIRE(st2.ok());
  CHECK(st2.value() == 128 + SIGKILL);
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(300));
}

TEST_CASE("daemon crash is noticed", "[unit]") {
  ProcessSpec spec{"victim", {"sleep", "60"}};
  auto d = Daemon::start(spec);
  REQUIRE(d.ok());
  CHECK(d.value().running());
  ::kill(d.value().pid(), SIGKILL);
  CHECK(eventually([&] { return !d.value().running(); }));
  CHECK(d.value().exit_status() == 128 + SIGKILL);
}

TEST_CASE("daemon with a missing program is a clear error", "[unit]") {
  ProcessSpec spec{"ghost", {"lanes-no-such-program"}};
  auto d = Daemon::start(spec);
  REQUIRE_FALSE(d.ok());
  CHECK(std::string(d.error().what()).find("not in PATH") != std::string::npos);
}

TEST_CASE("stop_pid ends a process by pid only while its start time matches", "[unit]") {
  ProcessSpec spec{"sleeper", {"sleep", "60"}};
  auto d = Daemon::start(spec);
  REQUIRE(d.ok());
  pid_t pid = d.value().pid();
  uint64_t start = process_start_time(pid);
  REQUIRE(start != 0);
  CHECK_FALSE(stop_pid(pid, start + 1, std::chrono::milliseconds(100)));  // a different process
  CHECK(d.value().running());
  CHECK(stop_pid(pid, start, std::chrono::milliseconds(2000)));
  CHECK(eventually([&] { return !d.value().running(); }));
}
