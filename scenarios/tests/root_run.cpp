// root tier: `lanes run` interrupted with Ctrl-C (SIGINT) in the middle of a
// workload exits 130, keeps its partial results and leaves nothing behind.

#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lanes/testbed/netlink.hpp"
#include "lanes/testbed/netns.hpp"
#include "lanes/testbed/process.hpp"
#include "lanes/testbed/run_registry.hpp"
#include "root_support.hpp"

using namespace lanes::testbed;

TEST_CASE("lanes run interrupted mid-workload exits 130 and leaves nothing behind", "[root]") {
  lanes::test::require_root();
  auto dir = std::filesystem::temp_directory_path() / ("lanes-interrupt-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string file = (dir / "long.xml").string();
  std::ofstream(file) << "<scenario name=\"long\" description=\"a restore long enough to interrupt\">\n"
                      << "<topology file=\"" << LANES_SOURCE_DIR << "/topologies/laptop.xml\" egress=\"bpf\"/>\n"
                      << "<phase name=\"p\"><converge/>\n"
                      << "<workload name=\"restore\" type=\"checkpoint-restore\" host=\"h1\" server=\"storage\" "
                         "bytes=\"20G\" flows=\"8\"/>\n"
                      << "</phase><assert type=\"bytes-verified\"/></scenario>\n";
  std::string out = (dir / "out").string();
  // a run id of our own (PREFIX1), to watch the restore's bytes leave storage
  std::string prefix = "it" + std::to_string(::getpid() % 100000);
  ProcessSpec spec{"lanes run", {lanes::test::lanes_bin(), "run", file, "--out", out, "-q", "--run-id", prefix}};
  spec.log_path = (dir / "run.log").string();
  auto d = Daemon::start(spec);
  REQUIRE(d.ok());
  // wait for the restore to be under way
  std::string steps = out + "/long/steps.log";
  REQUIRE(lanes::test::eventually(
      [&] {
        std::ifstream in(steps);
        std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        return all.find("workload restore (checkpoint-restore) started") != std::string::npos;
      },
      std::chrono::seconds(60)));
  {
    auto ns = Netns::open(RunRegistry::netns_name(prefix + "1", "storage"));
    REQUIRE(ns.ok());
    auto nl = Netlink::open_in(ns.value().fd(), "storage");
    REQUIRE(nl.ok());
    CHECK(lanes::test::traffic_flowing(nl.value(), {"eth0"}, 50'000'000));
  }
  ::kill(d.value().pid(), SIGINT);
  CHECK(d.value().wait() == 130);
  // what it measured so far is written; the run it built is gone
  std::ifstream in(out + "/results.json");
  REQUIRE(in);
  auto results = nlohmann::json::parse(in);
  auto sc = results["scenarios"].at(0);
  CHECK(sc["passed"] == false);
  CHECK(sc["error"].get<std::string>().find("interrupted") != std::string::npos);
  std::string run_id = sc["phases"].at(0)["run_id"];
  REQUIRE(!run_id.empty());
  CHECK(list_netns(RunRegistry::netns_prefix(run_id)).empty());
  CHECK_FALSE(RunRegistry().exists(run_id));
  std::filesystem::remove_all(dir);
}
