#include "lanes/cli/scenario_commands.hpp"

#include <fmt/format.h>
#include <sys/utsname.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

#include "lanes/cli/cli.hpp"
#include "lanes/testbed/slurm.hpp"
#include "lanes/testbed/features.hpp"
#include "lanes/testbed/interrupt.hpp"
#include "lanes/testbed/overrides.hpp"
#include "lanes/testbed/process.hpp"
#include "lanes/testbed/run_registry.hpp"
#include "lanes/testbed/topology_loader.hpp"
#include "lanes/testbed/version.hpp"
#include "lanes/reports/writers.hpp"
#include "lanes/scenarios/matrix.hpp"
#include "lanes/scenarios/runner.hpp"
#include "lanes/scenarios/scenario.hpp"

namespace lanes::cli {

using namespace lanes::scenarios;

namespace po = boost::program_options;
namespace tb = lanes::testbed;

namespace {

std::string utc_now(const char* fmt_s) {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, fmt_s, std::gmtime(&t));
  return buf;
}

std::string gobgpd_version() {
  tb::ProcessSpec spec{"gobgpd --version", {"gobgpd", "--version"}};
  spec.new_session = false;
  auto r = tb::run_capture(spec, std::chrono::seconds(5));
  if (!r || r.value().status != 0) return "unknown";
  std::string s = r.value().out;
  s.erase(std::remove(s.begin(), s.end(), '\n'), s.end());
  return s;
}

int cmd_run(const CliContext& cli, const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description desc("options");
  std::vector<std::string> files;
  std::string out_dir, seed_text = "1", run_id_prefix, deadline_text;
  std::vector<std::string> sets;
  desc.add_options()("file", po::value(&files)->required()->multitoken(),
                     "scenario or suite files, or names of shipped scenarios (lanes scenarios)")(
      "set", po::value(&sets),
      "ATTR=VALUE: an override over every phase's own, e.g. switch-stack=frr or nics=2 (repeatable; the "
      "attributes a scenario's <topology> takes)")(
      "out", po::value(&out_dir), "where results.json, junit.xml and report.html go (default: ./lanes-results/<time>)")(
      "seed", po::value(&seed_text), "seed of every traffic pattern: 0 to 2^64-1 (default 1)")(
      "run-id", po::value(&run_id_prefix),
      "PREFIX: name the phases' runs PREFIX1, PREFIX2, ... (1-7 of a-z, 0-9; default: random ids)")(
      "keep", "leave the last phase's topology up afterwards (lanes down RUN removes it)")(
      "deadline", po::value(&deadline_text),
      "DURATION (e.g. 14m): stop at it as at Ctrl-C (everything torn down, results written), the scenario "
      "running then failed with the deadline named; exit 1")(
      "over-slurm", "inside a Slurm allocation (salloc/sbatch -N K): each phase's topology is split over the K "
                    "machines (as lanes up --over-slurm), its workloads' processes and NIC samplers run where their "
                    "nodes are, as job steps")(
      "quiet,q", "no progress lines; only the summary");
  po::positional_options_description pos;
  pos.add("file", -1);
  po::variables_map vm;
  if (!parse_command_line(
          args, "run", "FILE... [--out DIR] [--seed N] [--run-id PREFIX] [--keep] [--deadline T] [--set A=V]",
          "run scenarios and report what they measured", desc,
          pos, vm, out,
          "Each phase of a scenario brings its topology up, runs its steps (workloads, faults, waits,\n"
          "assertions) and takes it down again; then the scenario's assertions are evaluated. Every\n"
          "scenario file is checked before anything is built. Ctrl-C stops and tears everything down.\n"
          "Exit status: 0 when every assertion passed, 1 when one failed or a scenario could not run,\n"
          "2 on bad input, 3 when nothing failed but a scenario was not run because this machine lacks\n"
          "what it needs (the netem qdisc; each says what)."))
    return kExitOk;
  uint64_t seed = 0;
  {
    auto bad = [&] { return UsageError(fmt::format("--seed {}: expected a whole number from 0 to 2^64-1", seed_text)); };
    if (seed_text.empty() || seed_text.find_first_not_of("0123456789") != std::string::npos || seed_text.size() > 20)
      throw bad();
    try {
      seed = std::stoull(seed_text);
    } catch (const std::exception&) {
      throw bad();
    }
  }
  std::optional<std::chrono::milliseconds> deadline;
  if (vm.count("deadline")) {
    std::chrono::milliseconds d{};
    if (!tb::parse_duration(deadline_text, d) || d.count() <= 0)
      throw UsageError(fmt::format("--deadline '{}': give a duration such as 14m or 600s", deadline_text));
    deadline = d;
  }
  if (vm.count("run-id") && (run_id_prefix.size() > 7 || !tb::RunRegistry::valid_id(run_id_prefix)))
    throw UsageError(fmt::format("--run-id '{}': a prefix is 1-7 characters of a-z and 0-9", run_id_prefix));
  Overrides set;
  for (const auto& kv : sets) {
    auto eq = kv.find('=');
    std::string k = kv.substr(0, eq), v = eq == std::string::npos ? "" : kv.substr(eq + 1);
    const tb::OverrideAttr* attr = nullptr;
    std::string names;
    for (const auto& a : tb::override_attrs()) {
      names += (names.empty() ? "" : ", ") + std::string(a.name);
      if (k == a.name) attr = &a;
    }
    if (eq == std::string::npos || !attr)
      throw UsageError(fmt::format("--set '{}': expected ATTR=VALUE with ATTR one of {}", kv, names));
    if (auto why = tb::override_problem(*attr, v); !why.empty())
      throw UsageError(fmt::format("--set '{}': {}", kv, why));
    set[k] = v;
  }
  std::vector<Scenario> all;
  for (const auto& f : files) {
    auto v = load_scenarios(resolve_scenario(f), set);  // bad input: InputError, exit 2, nothing built
    for (auto& s : v) all.push_back(std::move(s));
  }
  std::optional<tb::Allocation> alloc;
  if (vm.count("over-slurm")) {
    auto a = tb::read_allocation();
    if (!a) {
      err << "lanes run: --over-slurm: " << tb::message_of(a.error()) << "\n";
      return kExitBadInput;
    }
    alloc = std::move(a).value();
  }
  if (!have_privileges(err, "run")) return kExitFailure;
  if (out_dir.empty()) out_dir = "lanes-results/" + utc_now("%Y%m%d-%H%M%S");
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) {
    err << "lanes run: --out " << out_dir << ": " << ec.message() << "\n";
    return kExitBadInput;
  }
  tb::install_interrupt_handlers();
  if (deadline) tb::interrupt_at(std::chrono::steady_clock::now() + *deadline);
  reports::RunResult result;
  result.lanes_version = tb::kVersion;
  utsname u{};
  ::uname(&u);
  result.kernel = u.release;
  result.gobgpd = gobgpd_version();
  result.features = tb::probe_kernel_features().to_json();
  result.seed = seed;
  result.started = utc_now("%Y-%m-%dT%H:%M:%SZ");
  auto t0 = std::chrono::steady_clock::now();
  RunOptions opt;
  opt.roles = cli.roles;
  opt.out_dir = out_dir;
  if (alloc) opt.over_slurm = &*alloc;
  opt.seed = seed;
  opt.progress = vm.count("quiet") ? nullptr : &out;
  std::string kept;
  opt.kept_run = &kept;
  int phase_seq = 0;
  opt.run_id_prefix = run_id_prefix;
  opt.phase_seq = &phase_seq;
  for (size_t i = 0; i < all.size(); ++i) {
    if (tb::interrupted()) break;
    opt.keep = vm.count("keep") && i + 1 == all.size();
    result.scenarios.push_back(run_scenario(all[i], opt));
    result.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    reports::write_all(result, out_dir);  // after each scenario: a partial report survives a crash
  }
  // past the deadline before lanes was done (in a step, a bring-up, a
  // teardown, or before a scenario began): stopped by it, a failure that
  // names it; a signal is an interruption (130)
  bool out_of_time = tb::deadline_passed() && !tb::signalled();
  if (out_of_time) {
    if (!result.scenarios.empty() && !result.scenarios.back().passed && result.scenarios.back().not_run.empty())
      result.scenarios.back().error =
          result.scenarios.back().error.empty()
              ? fmt::format("stopped at lanes run --deadline {}", deadline_text)
              : fmt::format("stopped at lanes run --deadline {} ({})", deadline_text, result.scenarios.back().error);
    err << fmt::format("lanes run: the deadline ({}) passed; everything it built is torn down; {} of {} scenarios "
                       "ran\n",
                       deadline_text, result.scenarios.size(), all.size());
  } else if (tb::interrupted()) {
    err << "lanes run: interrupted; everything it built is torn down\n";
  }
  reports::write_all(result, out_dir);
  reports::terminal_summary(result, out_dir, out);
  if (!kept.empty())
    out << "run " << kept << " is still up (lanes status " << kept << "; lanes down " << kept << ")\n";
  if (tb::signalled()) return 130;
  if (result.scenarios.size() != all.size() || out_of_time) return kExitFailure;
  bool failed = std::any_of(result.scenarios.begin(), result.scenarios.end(),
                            [](const reports::ScenarioResult& s) { return s.not_run.empty() && !s.passed; });
  if (failed) return kExitFailure;
  return result.not_run() ? kExitNotRun : kExitOk;
}

int cmd_scenarios([[maybe_unused]] const CliContext& cli, const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  po::options_description desc("options");
  desc.add_options()("json", "print the list as JSON");
  po::positional_options_description pos;
  po::variables_map vm;
  if (!parse_command_line(args, "scenarios", "[--json]", "list the shipped scenarios", desc, pos, vm, out))
    return kExitOk;
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(shipped_dir(), ec))
    if (e.path().extension() == ".xml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  nlohmann::json j = nlohmann::json::array();
  for (const auto& f : files) {
    std::string name = f.stem().string(), desc_s, kind = "scenario";
    try {
      auto v = load_scenarios(f.string());
      if (v.size() == 1 && v[0].name == name) {
        desc_s = v[0].description;
      } else {
        kind = "suite";
        desc_s = fmt::format("suite of {} scenarios", v.size());
      }
    } catch (const std::exception& e) {
      desc_s = std::string("(does not load: ") + e.what() + ")";
    }
    j.push_back({{"name", name}, {"kind", kind}, {"file", f.string()}, {"description", desc_s}});
  }
  if (vm.count("json")) {
    out << j.dump(2) << "\n";
    return kExitOk;
  }
  if (j.empty()) {
    out << "no scenarios in " << shipped_dir() << " (set LANES_SCENARIOS_DIR)\n";
    return kExitFailure;
  }
  for (const auto& x : j)
    out << fmt::format("{:<28} {}\n", x["name"].get<std::string>(), x["description"].get<std::string>());
  out << "\nlanes run NAME runs one (files are in " << shipped_dir() << ")\n";
  return kExitOk;
}

int cmd_report([[maybe_unused]] const CliContext& cli, const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  po::options_description desc("options");
  std::string dir;
  desc.add_options()("dir", po::value(&dir)->required(), "a results directory (lanes run --out DIR)");
  po::positional_options_description pos;
  pos.add("dir", 1);
  po::variables_map vm;
  if (!parse_command_line(args, "report", "DIR", "re-render DIR/report.html and DIR/junit.xml from DIR/results.json",
                              desc, pos, vm, out))
    return kExitOk;
  reports::RunResult r;
  try {
    r = reports::read_results_json(dir + "/results.json");
  } catch (const std::runtime_error& e) {
    throw tb::InputError({e.what()});
  }
  reports::write_all(r, dir);
  reports::terminal_summary(r, dir, out);
  return kExitOk;
}

int cmd_compare([[maybe_unused]] const CliContext& cli, const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  po::options_description desc("options");
  std::vector<std::string> dirs;
  std::string html;
  double drift_pct = 5;
  desc.add_options()("dirs", po::value(&dirs)->required()->multitoken(), "two results directories")(
      "html", po::value(&html), "also write the comparison as an HTML file")(
      "drift", po::value(&drift_pct)->default_value(5), "a number that moved by more than PCT percent is drift");
  po::positional_options_description pos;
  pos.add("dirs", 2);
  po::variables_map vm;
  if (!parse_command_line(args, "compare", "A B [--html FILE] [--drift PCT]",
                              "put two runs side by side: verdicts that flipped (pass → fail, exit 1), numbers that "
                              "drifted, and the two configurations",
                              desc, pos, vm, out))
    return kExitOk;
  if (dirs.size() != 2) throw UsageError("give two results directories");
  if (!(drift_pct >= 0 && drift_pct <= 1000)) throw UsageError("--drift is a percentage from 0 to 1000");
  reports::RunResult a, b;
  try {
    a = reports::read_results_json(dirs[0] + "/results.json");
    b = reports::read_results_json(dirs[1] + "/results.json");
  } catch (const std::runtime_error& e) {
    throw tb::InputError({e.what()});
  }
  auto c = reports::compare_runs(a, b, {drift_pct / 100});
  reports::compare_text(c, dirs[0], a.started, dirs[1], b.started, out);
  if (!html.empty()) {
    std::ofstream o(html, std::ios::trunc);
    o << reports::html_compare(c, dirs[0], a.started, dirs[1], b.started);
    if (!o) throw std::runtime_error("writing " + html + " failed");
    out << "comparison written to " << html << "\n";
  }
  return c.flips ? kExitFailure : kExitOk;
}

int cmd_matrix([[maybe_unused]] const CliContext& cli, const std::vector<std::string>& args, std::ostream& out,
               std::ostream&) {
  po::options_description desc("options");
  uint64_t seed = 1;
  std::string dir;
  desc.add_options()("seed", po::value(&seed)->default_value(1), "the covering array's seed (the same seed, the same cases)")(
      "out", po::value(&dir),
      "write DIR/matrix.xml (the suite), a scenario per case and DIR/matrix-topology.xml (lanes run DIR/matrix.xml)");
  po::positional_options_description pos;
  po::variables_map vm;
  if (!parse_command_line(
          args, "matrix", "[--seed N] [--out DIR]",
          "the combination matrix: every workload type x family (dual, ipv4, ipv6) x egress (single, ecmp, bpf,\n"
          "bpf-numa, active-backup, bind, mptcp) x VIP mode (per-nic, add-path) x NICs (1, 2, 4, 8), covered\n"
          "pairwise: every pair of values of two dimensions in at least one case. Prints the cases; with\n"
          "--out writes them as a suite, a scenario per case, each asserting no connection error and every\n"
          "byte verified.",
          desc, pos, vm, out))
    return kExitOk;
  auto cs = matrix::cases(seed);
  size_t product = 1;
  for (const auto& d : matrix::dimensions()) product *= d.values.size();
  out << fmt::format("{} cases (seed {}; every pair of values covered; the full product is {})\n", cs.size(), seed, product)
      << matrix::describe(cs);
  if (!dir.empty()) {
    std::filesystem::create_directories(dir);
    std::string topo = std::filesystem::absolute(dir + "/matrix-topology.xml").string();
    std::ofstream(topo) << matrix::topology_xml();
    for (const auto& c : cs) std::ofstream(dir + "/" + c.name + ".xml") << matrix::scenario_xml(c, topo);
    std::ofstream(dir + "/matrix.xml") << matrix::suite_xml(cs, seed);
    out << "written: " << dir << "/matrix.xml (lanes run " << dir << "/matrix.xml)\n";
  }
  return kExitOk;
}

// lanes validate of a scenario or suite: loaded as lanes run loads it, nothing built
std::string validate_scenarios(const std::string& path) {
  auto all = load_scenarios(path);
  size_t phases = 0, steps = 0;
  std::string names;
  for (const auto& sc : all) {
    phases += sc.phases.size();
    for (const auto& ph : sc.phases) steps += ph.steps.size();
    steps += sc.assertions.size();
    names += (names.empty() ? "" : ", ") + sc.name;
  }
  return fmt::format("{} scenario{} ({}), {} phase{}, {} steps", all.size(), all.size() == 1 ? "" : "s", names,
                     phases, phases == 1 ? "" : "s", steps);
}

}  // namespace

void register_scenario_commands() {
  register_validator("scenario", validate_scenarios);
  register_validator("suite", validate_scenarios);
  register_command("run", "FILE... [--out DIR] [--seed N] [--run-id PREFIX] [--keep] [--set A=V]", "run scenarios and report what they measured",
                       cmd_run);
  register_command("scenarios", "[--json]", "list the shipped scenarios", cmd_scenarios);
  register_command("matrix", "[--seed N] [--out DIR]",
                       "every workload in every family, egress, VIP mode and NIC count, pairwise, as a scenario",
                       cmd_matrix);
  register_command("report", "DIR", "re-render a run's HTML report and JUnit XML from its results.json",
                       cmd_report);
  register_command("compare", "A B [--html FILE] [--drift PCT]", "two runs side by side: flipped verdicts, drifted numbers, configurations", cmd_compare);
}

}  // namespace lanes::cli
