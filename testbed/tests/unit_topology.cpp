#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <unistd.h>

#include "lanes/testbed/limits.hpp"
#include "lanes/testbed/features.hpp"
#include "lanes/testbed/overrides.hpp"
#include "lanes/testbed/run_registry.hpp"
#include "lanes/testbed/fabric.hpp"
#include "lanes/testbed/topology_loader.hpp"
#include "support.hpp"

using namespace lanes::testbed;
using lanes::test::topology;

namespace {

// Every address the topology uses, checked against the benchmark ranges.
void check_address_plan(const Topology& t) {
  std::set<std::string> seen;
  auto unique = [&](const std::string& a) {
    INFO(a);
    CHECK(seen.insert(a).second);
  };
  for (const auto& l : t.links) {
    CHECK(contains(benchmark_range4(), l.a.addr4.addr));
    CHECK(contains(benchmark_range6(), l.a.addr6.addr));
    CHECK(l.a.addr4.len == 31);
    CHECK(l.a.addr6.len == 127);
    CHECK(l.b.addr4.addr.to_uint() == l.a.addr4.addr.to_uint() + 1);
    CHECK(l.a.ifname.size() <= 15);
    CHECK(l.b.ifname.size() <= 15);
    unique(l.a.addr4.addr.to_string());
    unique(l.b.addr4.addr.to_string());
    unique(l.a.addr6.addr.to_string());
    unique(l.b.addr6.addr.to_string());
  }
  for (const auto& r : t.racks) {
    for (int h : r.hosts) {
      const Node& n = t.nodes[h];
      REQUIRE(n.job);
      CHECK(contains(r.block4, n.job->task_ip4));
      CHECK(contains(r.block6, n.job->task_ip6));
      unique(n.job->task_ip4.to_string());
      unique(n.job->task_ip6.to_string());
      for (const auto& nic : n.nics) {
        CHECK(contains(r.block4, nic.job_addr4.addr));
        unique(nic.job_addr4.addr.to_string());
        unique(nic.job_addr6.addr.to_string());
      }
    }
  }
}

struct BadCase {
  const char* what;
  const char* xml;
  int line;
  const char* message;
};

}  // namespace

TEST_CASE("shipped topologies load with the default address plan", "[unit]") {
  SECTION("laptop") {
    auto t = load_topology(topology("laptop.xml"));
    CHECK(t.name == "laptop");
    CHECK(t.racks.size() == 1);
    CHECK(t.count(NodeKind::host) == 2);
    CHECK(t.count(NodeKind::server) == 1);
    CHECK(t.count(NodeKind::rack_switch) == 1);
    CHECK(t.links.size() == 9);
    const Node& h1 = t.nodes[t.find_node("h1")];
    REQUIRE(h1.nics.size() == 4);
    CHECK(h1.nics[0].rate_bps == 500'000'000);
    CHECK(h1.nics[0].numa == 0);
    CHECK(h1.nics[3].numa == 1);
    CHECK(h1.job->task_ip4.to_string() == "198.19.0.1");
    CHECK(h1.job->task_ip6.to_string() == "2001:2:0:100::1");
    CHECK(t.racks[0].block4.to_string() == "198.19.0.0/22");
    check_address_plan(t);
  }
  SECTION("two-racks") {
    auto t = load_topology(topology("two-racks.xml"));
    CHECK(t.racks.size() == 2);
    CHECK(t.count(NodeKind::spine) == 1);
    CHECK(t.count(NodeKind::host) == 4);
    CHECK(t.racks[1].block4.to_string() == "198.19.4.0/22");
    CHECK(t.racks[1].block6.to_string() == "2001:2:0:101::/64");
    int fabric = 0;
    for (const auto& l : t.links) fabric += l.kind == LinkKind::fabric;
    CHECK(fabric == 2);
    check_address_plan(t);
  }
  SECTION("rack-64") {
    auto t = load_topology(topology("rack-64.xml"));
    CHECK(t.count(NodeKind::host) == 64);
    CHECK(t.links.size() == 64 * 4 + 2);
    CHECK(t.find_node("h64") >= 0);
    CHECK(t.nodes[t.find_node("h64")].job->task_ip4.to_string() == "198.19.0.64");
    check_address_plan(t);
  }
}

TEST_CASE("explicit addresses and rates and NUMA nodes are honoured", "[unit]") {
  auto t = load_topology_text(R"(<topology name="x">
  <addressing infra4="198.18.200.0/24" task4="198.19.128.0/17" rack-block4="24"/>
  <spine name="s" count="2" asn="64512"/>
  <rack name="a" asn="65010" switch="tor-a" block6="2001:2:0:f00::/64">
    <host name="gpu" nics="2" rate="1gbit" numa="1,0">
      <nic index="1" rate="250mbit"/>
      <job name="llm" task-ip4="198.19.128.77" egress="bpf" vip="add-path"/>
    </host>
  </rack>
  <server name="ps" role="param" attach="s1" rate="2gbit"/>
</topology>)",
                              "x.xml");
  const Node& gpu = t.nodes[t.find_node("gpu")];
  CHECK(gpu.nics[0].rate_bps == 1'000'000'000);
  CHECK(gpu.nics[1].rate_bps == 250'000'000);
  CHECK(gpu.nics[0].numa == 1);
  CHECK(gpu.job->name == "llm");
  CHECK(gpu.job->task_ip4.to_string() == "198.19.128.77");
  CHECK(gpu.job->task_ip6.to_string() == "2001:2:0:f00::1");
  CHECK(gpu.job->egress == EgressMode::bpf);
  CHECK(gpu.job->vip == VipMode::add_path);
  CHECK(t.find_node("s1") >= 0);
  CHECK(t.find_node("s2") >= 0);
  CHECK(t.nodes[t.find_node("tor-a")].asn == 65010);
  CHECK(t.links[0].a.addr4.addr.to_string() == "198.18.200.0");
  int ps = t.find_node("ps");
  bool attached = false;
  for (const auto& l : t.links)
    if (l.b.node == ps && l.a.node == t.find_node("s1") && l.rate_bps == 2'000'000'000) attached = true;
  CHECK(attached);
  // default CLOS wiring: both spines to the rack switch
  int fabric = 0;
  for (const auto& l : t.links) fabric += l.kind == LinkKind::fabric;
  CHECK(fabric == 2);
}

TEST_CASE("bad topologies are reported as file:line: message", "[unit]") {
  const BadCase cases[] = {
      {"not XML", "<topology name='x'>\n<rack name='r'>\n</topology>", 3, "not well-formed XML"},
      {"wrong root", "<net/>", 1, "root element must be <topology>"},
      {"unknown element", "<topology>\n<rack name='r'>\n<hots name='h'/>\n</rack>\n</topology>", 3,
       "<hots> is not allowed inside <rack>"},
      {"unknown attribute", "<topology>\n<rack name='r' colour='red'/>\n</topology>", 2,
       "unknown attribute 'colour'"},
      {"bad count", "<topology>\n<rack name='r'>\n<host name='h' count='-3'/>\n</rack>\n</topology>", 3,
       "count=\"-3\": expected an integer from 1 to 4096"},
      {"bad rate", "<topology>\n<rack name='r'>\n<host name='h' rate='fast'/>\n</rack>\n</topology>", 3,
       "rate=\"fast\""},
      {"bad job family", "<topology>\n<rack name='r'>\n<host name='h'>\n<job family='ipx'/>\n</host>\n</rack>\n</topology>", 4,
       "family=\"ipx\": expected dual, ipv4 or ipv6"},
      {"IPv4 task IP on an IPv6-only job",
       "<topology>\n<rack name='r'>\n<host name='h'>\n<job family='ipv6' task-ip4='198.19.0.9'/>\n</host>\n</rack>\n</topology>", 4,
       "an IPv6-only job has no IPv4 task IP"},
      {"bad BFD interval", "<topology>\n<rack name='r' bfd-interval='100ms'>\n<host name='h'/>\n</rack>\n</topology>", 2,
       "bfd-interval=\"100ms\": expected an integer from 0 to 60000"},
      {"BFD multiplier 0", "<topology>\n<rack name='r' bfd-multiplier='0'>\n<host name='h'/>\n</rack>\n</topology>", 2,
       "bfd-multiplier=\"0\": expected an integer from 1 to 255"},
      {"duplicate name", "<topology>\n<rack name='r'>\n<host name='h1'/>\n<server name='h1'/>\n</rack>\n</topology>",
       4, "node name 'h1' is already used at line 3"},
      {"expanded name clash", "<topology>\n<rack name='r'>\n<host name='h' count='3'/>\n<host name='h2'/>\n</rack>\n</topology>",
       4, "node name 'h2' is already used"},
      {"address outside the benchmark range",
       "<topology>\n<rack name='r' block4='10.0.0.0/22'/>\n</topology>", 2, "lanes only uses addresses inside 198.18.0.0/15"},
      {"task IP outside the rack block",
       "<topology>\n<rack name='r'>\n<host name='h'>\n<job task-ip4='198.19.9.9'/>\n</host>\n</rack>\n</topology>", 4,
       "outside its rack's block"},
      {"task IP collision",
       "<topology>\n<rack name='r'>\n<host name='a'>\n<job task-ip4='198.19.0.2'/>\n</host>\n<host name='b'/>\n</rack>\n</topology>",
       6, "already used by 'a'"},
      {"numa list of the wrong length", "<topology>\n<rack name='r'>\n<host name='h' nics='4' numa='0,1'/>\n</rack>\n</topology>",
       3, "expected 4 NUMA node numbers"},
      {"bad egress mode", "<topology>\n<rack name='r'>\n<host name='h'>\n<job egress='magic'/>\n</host>\n</rack>\n</topology>",
       4, "expected single, ecmp, bpf, bpf-numa, bind, active-backup or mptcp"},
      {"active-backup with an injector that announces every NIC",
       "<topology>\n<rack name='r'>\n<host name='h'>\n<job egress='active-backup' injector='exabgp'/>\n</host>\n</rack>\n</topology>",
       4, "only lanes' own injector announces the task IP through one NIC at a time"},
      {"link to a host", "<topology>\n<spine name='s'/>\n<rack name='r'>\n<host name='h'/>\n</rack>\n<link a='s' b='h'/>\n</topology>",
       6, "connects switches and spines only"},
      {"link to nowhere", "<topology>\n<spine name='s'/>\n<link a='s' b='zz'/>\n</topology>", 3, "b=\"zz\": no such node"},
      {"overlapping rack blocks",
       "<topology>\n<rack name='a' block4='198.19.0.0/22'><host name='h'/></rack>\n"
       "<rack name='b' block4='198.19.0.0/23'><host name='g'/></rack>\n"
       "<spine name='s'/><link a='s' b='a-tor'/><link a='s' b='b-tor'/>\n</topology>", 3,
       "overlaps rack 'a'"},
      {"empty rack", "<topology>\n<rack name='r'/>\n</topology>", 2, "rack 'r' has no <host>"},
      {"rack with only a server", "<topology>\n<rack name='r'>\n<server name='s'/>\n</rack>\n</topology>", 2,
       "rack 'r' has no <host>"},
      {"spine with no link",
       "<topology>\n<spine name='s'/>\n<spine name='t'/>\n<rack name='r'>\n<host name='h'/>\n</rack>\n"
       "<link a='s' b='r-tor'/>\n</topology>",
       3, "spine 't' has no <link>"},
      {"rack switch with no spine link",
       "<topology>\n<spine name='s'/>\n<rack name='a'>\n<host name='h'/>\n</rack>\n<rack name='b'>\n<host name='g'/>\n"
       "</rack>\n<link a='s' b='a-tor'/>\n</topology>",
       6, "rack switch 'b-tor' has no <link> to a spine"},
      {"racks with no way to each other",
       "<topology>\n<rack name='a'>\n<host name='h'/>\n</rack>\n<rack name='b'>\n<host name='g'/>\n</rack>\n</topology>",
       5, "rack 'b' has no path to rack 'a': with several racks, add a <spine>"},
      {"attribute given twice", "<topology>\n<rack name='r'>\n<host name='h' name='g'/>\n</rack>\n</topology>", 3,
       "attribute 'name' is given twice"},
      {"two root elements", "<topology>\n<rack name='r'><host name='h'/></rack>\n</topology>\n<topology/>", 4,
       "a second root element"},
      {"rate zero", "<topology>\n<rack name='r'>\n<host name='h' rate='0'/>\n</rack>\n</topology>", 3,
       "rate=\"0\": expected a rate such as 500mbit, 1gbit or off"},
      {"a problem inside a rack without a name", "<topology>\n<rack>\n<host name='h' count='0'/>\n</rack>\n</topology>", 3,
       "count=\"0\""},
      {"rack-block6 too small for the NIC addresses",
       "<topology>\n<addressing rack-block6='120'/>\n<rack name='r'>\n<host name='h' count='64'/>\n</rack>\n</topology>",
       3, "block6 2001:2:0:100::/120 is too small for 64 hosts with 256 NICs"},
      {"rack too small", "<topology>\n<rack name='r' block4='198.19.0.0/28'>\n<host name='h' count='8'/>\n</rack>\n</topology>",
       2, "too small"},
      {"bad name", "<topology>\n<rack name='r'>\n<host name='h 1'/>\n</rack>\n</topology>", 3, "names are 1-24 characters"},
      {"server outside a rack without attach", "<topology>\n<spine name='s'/>\n<server name='x'/>\n</topology>", 3,
       "needs attach="},
      {"empty", "<topology/>", 1, "has no nodes"},
      {"rate too high", "<topology>\n<rack name='r'>\n<host name='h' rate='100gbit'/>\n</rack>\n</topology>", 3,
       "at most 16gbit"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    try {
      load_topology_text(c.xml, "bad.xml");
      FAIL("loaded without error");
    } catch (const InputError& e) {
      std::string want_prefix = "bad.xml:" + std::to_string(c.line) + ": ";
      bool found = false;
      for (const auto& p : e.problems())
        if (p.rfind(want_prefix, 0) == 0 && p.find(c.message) != std::string::npos) found = true;
      INFO(e.what());
      CHECK(found);
    }
  }
}

TEST_CASE("a small rack-block6 keeps every job address inside its own block and apart from the task IPs", "[unit]") {
  // /120 holds 256 addresses: task IPs in its first quarter, NIC addresses in
  // the rest (before, NIC addresses took the IPv4 offset, outside the /120,
  // and one host's NIC address was another host's task IP)
  auto t = load_topology_text(
      "<topology>\n<addressing rack-block6='120'/>\n<rack name='r'>\n<host name='h' count='8'/>\n</rack>\n</topology>",
      "small6.xml");
  const Rack& r = t.racks.at(0);
  std::set<std::string> seen;
  for (int h : r.hosts) {
    const Node& n = t.nodes[h];
    CHECK(contains(r.block6, n.job->task_ip6));
    CHECK(seen.insert(n.job->task_ip6.to_string()).second);
    for (const auto& nic : n.nics) {
      INFO(n.name << " NIC " << nic.index << " " << nic.job_addr6.addr.to_string());
      CHECK(contains(r.block6, nic.job_addr6.addr));
      CHECK(contains(r.block4, nic.job_addr4.addr));
      CHECK(seen.insert(nic.job_addr6.addr.to_string()).second);
    }
  }
}

TEST_CASE("input files: a directory, an endless device and a huge file are refused with a message", "[unit]") {
  auto dir = std::filesystem::temp_directory_path() / ("lanes-input-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto msg = [](const std::string& path) {
    try {
      load_topology(path);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("loaded");
  };
  CHECK(msg(dir.string()).find("is a directory, not a topology file") != std::string::npos);
  CHECK(msg("/dev/zero").find("larger than 16 MiB") != std::string::npos);
  {
    std::ofstream big(dir / "big.xml");
    big << "<topology>";
    big << std::string(17u << 20, ' ');
  }
  CHECK(msg((dir / "big.xml").string()).find("larger than 16 MiB") != std::string::npos);
  CHECK(msg((dir / "missing.xml").string()).find("cannot read the topology file") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("every problem is reported and not just the first", "[unit]") {
  try {
    load_topology_text("<topology>\n<rack name='r' x='1'>\n<host name='h' count='0' nics='99'/>\n</rack>\n</topology>",
                       "multi.xml");
    FAIL("loaded");
  } catch (const InputError& e) {
    CHECK(e.problems().size() >= 3);
  }
}

TEST_CASE("rates parse in tc units", "[unit]") {
  uint64_t b = 0;
  CHECK((parse_rate("500mbit", b) && b == 500'000'000));
  CHECK((parse_rate("1Gbit", b) && b == 1'000'000'000));
  CHECK((parse_rate("2.5g", b) && b == 2'500'000'000));
  CHECK((parse_rate("off", b) && b == 0));
  CHECK_FALSE(parse_rate("500mbps", b));
  CHECK_FALSE(parse_rate("", b));
  CHECK_FALSE(parse_rate("mbit", b));
  CHECK(format_rate(500'000'000) == "500mbit");
  CHECK(format_rate(0) == "unshaped");
}

TEST_CASE("names carry the run id and fit the kernel's limits", "[unit]") {
  CHECK(RunRegistry::netns_name("3f2a", "h1") == "lanes-3f2a-h1");
  CHECK(RunRegistry::run_of_netns("lanes-3f2a-r1-tor") == "3f2a");
  CHECK(RunRegistry::run_of_netns("lanes-BAD-h1").empty());
  CHECK(RunRegistry::run_of_netns("other-3f2a-h1").empty());
  CHECK(RunRegistry::valid_id("a1b2c3d4"));
  CHECK_FALSE(RunRegistry::valid_id("toolong123"));
  CHECK_FALSE(RunRegistry::valid_id("has-dash"));
  CHECK_FALSE(RunRegistry::valid_id(""));
  auto t = load_topology(topology("rack-64.xml"));
  for (const auto& l : t.links) {
    CHECK(l.a.ifname.size() <= 15);
    CHECK(l.b.ifname.size() <= 15);
  }
}

TEST_CASE("a topology's footprint is counted and nearing a machine limit is a warning", "[unit]") {
  auto rack = load_topology(lanes::test::topology("rack-64.xml"));
  auto f = estimate_footprint(rack);
  CHECK(f.job_hosts == 64);
  CHECK(f.switches == 1);
  CHECK(f.namespaces == 64 + 64 + 1 + 2);  // hosts, their containers, the switch, two servers
  CHECK(f.processes == 2 * 64 + 2 + 1);
  CHECK(f.max_sessions == 256);  // one injector session per host NIC
  CHECK(f.memory > 64 * 9 * (1u << 20));
  MachineLimits roomy;
  roomy.pid_max = 32768;
  roomy.threads_max = 100000;
  roomy.nofile = 20000;
  roomy.mem_available = uint64_t{20} << 30;
  roomy.cpus = 2;
  CHECK(footprint_warnings(f, roomy).empty());
  MachineLimits tight = roomy;
  tight.mem_available = f.memory;  // all of it: past 80%
  tight.nofile = 256;              // gobgpd with 256 sessions
  tight.cpus = 0;
  auto w = footprint_warnings(f, tight);
  REQUIRE(w.size() == 2);
  CHECK(w[0].find("of memory") != std::string::npos);
  CHECK(w[1].find("256 BGP sessions") != std::string::npos);
  auto fleet = estimate_footprint(load_topology(lanes::test::topology("fabric-1k.xml")));
  CHECK(fleet.processes == 2 * 1024 + 2 * 20 + 1);
  // BFD on: a lanes-bfdd for each rack's switch and one for its job hosts
  auto laptop = estimate_footprint(load_topology(lanes::test::topology("laptop.xml")));
  CHECK(laptop.processes == 2 * laptop.job_hosts + 2 * laptop.switches + 1 + 2);
  auto fw = footprint_warnings(fleet, roomy);
  REQUIRE(fw.size() == 1);
  CHECK(fw[0].find("2089 daemons on 2 CPUs") != std::string::npos);
  // the machine's own: read from /proc, every one there
  auto here = read_machine_limits();
  CHECK(here.netdev_max_backlog > 0);
  CHECK(here.gc_thresh3 > 0);
  CHECK(here.to_json().contains("netdev_max_backlog"));
}

TEST_CASE("BFD's default interval fits the machine, an interval a file gives is kept, and one it cannot carry is named",
          "[unit]") {
  // a fabric as a user writes it: 12 racks of 48 mixed 2- and 4-NIC hosts, no bfd-interval
  std::string fabric = "<topology name=\"u\"><spine name=\"sp\" asn=\"65000\"/>";
  for (int r = 1; r <= 12; ++r)
    fabric += fmt::format(R"(<rack name="q{0}"><host name="q{0}a" count="24" nics="4"><job/></host>)"
                          R"(<host name="q{0}b" count="24" nics="2"><job/></host></rack><link a="sp" b="q{0}-tor"/>)",
                          r);
  fabric += "</topology>";
  auto t = load_topology_text(fabric, "u.xml");
  auto at100 = bfd_load(t);
  CHECK(at100.sessions == 1728);
  CHECK(at100.packets_per_s == Approx(34560));  // both ends, 10 a second each
  CHECK(at100.cpus > 1);
  CHECK_FALSE(bfd_warnings(t, 2).empty());  // as loaded, before lanes chose
  std::string note = adapt_bfd_default(t, 2);
  CHECK(note.find("BFD every 300 ms, not the default 100 ms: 1728 sessions on 12 racks") != std::string::npos);
  for (const auto& r : t.racks) CHECK(r.sw.bfd_interval_ms == 300);
  CHECK(bfd_load(t).cpus <= bfd_budget(2));
  CHECK(bfd_warnings(t, 2).empty());
  // a machine with more CPUs carries a shorter interval; 6 of them the default
  auto t4 = load_topology_text(fabric, "u.xml");
  adapt_bfd_default(t4, 4);
  CHECK(t4.racks[0].sw.bfd_interval_ms == 200);
  auto t32 = load_topology_text(fabric, "u.xml");
  CHECK(adapt_bfd_default(t32, 32).empty());
  CHECK(t32.racks[0].sw.bfd_interval_ms == 100);
  // a small topology keeps the default
  auto laptop = load_topology(lanes::test::topology("laptop.xml"));
  CHECK(adapt_bfd_default(laptop, 2).empty());
  CHECK(laptop.racks[0].sw.bfd_interval_ms == 100);
  // an interval the file gives is the file's: kept, and warned about when it costs too much
  std::string given = fabric;
  for (size_t at = 0; (at = given.find("<rack name=", at)) != std::string::npos; at += 10)
    given.insert(given.find('>', at), " bfd-interval=\"100\"");
  auto g = load_topology_text(given, "u.xml");
  CHECK(adapt_bfd_default(g, 2).empty());
  CHECK(g.racks[0].sw.bfd_interval_ms == 100);
  auto w = bfd_warnings(g, 2);
  REQUIRE(w.size() == 1);
  CHECK(w[0].find("BFD on 1728 sessions at 100 ms sends 34560 packets a second") != std::string::npos);
  // BFD off is nothing to carry
  auto rack = load_topology(lanes::test::topology("rack-64.xml"));  // bfd-interval="0"
  CHECK(bfd_load(rack).sessions == 0);
  CHECK(adapt_bfd_default(rack, 2).empty());
}

TEST_CASE("a node's sysctls: every namespace the base, forwarders multipath and forwarding too", "[unit]") {
  auto keys = [](const std::vector<Sysctl>& v) {
    std::map<std::string, std::string> m;
    for (const auto& s : v) CHECK(m.emplace(s.key, s.value).second);  // no key twice
    return m;
  };
  auto base = keys(base_sysctls());
  CHECK(base.at("net.ipv6.conf.all.accept_dad") == "0");
  CHECK(keys(node_sysctls(NodeKind::server)) == base);
  auto sw = keys(node_sysctls(NodeKind::rack_switch));
  CHECK(sw.at("net.ipv4.ip_forward") == "1");
  CHECK(sw.at("net.ipv6.conf.all.forwarding") == "1");
  for (const auto& [k, v] : keys(multipath_sysctls())) CHECK(sw.at(k) == v);
  for (const auto& [k, v] : base) CHECK(sw.at(k) == v);
  CHECK(keys(node_sysctls(NodeKind::host)) == sw);
}

TEST_CASE("a scenario's overrides: one table, the loader's bounds, set on the elements they belong to", "[unit]") {
  std::map<std::string, const OverrideAttr*> by;
  for (const auto& a : override_attrs()) by[a.name] = &a;
  CHECK(by.size() == 10);
  CHECK(override_problem(*by.at("switch-stack"), "frr").empty());
  CHECK(override_problem(*by.at("injector"), "bird").empty());
  CHECK(override_problem(*by.at("injector"), "exec") == "expected one of lanes|exabgp|bird");  // exec needs a command
  CHECK(override_problem(*by.at("switch-stack"), "sonic") == "expected one of gobgp|frr");
  CHECK(override_problem(*by.at("bfd-interval"), "60000").empty());
  CHECK(override_problem(*by.at("bfd-interval"), "60001") == "expected a whole number from 0 to 60000");
  CHECK(override_problem(*by.at("nics"), "2x") == "expected a whole number from 1 to 16");
  CHECK(override_problem(*by.at("egress"), "bpf-numa").empty());
  CHECK(override_problem(*by.at("egress"), "fast") == "expected one of single|ecmp|bpf|bpf-numa|bind|active-backup|mptcp");
  CHECK(override_problem(*by.at("rate"), "1gbit").empty());
  // the topology loader holds the same bounds: what an override may not give, a file may not either
  for (const char* bad : {R"(<rack name="r" bfd-interval="60001"><host name="h"><job/></host></rack>)",
                          R"(<rack name="r" hold-time="2"><host name="h"><job/></host></rack>)",
                          R"(<rack name="r"><host name="h" nics="17"><job/></host></rack>)"})
    CHECK_THROWS_AS(load_topology_text(std::string("<topology>") + bad + "</topology>", "b.xml"), InputError);
  std::string text = R"(<topology><rack name="r" hold-time="9"><host name="h" nics="4"><job egress="ecmp"/></host></rack></topology>)";
  auto t = load_topology_text(text, "o.xml", {{"egress", "bpf"}, {"nics", "2"}, {"bfd-interval", "0"}, {"family", "ipv6"}});
  const auto& h = t.nodes.at(static_cast<size_t>(t.find_node("h")));
  CHECK(h.nics.size() == 2);
  CHECK(h.job->egress == EgressMode::bpf);
  CHECK_FALSE(h.job->has4());
  CHECK(t.racks.at(0).sw.hold_time_s == 9);  // what no override names stays
  CHECK(t.racks.at(0).sw.bfd_interval_ms == 0);
  // a stack set on every rack switch and spine, and a bad one named
  auto two = load_topology_text(R"(<topology><spine name="s" asn="65000"/><rack name="r"><host name="h"><job/></host></rack>
    <link a="s" b="r-tor"/></topology>)", "s.xml", {{"switch-stack", "frr"}});
  for (const auto& n : two.nodes)
    if (n.kind == NodeKind::rack_switch || n.kind == NodeKind::spine) CHECK(n.stack == SwitchStack::frr);
  CHECK(load_topology_text(text, "o.xml").nodes.at(0).stack == SwitchStack::gobgp);
  CHECK_THROWS_AS(load_topology_text(R"(<topology><rack name="r" switch-stack="sonic"><host name="h"><job/></host></rack></topology>)", "b.xml"), InputError);
  // who delays a link: the file's impair-engine, a scenario's over it, a bad one named at its line
  CHECK(load_topology_text(text, "o.xml").impair_engine == ImpairEngine::automatic);
  CHECK(load_topology_text(text, "o.xml", {{"impair-engine", "lanes"}}).impair_engine == ImpairEngine::lanes);
  std::string netem = R"(<topology impair-engine="netem"><rack name="r"><host name="h"><job/></host></rack></topology>)";
  CHECK(load_topology_text(netem, "n.xml").impair_engine == ImpairEngine::netem);
  CHECK(load_topology_text(netem, "n.xml", {{"impair-engine", "auto"}}).impair_engine == ImpairEngine::automatic);
  CHECK(override_problem(*by.at("impair-engine"), "tc") == "expected one of auto|netem|lanes");
  try {
    (void)load_topology_text("<topology\n impair-engine=\"tc\"><rack name=\"r\"><host name=\"h\"><job/></host></rack></topology>", "e.xml");
    FAIL("impair-engine=tc loaded");
  } catch (const InputError& e) {
    CHECK_THAT(e.what(), Catch::Contains("e.xml:1: <topology> impair-engine=\"tc\": expected auto, netem or lanes"));
  }
}

TEST_CASE("injector: lanes' own, ExaBGP, BIRD or the user's command, BIRD's ADD-PATH is refused with the reason",
          "[unit]") {
  auto job = [](const std::string& attrs) {
    return "<topology><rack name=\"r\"><host name=\"h\" nics=\"2\"><job " + attrs + "/></host></rack></topology>";
  };
  auto kind = [&](const std::string& attrs) {
    auto t = load_topology_text(job(attrs), "i.xml");
    return t.nodes.at(static_cast<size_t>(t.find_node("h"))).job->injector;
  };
  auto t = load_topology_text(job("injector=\"exec\" injector-cmd=\"my-injector --x\""), "i.xml");
  CHECK(t.nodes.at(static_cast<size_t>(t.find_node("h"))).job->injector_cmd == "my-injector --x");
  CHECK(kind("") == InjectorKind::lanes);
  CHECK(kind("injector=\"lanes\"") == InjectorKind::lanes);
  CHECK(kind("injector=\"exabgp\"") == InjectorKind::exabgp);
  CHECK(kind("injector=\"exabgp\" vip=\"add-path\"") == InjectorKind::exabgp);
  CHECK(kind("injector=\"bird\" family=\"ipv6\"") == InjectorKind::bird);
  auto problems = [&](const std::string& attrs) {
    try {
      load_topology_text(job(attrs), "i.xml");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(problems("injector=\"exec\"").find("needs injector-cmd") != std::string::npos);
  CHECK(problems("injector=\"bird\" vip=\"add-path\"").find("one session per NIC only") != std::string::npos);
  CHECK(problems("injector=\"quagga\"").find("expected lanes, exabgp, bird or exec") != std::string::npos);
  CHECK(problems("injector-cmd=\"x\"").find("is for injector=\"exec\"") != std::string::npos);
  CHECK(problems("injector=\"bird\" injector-cmd=\"x\"").find("is for injector=\"exec\"") != std::string::npos);
  // as a scenario's override
  Overrides ov{{"injector", "bird"}};
  auto o = load_topology_text(job(""), "i.xml", ov);
  CHECK(o.nodes.at(static_cast<size_t>(o.find_node("h"))).job->injector == InjectorKind::bird);
}

TEST_CASE("program: the user's egress object, next to the topology, it needs a bpf egress unless a scenario overrides it",
          "[unit]") {
  auto dir = std::filesystem::temp_directory_path() / ("lanes-prog-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "mine.bpf.o") << "an object";
  std::string file = (dir / "t.xml").string();
  auto job = [](const std::string& attrs) {
    return "<topology><rack name=\"r\"><host name=\"h\"><job " + attrs + "/></host></rack></topology>";
  };
  auto t = load_topology_text(job("egress=\"bpf\" program=\"mine.bpf.o\""), file);
  CHECK(t.nodes.at(static_cast<size_t>(t.find_node("h"))).job->egress_program == (dir / "mine.bpf.o").string());
  auto problem = [&](const std::string& attrs) {
    try {
      load_topology_text(job(attrs), file);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(problem("egress=\"ecmp\" program=\"mine.bpf.o\"").find("needs egress=\"bpf\"") != std::string::npos);
  CHECK(problem("egress=\"bpf\" program=\"nope.bpf.o\"").find(":1: <job> program=\"nope.bpf.o\": no such file") !=
        std::string::npos);
  // a single-NIC baseline phase of a scenario sets the program aside
  auto base = load_topology_text(job("egress=\"bpf\" program=\"mine.bpf.o\""), file, {{"egress", "single"}});
  CHECK(base.nodes.at(static_cast<size_t>(base.find_node("h"))).job->egress_program.empty());
  std::filesystem::remove_all(dir);
}

TEST_CASE("who delays: each impair-engine on a kernel with and without netem and BPF", "[unit]") {
  auto kernel = [](bool netem, bool bpf) {
    KernelFeatures f;
    f.netem = netem;
    f.bpf = bpf;
    return f;
  };
  const std::string no_netem = "impair-engine=\"netem\": this kernel has no netem (CONFIG_NET_SCH_NETEM)";
  const std::string no_bpf = "impair-engine=\"lanes\": lanes' delay line needs BPF, which lanes cannot load here";
  const std::string neither = "this kernel has no netem, and lanes' delay line needs BPF, which lanes cannot load here";
  for (bool netem : {false, true})
    for (bool bpf : {false, true}) {
      INFO("netem " << netem << ", bpf " << bpf);
      auto f = kernel(netem, bpf);
      CHECK(delay_engine_problem(ImpairEngine::netem, f) == (netem ? "" : no_netem));
      CHECK(delay_engine_problem(ImpairEngine::lanes, f) == (bpf ? "" : no_bpf));
      CHECK(delay_engine_problem(ImpairEngine::automatic, f) == (netem || bpf ? "" : neither));
    }
}
