// root tier: the user's own egress BPF program (<job egress="bpf"
// program="FILE.bpf.o">) in place of lanes' datapath. Objects that do not
// fit the ABI (no lanes_egress, a nics map of the wrong size, not an ELF
// object) are refused at bring-up with the reason and leave nothing; a
// deliberately bad one that loads (every packet out of NIC 0) carries every
// byte, and the egress half of throughput-4x then fails as it must.

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "lanes/testbed/netns.hpp"
#include "lanes/testbed/process.hpp"
#include "lanes/testbed/run_registry.hpp"
#include "root_support.hpp"

using namespace lanes::testbed;

namespace {

std::string topology(const std::string& program) {
  return R"(<topology name="own-program">
  <rack name="r1">
    <host name="h" count="1" nics="4" rate="200mbit"><job name="train" egress="bpf" program=")" +
         program + R"("/></host>
    <server name="storage" role="storage"/>
  </rack>
</topology>
)";
}

const char* kScenario = R"(<scenario name="own-program" description="egress through the user's program">
  <topology file="own-program.xml"/>
  <phase name="one-nic" nics="1" egress="single">
    <converge/>
    <workload name="save" type="checkpoint-save" host="h1" server="storage" bytes="100M" flows="16"/>
  </phase>
  <phase name="four-nics">
    <converge/>
    <workload name="save" type="checkpoint-save" host="h1" server="storage" bytes="100M" flows="16"/>
  </phase>
  <assert type="throughput-ratio" workload="save" phase="four-nics" baseline="one-nic" min="3.8" max="4.2"/>
  <assert type="nic-share" workload="save" phase="four-nics" expected="25" tolerance="2.5"/>
  <assert type="connection-errors"/>
  <assert type="bytes-verified"/>
</scenario>
)";

std::filesystem::path scratch(const std::string& what) {
  auto dir = std::filesystem::temp_directory_path() / ("lanes-prog-" + what + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("an egress program that does not fit lanes' ABI is refused at bring-up with the reason, nothing left",
          "[root]") {
  lanes::test::require_root();
  auto dir = scratch("bad");
  std::ofstream(dir / "not-elf.bpf.o") << "this is not an ELF object\n";
  struct Case {
    std::string object, says;
  };
  for (const auto& c : {Case{std::string(LANES_TEST_BPF_DIR) + "/bad_map.bpf.o",
                             "map nics has 4-byte keys and 4-byte values; lanes expects 4 and "},
                        Case{std::string(LANES_TEST_BPF_DIR) + "/no_program.bpf.o", "no program lanes_egress"},
                        Case{(dir / "not-elf.bpf.o").string(), "not a BPF object libbpf can open"}}) {
    INFO(c.object);
    std::ofstream(dir / "t.xml", std::ios::trunc) << topology(c.object);
    std::string id = "prog" + std::to_string(::getpid() % 10000);
    ProcessSpec up{"lanes up", {lanes::test::lanes_bin(), "up", (dir / "t.xml").string(), "--run-id", id}};
    up.log_path = (dir / "up.log").string();
    auto u = run_capture(up, std::chrono::seconds(120));
    REQUIRE(u.ok());
    std::ifstream in(dir / "up.log");
    std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    INFO(log);
    CHECK(u.value().status != 0);
    CHECK(log.find("h1's egress program") != std::string::npos);
    CHECK(log.find(c.says) != std::string::npos);
    CHECK(list_netns(RunRegistry::netns_prefix(id)).empty());
    // a failed start keeps its logs for the user (/tmp/lanes-failed-<id>): this test's are its own to remove
    std::error_code ec;
    std::filesystem::remove_all("/tmp/lanes-failed-" + id, ec);
  }
  // lanes validate reads the object too, and builds nothing
  std::ofstream(dir / "t.xml", std::ios::trunc) << topology(std::string(LANES_TEST_BPF_DIR) + "/no_program.bpf.o");
  auto bad = lanes::test::run_command(lanes::test::lanes_bin() + " validate " + (dir / "t.xml").string());
  CHECK(bad.status == 2);
  CHECK(bad.out.find("h1's egress program: ") != std::string::npos);
  CHECK(bad.out.find("no program lanes_egress") != std::string::npos);
  // a program that does not exist is the topology's error, with its line
  std::ofstream(dir / "t.xml", std::ios::trunc) << topology("missing.bpf.o");
  auto v = lanes::test::run_command(lanes::test::lanes_bin() + " validate " + (dir / "t.xml").string());
  CHECK(v.status == 2);
  CHECK(v.out.find("t.xml:3: <job> program=\"missing.bpf.o\": no such file") != std::string::npos);
  std::filesystem::remove_all(dir);
}

namespace {

// The egress half of throughput-4x with PROGRAM as h1's egress: its results
nlohmann::json run_save(const std::string& what, const std::string& program, int& status) {
  auto dir = scratch(what);
  std::ofstream(dir / "own-program.xml") << topology(program);
  std::ofstream(dir / "scenario.xml") << kScenario;
  auto r = lanes::test::lanes_run(dir, "scenario.xml");
  std::filesystem::remove_all(dir);
  status = r.status;
  return r.scenario;
}

// assertion type (the first word of its name) -> passed
std::map<std::string, bool> verdicts(const nlohmann::json& sc) {
  std::map<std::string, bool> v;
  for (const auto& a : sc["assertions"]) {
    std::string name = a.value("name", "");
    v[name.substr(0, name.find(' '))] = a.value("passed", false);
  }
  return v;
}

}  // namespace

TEST_CASE("a user's egress program that puts every flow on NIC 0 carries every byte and fails the egress ratio",
          "[root]") {
  lanes::test::require_root();
  int status = -1;
  auto sc = run_save("nic0", std::string(LANES_TEST_BPF_DIR) + "/nic0.bpf.o", status);
  INFO(sc.dump(1).substr(0, 4000));
  CHECK(status == 1);  // the scenario failed, as it must
  CHECK(sc["passed"] == false);
  CHECK(sc.value("error", "").empty());  // it ran: the failure is the figures'
  auto v = verdicts(sc);
  CHECK(v.at("throughput-ratio") == false);
  CHECK(v.at("nic-share") == false);
  CHECK(v.at("connection-errors") == true);
  CHECK(v.at("bytes-verified") == true);
  // NIC 0 carried the save: the three others nothing
  for (const auto& a : sc["assertions"])
    if (a.value("name", "").rfind("nic-share", 0) == 0) CHECK(a.value("measured", "").rfind("100.0% ", 0) == 0);
}

TEST_CASE("a correct user's egress program (lanes' datapath built as a user's object) passes the egress ratio",
          "[root]") {
  lanes::test::require_root();
  int status = -1;
  auto sc = run_save("datapath", std::string(LANES_TEST_BPF_DIR) + "/datapath.bpf.o", status);
  INFO(sc.dump(1).substr(0, 4000));
  CHECK(status == 0);
  CHECK(sc["passed"] == true);
  for (const auto& [type, ok] : verdicts(sc)) {
    INFO(type);
    CHECK(ok);
  }
}
