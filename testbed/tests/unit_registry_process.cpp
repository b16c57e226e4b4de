#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <algorithm>
#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

#include "lanes/testbed/cleanup.hpp"
#include "lanes/testbed/cpu_load.hpp"
#include "lanes/testbed/handle.hpp"
#include "lanes/testbed/process.hpp"
#include "lanes/testbed/netns.hpp"
#include "lanes/testbed/rootless.hpp"
#include "lanes/testbed/run_registry.hpp"
#include "lanes/testbed/supervisor.hpp"
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

TEST_CASE("rootless paths: inside a user's world every directory is under its base", "[unit]") {
  // this test process's environment only (each test case runs in a process of its own)
  ::unsetenv("LANES_STATE_DIR");
  ::setenv(rootless::kEnv, "/run/user/1000", 1);
  CHECK(rootless::world_base() == std::optional<std::string>("/run/user/1000"));
  CHECK(RunRegistry::default_base() == "/run/user/1000/lanes");
  CHECK(RunRegistry::default_owners() == "/run/user/1000/lanes-owners");
  CHECK(netns_dir() == "/run/user/1000/lanes-netns");
  ::setenv("LANES_STATE_DIR", "/tmp/elsewhere", 1);  // a state dir given wins; owners and mounts stay the user's
  CHECK(RunRegistry::default_base() == "/tmp/elsewhere");
  CHECK(netns_dir() == "/run/user/1000/lanes-netns");
  ::unsetenv(rootless::kEnv);
  ::unsetenv("LANES_STATE_DIR");
  if (::geteuid() == 0) {  // root outside a world: the machine's directories
    CHECK(RunRegistry::default_base() == "/run/lanes");
    CHECK(netns_dir() == "/run/netns");
  } else if (!rootless::user_base().empty()) {  // an ordinary user outside the world lists its runs without entering
    CHECK(RunRegistry::default_base() == rootless::user_base() + "/lanes");
  }
  // where user namespaces are refused, the reason comes with what to do
  auto why = rootless::userns_refusal(EPERM);
  CHECK(why.find("may not make a user namespace here (Operation not permitted)") != std::string::npos);
  CHECK(why.find("run lanes as root") != std::string::npos);
}

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
    s.overrides = {{"nics", "2"}, {"egress", "bpf"}};
    REQUIRE(reg.save(s).ok());
    auto back = reg.load(id);
    REQUIRE(back.ok());
    CHECK(back.value().phase == "up");
    CHECK(back.value().overrides == s.overrides);  // lanes status loads the topology as the run did
    CHECK(back.value().daemons.size() == 1);
    CHECK(back.value().daemons[0].start_time == 99);
  }
  CHECK_FALSE(reg.in_use(id));  // released with the lock
  CHECK(reg.list() == std::vector<std::string>{id});
  REQUIRE(reg.remove_dir(id).ok());
  CHECK(reg.list().empty());
}

TEST_CASE("the supervisor's daemons are read back by its own reader, and none from a file torn or missing", "[unit]") {
  TempDir tmp;
  RunRegistry reg(tmp.path.string());
  auto id = reg.new_id();
  std::filesystem::create_directories(reg.dir(id));
  CHECK(supervised_daemons(reg, id).empty());
  SupervisedDaemon d{"r1-tor", "gobgpd", 4242, 1, "/x/logs/r1-tor-gobgpd.log"};
  std::ofstream(supervisor_state_path(reg, id)) << nlohmann::json{{"ready", true}, {"daemons", {d.to_json()}}}.dump();
  auto back = supervised_daemons(reg, id);
  REQUIRE(back.size() == 1);
  CHECK((back[0].node == "r1-tor" && back[0].name == "gobgpd" && back[0].pid == 4242 && back[0].restarts == 1 &&
         back[0].log == d.log));
  std::ofstream(supervisor_state_path(reg, id), std::ios::trunc) << "{\"daemons\": [";
  CHECK(supervised_daemons(reg, id).empty());
}

TEST_CASE("a run being created is never seen dead and a probe never makes a lock fail", "[unit]") {
  // A clean running beside `lanes up` once took a run in creation for a dead
  // one (its directory existed before its lock), and its probe of the lock
  // could make the creator's own lock fail.
  TempDir tmp;
  RunRegistry reg((tmp.path / "state").string(), (tmp.path / "owners").string());
  RunRegistry other((tmp.path / "other").string(), (tmp.path / "owners").string());
  const std::string churn = "churn1";
  { REQUIRE(other.create(churn).ok()); }
  std::atomic<bool> done{false};
  std::atomic<int> seen_dead{0}, probes{0};
  std::thread cleaner([&] {
    while (!done) {
      for (const auto& id : reg.list()) {
        ++probes;
        if (!reg.assess(id).live) ++seen_dead;
      }
      CleanPlan plan = plan_clean(reg, false);
      seen_dead += static_cast<int>(plan.targets.size() + plan.hidden_dirs.size());
      (void)other.in_use(churn);
    }
  });
  std::vector<RunLock> held;
  int lock_failures = 0;
  for (int i = 0; i < 300; ++i) {
    auto l = reg.create(reg.new_id());
    if (l) held.push_back(std::move(l).value());
    else ++lock_failures;
    // another lanes process (another open file) locking and releasing a
    // run while the probes run: never refused
    for (int k = 0; k < 5; ++k)
      if (!other.lock(churn, false)) ++lock_failures;
  }
  done = true;
  cleaner.join();
  CHECK(probes > 0);
  CHECK(lock_failures == 0);
  CHECK(seen_dead == 0);
  CHECK(reg.list().size() == 300);
}

TEST_CASE("a creator or remover killed mid-way leaves a hidden directory a clean removes", "[unit]") {
  TempDir tmp;
  RunRegistry reg((tmp.path / "state").string(), (tmp.path / "owners").string());
  std::string made = reg.base() + "/.new-abc1", gone = reg.base() + "/.gone-abc2";
  for (const auto& d : {made, gone}) {
    std::filesystem::create_directories(d);
    std::ofstream(d + "/lock");
    std::ofstream(d + "/state.json") << "{}";
  }
  CHECK(reg.list().empty());  // neither is a run
  auto plan = plan_clean(reg, false);
  std::sort(plan.hidden_dirs.begin(), plan.hidden_dirs.end());
  CHECK(plan.hidden_dirs == std::vector<std::string>{gone, made});
  // ones still being worked on (locked) are not
  auto l1 = RunRegistry::lock_file(made + "/lock", false);
  auto l2 = RunRegistry::lock_file(gone + "/lock", false);
  REQUIRE(l1.ok());
  REQUIRE(l2.ok());
  CHECK(plan_clean(reg, false).hidden_dirs.empty());
}

TEST_CASE("removing a run's directory never shows a half-removed run", "[unit]") {
  TempDir tmp;
  RunRegistry reg((tmp.path / "state").string(), (tmp.path / "owners").string());
  std::atomic<bool> done{false};
  std::atomic<int> seen_dead{0};
  std::thread watcher([&] {
    while (!done)
      for (const auto& id : reg.list())
        if (auto h = reg.assess(id); !h.live && reg.exists(id)) ++seen_dead;  // not merely gone since
  });
  for (int i = 0; i < 200; ++i) {
    std::string id = reg.new_id();
    auto l = reg.create(id);
    REQUIRE(l.ok());
    RunState s;
    s.id = id;
    s.phase = "stopping";
    for (int k = 0; k < 20; ++k) std::ofstream(reg.dir(id) + "/log" + std::to_string(k)) << "x";
    REQUIRE(reg.save(s).ok());
    REQUIRE(reg.remove_dir(id).ok());  // with the lock held, as remove_run does
    CHECK_FALSE(reg.owner_of(id).has_value());
  }
  done = true;
  watcher.join();
  CHECK(seen_dead == 0);
  CHECK(reg.list().empty());
  CHECK(reg.hidden_dirs().empty());
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

TEST_CASE("daemon whose program cannot be executed is a clear error", "[unit]") {
  ProcessSpec spec{"ghost", {"/nonexistent/lanes-no-such-program"}};
  auto d = Daemon::start(spec);
  REQUIRE_FALSE(d.ok());
  CHECK(std::string(d.error().what()).find("ghost") != std::string::npos);
}

// Children of this process whose command is NAME (zombies included).
static int children_named(const std::string& name) {
  int n = 0;
  for (pid_t p : list_pids()) {
    std::ifstream in("/proc/" + std::to_string(p) + "/stat");
    std::string line;
    std::getline(in, line);
    auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::string comm = line.substr(line.find('(') + 1, close - line.find('(') - 1);
    std::istringstream rest(line.substr(close + 2));
    std::string state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == ::getpid() && comm == name) ++n;
  }
  return n;
}

TEST_CASE("a child that cannot enter its namespace is an error and never runs", "[unit]") {
  // not a namespace: setns fails in the child, which must end there, not
  // run on in the namespace it was started from
  int before = children_named("sleep");
  Fd not_ns(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  ProcessSpec spec{"astray", {"sleep", "60"}};
  spec.netns_fd = not_ns.get();
  auto d = Daemon::start(spec);
  REQUIRE_FALSE(d.ok());
  CHECK(std::string(d.error().what()).find("network namespace") != std::string::npos);
  CHECK(children_named("sleep") == before);  // reaped, not left running or a zombie
  auto c = run_capture(spec, std::chrono::seconds(2));
  REQUIRE_FALSE(c.ok());
  CHECK(std::string(c.error().what()).find("network namespace") != std::string::npos);
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

TEST_CASE("the CPU's busy share from two readings of /proc/stat", "[unit]") {
  auto a = parse_cpu_times("intr 5\ncpu  100 0 50 800 10 5 5 0 0 0\ncpu0 50 0 25 400 5 2 3 0\n");
  REQUIRE(a);
  CHECK(a->busy == 160);
  CHECK(a->total == 970);
  auto b = parse_cpu_times("cpu  160 0 70 880 10 5 25 0 0 0\n");
  REQUIRE(b);
  CHECK(busy_share(*a, *b) == Approx(100.0 / 180));  // 100 busy of 180 jiffies
  CHECK(busy_share(*b, *a) == 0);                     // backwards: no time passed
  CHECK(busy_share(*a, *a) == 0);
  CHECK(parse_cpu_times("cpu  1 2 3 4\n")->total == 10);  // an old kernel's four fields
  CHECK_FALSE(parse_cpu_times("cpu0 1 2 3 4\n"));
  CHECK_FALSE(parse_cpu_times("cpu  x\n"));
  auto now = read_cpu_times();
  REQUIRE(now);
  CHECK(now->total >= now->busy);
}
