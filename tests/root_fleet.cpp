// Fleet-size runs of the lanes command: the machine-wide limits (the
// kernel's neighbour tables, which every namespace shares) and runs side by
// side. Each runs alone (RUN_SERIAL): they load both cores for seconds.

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "root_snapshot.hpp"
#include "support.hpp"

using lanes::test::lanes_bin;
using lanes::test::OwnStateDir;
using lanes::test::require_root;
using lanes::test::run_command;
using lanes::test::topology;

namespace {

// table_fulls of the kernel's ARP and ND tables (shared by every namespace):
// the last column of /proc/net/stat/{arp,ndisc}_cache, summed over CPUs
uint64_t neighbour_table_fulls() {
  uint64_t total = 0;
  for (const char* f : {"/proc/net/stat/arp_cache", "/proc/net/stat/ndisc_cache"}) {
    std::ifstream in(f);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      auto sp = line.find_last_of(' ');
      total += std::stoull(line.substr(sp + 1), nullptr, 16);
    }
  }
  return total;
}

// Every BGP session of every switch of RUN, and how many are established.
std::pair<size_t, size_t> sessions_of(const std::string& env, const std::string& run) {
  auto st = run_command(env + lanes_bin() + " status " + run + " --full --json");
  auto j = nlohmann::json::parse(st.out);
  size_t all = 0, established = 0;
  for (const auto& n : j["nodes"])
    if (n.contains("bgp"))
      for (const auto& s : n["bgp"]["sessions"]) {
        ++all;
        established += s["state"] == "established";
      }
  return {all, established};
}

}  // namespace

TEST_CASE("fabric-256 converges without filling the kernel's neighbour tables", "[root][fleet]") {
  // 256 hosts x 4 NICs and their containers: over 1100 links, which as
  // dynamic ARP/ND entries overflowed the machine-wide gc_thresh3
  require_root();
  OwnStateDir state("fabric-256");
  uint64_t fulls_before = neighbour_table_fulls();
  auto root_before = lanes::test::snapshot_root_ns();
  auto up = run_command(state.env() + lanes_bin() + " up " + topology("fabric-256.xml") + " --wait 180s --json");
  INFO(up.out);
  REQUIRE(up.out.find('{') != std::string::npos);
  auto j = nlohmann::json::parse(up.out.substr(up.out.find('{')));
  std::string id = j["run_id"];
  lanes::test::DownAtEnd down(state.env(), id);  // the run goes, whatever is checked below
  CHECK(up.status == 0);
  CHECK(j["converged"]["done"] == true);
  CHECK(j["converged"]["task_ips_full"] == 512);  // 256 task IPs, IPv4 and IPv6, 4 next hops each
  CHECK(j["converged"]["aggregates_present"] == j["converged"]["aggregates"]);
  auto [all, established] = sessions_of(state.env(), id);
  std::printf("fabric-256: converged %d ms after its daemons; %zu of %zu sessions established\n",
              j["converged"]["after_ms"].get<int>(), established, all);
  CHECK(all == 256 * 4 + 4 * 4 * 2);  // host NICs, and rack <-> spine from both ends
  CHECK(established == all);
  // the summary a run of more than 64 hosts gets says the same
  auto sum = run_command(state.env() + lanes_bin() + " status " + id + " --json");
  auto s = nlohmann::json::parse(sum.out);
  CHECK(s["view"] == "summary");
  size_t sessions = 0, sw_up = 0, nics = 0, nics_up = 0, inj = 0, inj_up = 0;
  for (const auto& x : s["switches"]) sessions += x["sessions"].get<size_t>(), sw_up += x["established"].get<size_t>();
  for (const auto& r : s["racks"]) {
    nics += r["nics"].get<size_t>(), nics_up += r["nics_up"].get<size_t>();
    inj += r["injector_sessions"].get<size_t>(), inj_up += r["injector_established"].get<size_t>();
  }
  CHECK(s["switches"].size() == 8);
  CHECK(sessions == all);
  CHECK(sw_up == all);
  CHECK(nics == 1024);
  CHECK(nics_up == 1024);
  CHECK(inj == 1024);
  CHECK(inj_up == 1024);
  CHECK(neighbour_table_fulls() == fulls_before);
  CHECK(run_command(state.env() + lanes_bin() + " down " + id).status == 0);
  // up and down of a fabric left the root namespace as it was
  auto root_after = lanes::test::snapshot_root_ns();
  for (const auto& [k, v] : root_before) {
    INFO(k);
    CHECK(root_after[k] == v);
  }
  CHECK(root_after.size() == root_before.size());
}

TEST_CASE("a fabric as a user writes it, with every default, converges: BFD fitted to the machine", "[root][fleet]") {
  // 12 racks of 48 hosts, half with 4 NICs and half with 2, two spines,
  // and no bfd-interval, hold-time or rate: 1728 BFD sessions, which at
  // 100 ms send 34 560 packets a second, more than two cores carry: before
  // lanes fitted the default to the machine this fabric never converged
  // (lanes up --wait 180s returned after 552 s with 0 of 1152 task IPs)
  require_root();
  OwnStateDir state("user-fabric");
  std::filesystem::create_directories(state.path);
  std::string file = state.path + "/user-fabric.xml";
  {
    std::ofstream o(file);
    o << "<topology name=\"user-fabric\"><spine name=\"sp\" count=\"2\" asn=\"65000\"/>\n";
    for (int r = 1; r <= 12; ++r)
      o << "<rack name=\"u" << r << "\"><host name=\"u" << r << "a\" count=\"24\" nics=\"4\"><job/></host>"
        << "<host name=\"u" << r << "b\" count=\"24\" nics=\"2\"><job/></host></rack>\n<link a=\"sp1\" b=\"u" << r
        << "-tor\"/><link a=\"sp2\" b=\"u" << r << "-tor\"/>\n";
    o << "</topology>\n";
  }
  auto up = run_command(state.env() + lanes_bin() + " up " + file + " --wait 240s --json");
  INFO(up.out);
  REQUIRE(up.out.find('{') != std::string::npos);
  auto j = nlohmann::json::parse(up.out.substr(up.out.find('{')));
  std::string id = j["run_id"];
  lanes::test::DownAtEnd down(state.env(), id);  // the run goes, whatever is checked below
  CHECK(up.status == 0);
  CHECK(j["converged"]["done"] == true);
  CHECK(j["converged"]["task_ips_full"] == 1152);  // 576 task IPs, both families, a next hop per NIC
  std::printf("user fabric (576 hosts, 1728 NICs, defaults): converged %d ms after its daemons, which took %.0f ms\n%s",
              j["converged"]["after_ms"].get<int>(), j["timings_ms"]["switches"].get<double>(),
              up.out.substr(0, up.out.find('{')).c_str());
}

TEST_CASE("two rack-64 runs side by side both converge", "[root][fleet]") {
  require_root();
  OwnStateDir state("two-rack-64");
  uint64_t fulls_before = neighbour_table_fulls();
  std::vector<std::string> ids;
  for (int i = 0; i < 2; ++i) {
    auto up = run_command(state.env() + lanes_bin() + " up " + topology("rack-64.xml") + " --wait 120s --json");
    INFO(up.out);
    REQUIRE(up.out.find('{') != std::string::npos);
    auto j = nlohmann::json::parse(up.out.substr(up.out.find('{')));
    ids.push_back(j["run_id"]);
    CHECK(up.status == 0);
    CHECK(j["converged"]["task_ips_full"] == 128);
  }
  // the first is still whole with the second beside it
  for (const auto& id : ids) {
    auto [all, established] = sessions_of(state.env(), id);
    CHECK(all == 256);
    CHECK(established == all);
  }
  CHECK(neighbour_table_fulls() == fulls_before);
  for (const auto& id : ids) CHECK(run_command(state.env() + lanes_bin() + " down " + id).status == 0);
}
