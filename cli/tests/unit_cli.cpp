#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "lanes/cli/graph.hpp"
#include "lanes/testbed/netns.hpp"
#include "lanes/testbed/topology_loader.hpp"
#include "over_slurm.hpp"
#include "support.hpp"

using lanes::test::lanes_bin;
using lanes::test::run_command;
using lanes::test::topology;
using lanes::test::source_dir;

TEST_CASE("lanes validate exits 0 for good files and 2 with file:line for bad ones", "[unit]") {
  auto ok = run_command(lanes_bin() + " validate " + topology("laptop.xml") + " " + topology("rack-64.xml"));
  CHECK(ok.status == 0);
  CHECK(ok.out.find("64 hosts (256 NICs)") != std::string::npos);

  auto dir = std::filesystem::temp_directory_path() / ("lanes-cli-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto bad = (dir / "bad.xml").string();
  std::ofstream(bad) << "<topology>\n<rack name='r'>\n<host name='h' nics='0'/>\n</rack>\n</topology>\n";
  auto r = run_command(lanes_bin() + " validate " + bad);
  CHECK(r.status == 2);
  CHECK(r.out.find(bad + ":3: <host> nics=\"0\"") != std::string::npos);
  auto missing = run_command(lanes_bin() + " validate " + (dir / "nope.xml").string());
  CHECK(missing.status == 2);
  CHECK(missing.out.find("nope.xml: cannot read the") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("lanes up with a bad topology exits 2 and creates nothing", "[unit]") {
  auto dir = std::filesystem::temp_directory_path() / ("lanes-cli-up-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto bad = (dir / "bad.xml").string();
  std::ofstream(bad) << "<topology>\n<rack name='r'>\n<host name='h' rate='fast'/>\n</rack>\n</topology>\n";
  auto r = run_command("LANES_STATE_DIR=" + (dir / "state").string() + " " + lanes_bin() + " up " + bad +
                       " --run-id zz9");
  CHECK(r.status == 2);
  CHECK(r.out.find(bad + ":3:") != std::string::npos);
  CHECK(lanes::testbed::list_netns("lanes-zz9-").empty());
  CHECK_FALSE(std::filesystem::exists(dir / "state" / "zz9"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("command line errors exit 2 and --help exits 0 on every command", "[unit]") {
  CHECK(run_command(lanes_bin() + " frobnicate").status == 2);
  CHECK(run_command(lanes_bin()).status == 2);
  CHECK(run_command(lanes_bin() + " up").status == 2);
  CHECK(run_command(lanes_bin() + " up " + topology("laptop.xml") + " --run-id BAD-ID").status == 2);
  CHECK(run_command(lanes_bin() + " up " + topology("laptop.xml") + " --bogus").status == 2);
  CHECK(run_command(lanes_bin() + " graph " + topology("laptop.xml") + " --format png").status == 2);
  CHECK(run_command(lanes_bin() + " exec r1 h1").status == 2);
  CHECK(run_command(lanes_bin() + " --log-level loud status").status == 2);
  for (const char* d : {"soon", "0s", "-5s"}) {
    INFO("--deadline " << d);
    auto r = run_command(lanes_bin() + " run " + source_dir() + "/scenarios/lossy-nic.xml --deadline " + d);
    CHECK(r.status == 2);
    CHECK(r.out.find("--deadline") != std::string::npos);
  }
  for (const char* c : {"validate", "up", "status", "exec", "down", "clean", "graph", "features"}) {
    INFO(c);
    auto r = run_command(lanes_bin() + " " + c + " --help");
    CHECK(r.status == 0);
    CHECK(r.out.find(std::string("usage: lanes ") + c) != std::string::npos);
  }
  auto main_help = run_command(lanes_bin() + " --help");
  CHECK(main_help.status == 0);
  CHECK(main_help.out.find("Exit codes: 0 ok, 1 failure, 2 bad input") != std::string::npos);
}

TEST_CASE("lanes graph prints DOT and Mermaid", "[unit]") {
  auto dot = run_command(lanes_bin() + " graph " + topology("laptop.xml"));
  CHECK(dot.status == 0);
  CHECK(dot.out.find("graph \"laptop\"") != std::string::npos);
  auto mm = run_command(lanes_bin() + " graph --format mermaid " + topology("laptop.xml"));
  CHECK(mm.status == 0);
  CHECK(mm.out.find("flowchart TB") != std::string::npos);
}

TEST_CASE("lanes validate and graph --machines show the placement, what cannot be split is refused", "[unit]") {
  auto v = run_command(lanes_bin() + " validate " + topology("fabric-256.xml") + " --machines 4");
  CHECK(v.status == 0);
  CHECK(v.out.find("machine 3: 64 hosts (256 NICs), 2 switches") != std::string::npos);
  CHECK(v.out.find("12 links cross between machines") != std::string::npos);
  // each machine's share of the footprint: 64 job hosts (host agent and
  // injector each), 2 switches (gobgpd, FIB agent), the supervisor
  // (fabric-256 runs no BFD)
  CHECK(v.out.find("6 tunnels, about 133 daemons in") != std::string::npos);
  auto too_many = run_command(lanes_bin() + " validate " + topology("laptop.xml") + " --machines 2");
  CHECK(too_many.status == 2);
  CHECK(too_many.out.find("laptop.xml:4: 1 rack cannot be split over 2 machines") != std::string::npos);
  CHECK(run_command(lanes_bin() + " validate " + topology("laptop.xml") + " --machines 0").status == 2);
  CHECK(run_command(lanes_bin() + " validate " + source_dir() + "/scenarios/nic-failover.xml --machines 2").status ==
        2);
  auto g = run_command(lanes_bin() + " graph " + topology("two-racks.xml") + " --machines 2");
  CHECK(g.status == 0);
  CHECK(g.out.find("subgraph \"cluster_machine_1\"") != std::string::npos);
  CHECK(g.out.find("style=dashed") != std::string::npos);
}

TEST_CASE("lanes status with no runs says so in text and JSON", "[unit]") {
  auto dir = std::filesystem::temp_directory_path() / ("lanes-cli-st-" + std::to_string(::getpid()));
  std::string env = "LANES_STATE_DIR=" + dir.string() + " ";
  auto r = run_command(env + lanes_bin() + " status");
  CHECK(r.status == 0);
  CHECK(r.out.find("no runs") != std::string::npos);
  auto j = run_command(env + lanes_bin() + " status --json");
  CHECK(j.status == 0);
  CHECK(j.out.find("\"runs\": []") != std::string::npos);
  CHECK(run_command(env + lanes_bin() + " status nosuch").status == 2);
  std::filesystem::remove_all(dir);
}

TEST_CASE("graph output draws every node and link", "[unit]") {
  auto t = lanes::testbed::load_topology(topology("two-racks.xml"));
  std::string dot = lanes::cli::to_dot(t);
  CHECK(dot.rfind("graph \"two-racks\" {", 0) == 0);
  for (const auto& n : t.nodes) CHECK(dot.find("\"" + n.name + "\"") != std::string::npos);
  CHECK(dot.find("\"spine1\" -- \"r1-tor\"") != std::string::npos);
  CHECK(dot.find("\"r1-tor\" -- \"r1h1\" [label=\"4 x 500mbit\"]") != std::string::npos);
  CHECK(dot.find("subgraph \"cluster_r2\"") != std::string::npos);
  std::string mm = lanes::cli::to_mermaid(t);
  CHECK(mm.rfind("flowchart TB", 0) == 0);
  CHECK(mm.find("n_spine1 --- n_r1_tor") != std::string::npos);
  CHECK(mm.find("n_r2_tor ---|\"4 x 500mbit\"| n_r2h2") != std::string::npos);
  // over two machines: r1 with spine1 on 0, r2 on 1; spine1-r2 is a tunnel
  auto p = lanes::testbed::place(t, 2);
  std::string pd = lanes::cli::to_dot(t, &p);
  CHECK(pd.find("\"spine1\" -- \"r2-tor\" [label=\"VXLAN\", style=dashed]") != std::string::npos);
  CHECK(pd.find("\"spine1\" -- \"r1-tor\";") != std::string::npos);
  std::string pm = lanes::cli::to_mermaid(t, &p);
  CHECK(pm.find("n_spine1 -.-|\"VXLAN\"| n_r2_tor") != std::string::npos);
  CHECK(pm.find("subgraph machine_1[\"machine 1\"]") != std::string::npos);
}

TEST_CASE("lanes switch-config prints FRR's three configurations for an frr switch and refuses --agent there",
          "[unit]") {
  auto dir = std::filesystem::temp_directory_path() / ("lanes-cli-frr-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string file = (dir / "frr.xml").string();
  std::ofstream(file) << R"(<topology><spine name="s"/><rack name="r" switch-stack="frr"><host name="h"/></rack>
<rack name="q"><host name="g"/></rack><link a="s" b="r-tor"/><link a="s" b="q-tor"/></topology>)";
  auto r = run_command(lanes_bin() + " switch-config " + file + " r-tor");
  CHECK(r.status == 0);
  for (const char* part : {"! ---- zebra.conf", "! ---- staticd.conf", "! ---- bgpd.conf", "router bgp "})
    CHECK(r.out.find(part) != std::string::npos);
  auto agent = run_command(lanes_bin() + " switch-config " + file + " r-tor --agent");
  CHECK(agent.status == 2);
  CHECK(agent.out.find("runs FRR") != std::string::npos);
  auto gobgp = run_command(lanes_bin() + " switch-config " + file + " q-tor");
  CHECK(gobgp.status == 0);
  CHECK(gobgp.out.find("[global.config]") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a shard says converged each time its switches become whole, again after a flap", "[unit]") {
  using lanes::cli::commands::shard_word;
  auto conv = [](size_t full, size_t present) {
    lanes::switches::Convergence c;
    c.task_ips = 128;
    c.aggregates = 12;
    c.task_ips_full = full;
    c.aggregates_present = present;
    return c;
  };
  std::optional<lanes::switches::Convergence> last;
  auto step = [&](lanes::switches::Convergence now) {
    auto w = shard_word(last, now);
    last = now;
    return w;
  };
  CHECK(step(conv(0, 0)) == "progress");  // the first word
  CHECK(step(conv(0, 0)).empty());        // nothing moved
  CHECK(step(conv(96, 12)) == "progress");
  CHECK(step(conv(128, 12)) == "converged");
  CHECK(step(conv(128, 12)).empty());  // said once while it holds
  // a session flaps on a busy machine: routes go, then come back
  CHECK(step(conv(124, 12)) == "progress");
  CHECK(step(conv(128, 12)) == "converged");  // the last word is converged again (it stayed "progress" before)
  last.reset();
  CHECK(step(conv(128, 12)) == "converged");  // whole at the first look
}
