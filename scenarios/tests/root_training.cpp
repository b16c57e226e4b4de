// lanes-traffic training and store for real: a job's ranks on the loopback
// of a network namespace of the test's own, killed mid-run and resumed
// from their checkpoint (the root tier: it makes a namespace).

#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "lanes/scenarios/training.hpp"
#include "support.hpp"

using namespace lanes::scenarios::training;

namespace {

// This process in a network namespace of its own, its loopback up: the
// job's traffic never leaves it. false: the kernel refused.
bool own_netns() {
  if (::unshare(CLONE_NEWNET) != 0) return false;
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  bool up = s >= 0 && ::ioctl(s, SIOCGIFFLAGS, &ifr) == 0 && (ifr.ifr_flags |= IFF_UP, ::ioctl(s, SIOCSIFFLAGS, &ifr) == 0);
  if (s >= 0) ::close(s);
  return up;
}

// HELD: with SIGUSR1 blocked, so that --wait-go waits for it
pid_t spawn(const std::vector<std::string>& args, const std::string& out, bool held = false) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (!std::freopen(out.c_str(), "a", stdout)) ::_exit(127);
    sigset_t s;
    sigemptyset(&s);
    if (held) sigaddset(&s, SIGUSR1);
    ::sigprocmask(SIG_SETMASK, &s, nullptr);
    std::vector<std::string> a = args;
    std::vector<char*> argv;
    for (auto& x : a) argv.push_back(x.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

// a TCP socket of this namespace listens on PORT (the kernel's own table)
bool listening(int port) {
  char want[16];
  std::snprintf(want, sizeof want, ":%04X", port);
  for (const char* f : {"/proc/self/net/tcp", "/proc/self/net/tcp6"}) {
    std::ifstream in(f);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream ss(line);
      std::string sl, local, remote, st;
      ss >> sl >> local >> remote >> st;
      if (st == "0A" && local.size() >= 5 && local.compare(local.size() - 5, 5, want) == 0) return true;
    }
  }
  return false;
}

// every rank printed a step event of at least STEP in its output of RUN
bool all_past(const std::string& dir, int ranks, int run, int step) {
  for (int r = 0; r < ranks; ++r) {
    bool past = false;
    for (const auto& e : read_events(dir + "/rank-" + std::to_string(r) + "." + std::to_string(run) + ".jsonl"))
      past = past || (e.event == "step" && e.step >= step);
    if (!past) return false;
  }
  return true;
}

// A job of RANKS ranks and STEPS steps on the loopback of a namespace of
// its own: killed (every rank, SIGKILL) once every rank is past step
// KILL_AFTER, then started again with --resume; the store ends last.
// Checkpoints saved and restored in FLOWS stripes. Runs in a child; 0 when
// it ran (3: no namespace).
int run_job(const std::string& dir, int ranks, int steps, int kill_after, int flows) {
  if (!own_netns()) return 3;
  std::string bin = (std::filesystem::path(lanes::test::lanes_bin()).parent_path() / "lanes-traffic").string();
  pid_t store = spawn({bin, "store", "--port", "7000", "--ranks", std::to_string(ranks), "--seed", "9"}, dir + "/store.json");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto await = [&](const std::function<bool()>& done) {
    while (!done() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  };
  auto start = [&](int run) {
    std::vector<pid_t> pids;
    for (int r = 0; r < ranks; ++r) {
      std::vector<std::string> a = {bin, "training", "--rank", std::to_string(r), "--ranks", std::to_string(ranks),
                                    "--to", "127.0.0.1", "--port", std::to_string(7100 + r), "--next-port",
                                    std::to_string(7100 + (r + 1) % ranks),
                                    "--gradient", "600000", "--steps", std::to_string(steps), "--compute-ms", "30",
                                    "--checkpoint-every", "2", "--checkpoint", "300000", "--store", "127.0.0.1",
                                    "--store-port", "7000", "--channels", "2", "--incarnation", std::to_string(run),
                                    "--seed", "9", "--timeout", "60", "--wait-go"};
      if (run > 0) a.push_back("--resume");
      if (flows > 1) a.insert(a.end(), {"--checkpoint-flows", std::to_string(flows)});
      pids.push_back(spawn(a, dir + "/rank-" + std::to_string(r) + "." + std::to_string(run) + ".jsonl", true));
    }
    // go once every rank and the store listen: a rank dials the next at once
    await([&] {
      for (int r = 0; r < ranks; ++r)
        if (!listening(7100 + r)) return false;
      return listening(7000);
    });
    for (pid_t p : pids) ::kill(p, SIGUSR1);
    return pids;
  };
  // on the one loopback every rank needs a port of its own: rank r
  // listens on 7100 + r and connects to the next one's
  auto first = start(0);
  await([&] { return all_past(dir, ranks, 0, kill_after); });
  for (pid_t p : first) ::kill(p, SIGKILL);
  for (pid_t p : first) ::waitpid(p, nullptr, 0);
  auto second = start(1);
  for (pid_t p : second) ::waitpid(p, nullptr, 0);
  ::kill(store, SIGTERM);
  ::waitpid(store, nullptr, 0);
  return 0;
}

}  // namespace

TEST_CASE("a training job killed mid-run resumes from the latest checkpoint every rank saved, every byte checked", "[root]") {
  lanes::test::require_root();  // without it: not run, never failed
  // one connection a checkpoint, and four stripes each way (a restore
  // first asks which step, then reads the stripes at once)
  const int flows = GENERATE(1, 4);
  INFO("checkpoint flows: " << flows);
  lanes::test::OwnStateDir dir("training-" + std::to_string(flows));
  std::filesystem::create_directories(dir.path);
  const int ranks = 3, steps = 8;
  pid_t child = ::fork();
  if (child == 0) ::_exit(run_job(dir.path, ranks, steps, 4, flows));
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  std::vector<Event> events;
  for (int run = 0; run < 2; ++run)
    for (int r = 0; r < ranks; ++r) {
      auto e = read_events(dir.path + "/rank-" + std::to_string(r) + "." + std::to_string(run) + ".jsonl");
      events.insert(events.end(), e.begin(), e.end());
    }
  // the first run's checkpoints every rank saved (after steps 1, 3, 5, ...)
  std::map<int, std::set<int>> saved;
  for (const auto& e : events)
    if (e.incarnation == 0 && e.event == "save" && e.verified) saved[e.step].insert(e.rank);
  int resume = resume_step(saved, ranks);
  CHECK(resume >= 4);  // killed past step 4: the checkpoint after step 3 was whole
  int restores = 0;
  for (const auto& e : events)
    if (e.event == "restore") {
      ++restores;
      CHECK(e.incarnation == 1);
      CHECK(e.step == resume - 1);  // the latest whole one, not a later one some rank missed
      CHECK(e.verified);
      CHECK(e.bytes == 300000);
    } else if (e.event == "start" && e.incarnation == 1) {
      CHECK(e.step == resume);
    }
  CHECK(restores == ranks);
  auto f = figures(events, ranks, steps, 0.03);
  CHECK(f["completed"] == true);
  CHECK(f["bytes_verified"] == true);
  CHECK(f["failures"] == 1);
  // the steps lost: those every rank finished in the first run past the
  // checkpoint it resumed from, each done again
  std::map<int, std::set<int>> first_run;
  for (const auto& e : events)
    if (e.incarnation == 0 && e.event == "step") first_run[e.step].insert(e.rank);
  int lost = 0;
  for (const auto& [step, rs] : first_run) lost += step >= resume && static_cast<int>(rs.size()) == ranks;
  INFO("resumed at step " << resume << "; steps every rank finished in the first run: " << first_run.size());
  CHECK(lost >= 1);  // killed past step 4, whose checkpoint comes after step 5
  CHECK(f["steps_lost"].get<int>() == lost);
  CHECK(f["step_s"].size() == static_cast<size_t>(steps));
  // the store checked every save and holds the last step's checkpoint whole
  std::ifstream in(dir.path + "/store.json");
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  auto store = nlohmann::json::parse(last);
  CHECK(store["bad"] == 0);
  CHECK(store["gets"] == ranks * (flows == 1 ? 1 : 1 + flows));
  CHECK(store["served_bytes"] == ranks * 300000);
  auto complete = store["complete_steps"].get<std::vector<int>>();
  CHECK(std::find(complete.begin(), complete.end(), steps - 1) != complete.end());
}
