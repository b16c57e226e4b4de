#include "lanes/testbed/run_registry.hpp"

#include <dirent.h>
#include <stdio.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "lanes/testbed/log.hpp"
#include "lanes/testbed/netns.hpp"
#include "lanes/testbed/process.hpp"
#include "lanes/testbed/rootless.hpp"

namespace lanes::testbed {

nlohmann::json RunState::to_json() const {
  nlohmann::json d = nlohmann::json::array();
  for (const auto& r : daemons)
    d.push_back({{"name", r.name}, {"node", r.node}, {"pid", r.pid}, {"start_time", r.start_time},
                 {"log", r.log}});
  return {{"id", id},         {"topology_name", topology_name}, {"topology_file", topology_file},
          {"phase", phase},   {"owner", owner},                 {"held", held},
          {"created_unix", created_unix},
          {"overrides", overrides},
          {"daemons", d}};
}

RunState RunState::from_json(const nlohmann::json& j) {
  RunState s;
  s.id = j.value("id", "");
  s.topology_name = j.value("topology_name", "");
  s.topology_file = j.value("topology_file", "");
  s.phase = j.value("phase", "");
  s.owner = j.value("owner", 0);
  s.held = j.value("held", false);
  s.created_unix = j.value("created_unix", int64_t{0});
  s.overrides = j.value("overrides", Overrides{});
  for (const auto& d : j.value("daemons", nlohmann::json::array()))
    s.daemons.push_back({d.value("name", ""), d.value("node", ""), d.value("pid", 0),
                         d.value("start_time", uint64_t{0}), d.value("log", "")});
  return s;
}

namespace {

std::string normal_dir(const std::string& d) {
  std::error_code ec;
  auto p = std::filesystem::absolute(d, ec);
  std::string s = (ec ? std::filesystem::path(d) : p).lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

}  // namespace

RunRegistry::RunRegistry(std::string base, std::string owners)
    : base_(normal_dir(base)), owners_(normal_dir(owners)) {}

std::string RunRegistry::default_base() {
  if (const char* e = std::getenv("LANES_STATE_DIR"); e && *e) return e;
  if (auto d = rootless::state_dir(); !d.empty()) return d;  // an ordinary user's, or inside the user's world
  return "/run/lanes";
}

std::string RunRegistry::default_owners() {
  if (auto d = rootless::owners_dir(); !d.empty()) return d;
  return "/run/lanes-owners";
}

bool RunRegistry::valid_id(const std::string& id) {
  return !id.empty() && id.size() <= 8 && std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
  });
}

std::string RunRegistry::run_of_netns(const std::string& ns) {
  if (ns.rfind("lanes-", 0) != 0) return {};
  auto dash = ns.find('-', 6);
  if (dash == std::string::npos) return {};
  std::string id = ns.substr(6, dash - 6);
  return valid_id(id) ? id : std::string();
}

Result<RunLock> RunRegistry::create(const std::string& id) const {
  if (!valid_id(id)) return os_error(EINVAL, "'" + id + "' is not a run id");
  std::error_code ec;
  std::filesystem::create_directories(base_, ec);
  if (ec) return std::system_error(ec, "creating the state directory " + base_);
  std::filesystem::create_directories(owners_, ec);
  if (ec) return std::system_error(ec, "creating the owner records' directory " + owners_);
  // the owner record first: it claims the id on the whole machine
  std::string rec = owners_ + "/" + id + ".json";
  {
    Fd fd(::open(rec.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (!fd) {
      int e = errno;
      if (e == EEXIST) {
        auto o = owner_of(id);
        return os_error(EEXIST, "run id " + id + " is taken" +
                                    (o ? " by a run of state dir " + o->state_dir : std::string()));
      }
      return os_error(e, "creating the owner record " + rec);
    }
    nlohmann::json j = {{"state_dir", base_}, {"pid", ::getpid()}, {"start_time", process_start_time(::getpid())}};
    std::string text = j.dump() + "\n";
    if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
      int e = errno;
      ::unlink(rec.c_str());
      return os_error(e, "writing the owner record " + rec);
    }
  }
  // The directory is made under a name list() ignores, locked there, and
  // renamed into place: a run directory is never seen without its lock held.
  std::string partial = base_ + "/" + kNewPrefix + id;
  std::filesystem::remove_all(partial, ec);  // a creator of this id killed before the rename
  if (::mkdir(partial.c_str(), 0755) != 0) {
    auto err = errno_error("creating run directory " + partial);
    ::unlink(rec.c_str());
    return err;
  }
  auto fail = [&](std::system_error err) -> Result<RunLock> {
    std::error_code ignore;
    std::filesystem::remove_all(partial, ignore);
    ::unlink(rec.c_str());
    return err;
  };
  auto l = lock_file(partial + "/lock", false);
  if (!l) return fail(l.error());
  if (::renameat2(AT_FDCWD, partial.c_str(), AT_FDCWD, dir(id).c_str(), RENAME_NOREPLACE) != 0)
    return fail(errno_error("creating run directory " + dir(id)));
  return l;
}

std::optional<OwnerRecord> RunRegistry::owner_of(const std::string& id) const {
  if (!valid_id(id)) return std::nullopt;
  std::ifstream in(owners_ + "/" + id + ".json");
  if (!in) return std::nullopt;
  try {
    auto j = nlohmann::json::parse(in);
    OwnerRecord r;
    r.state_dir = j.at("state_dir").get<std::string>();
    r.pid = j.value("pid", 0);
    r.start_time = j.value("start_time", uint64_t{0});
    return r;
  } catch (const std::exception&) {
    return std::nullopt;  // being written, or not lanes': proves nothing
  }
}

std::vector<std::string> RunRegistry::owned_ids() const {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(owners_, ec)) {
    std::string n = e.path().filename().string();
    if (n.size() > 5 && n.compare(n.size() - 5, 5, ".json") == 0 && valid_id(n.substr(0, n.size() - 5)))
      out.push_back(n.substr(0, n.size() - 5));
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool RunRegistry::owns(const std::string& id) const {
  auto o = owner_of(id);
  return o && o->state_dir == base_;
}

void RunRegistry::release(const std::string& id) const {
  if (owns(id)) ::unlink((owners_ + "/" + id + ".json").c_str());
}

void RunRegistry::forget(const std::string& id) const {
  if (valid_id(id)) ::unlink((owners_ + "/" + id + ".json").c_str());
}

// The lock is looked at before the state and again after it: a state read
// first could be a creator's "creating" that its creator replaced with "up"
// and then let go of the lock, and the run would pass for one whose
// creator died (CI: a clean beside ups removed a run just up).
RunHealth RunRegistry::assess(const std::string& id) const {
  RunHealth h;
  bool held = in_use(id);
  auto st = load(id);
  if (held || in_use(id)) {
    h.live = true;
    h.phase = st ? st.value().phase : "creating";
    return h;
  }
  return judge(id, st);
}

RunHealth RunRegistry::assess_held(const std::string& id) const { return judge(id, load(id)); }

RunHealth RunRegistry::judge(const std::string& id, const Result<RunState>& st) const {
  RunHealth h;
  h.phase = "dead";
  if (!exists(id)) {
    h.reason = "no run directory";
    return h;
  }
  if (!st) {
    h.reason = "no readable state";
    return h;
  }
  const RunState& s = st.value();
  if (s.phase != "up") {
    h.reason = "its lanes process died while " + (s.phase.empty() ? std::string("creating") : s.phase) + " it";
    return h;
  }
  if (s.held) {
    h.reason = "the lanes process that owned it (pid " + std::to_string(s.owner) + ") is gone";
    return h;
  }
  for (const auto& d : s.daemons)
    if (d.name == "supervisor" && !is_supervisor_of(d.pid, d.start_time, id, base_)) {
      h.reason = "its supervisor (pid " + std::to_string(d.pid) + ") is gone";
      return h;
    }
  h.phase = "up";
  return h;
}

namespace {

// Open-file-description locks: held by the open file, like flock, but they
// can be tested (F_OFD_GETLK) without being taken, so a probe never makes a
// real locker fail.
struct flock whole_file(short type) {
  struct flock f {};
  f.l_type = type;
  f.l_whence = SEEK_SET;
  return f;
}

}  // namespace

Result<RunLock> RunRegistry::lock_file(const std::string& path, bool wait) {
  Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!fd) return errno_error("opening " + path);
  struct flock f = whole_file(F_WRLCK);
  while (::fcntl(fd.get(), wait ? F_OFD_SETLKW : F_OFD_SETLK, &f) != 0) {
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EACCES)
      return os_error(EWOULDBLOCK, "locking " + path + " (another lanes process is working on the run)");
    return errno_error("locking " + path);
  }
  return RunLock(std::move(fd));
}

Result<RunLock> RunRegistry::lock(const std::string& id, bool wait) const {
  return lock_file(dir(id) + "/lock", wait);
}

bool RunRegistry::in_use(const std::string& id) const { return locked(dir(id) + "/lock"); }

bool RunRegistry::locked(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return false;
  struct flock f = whole_file(F_WRLCK);
  if (::fcntl(fd.get(), F_OFD_GETLK, &f) != 0) return false;
  return f.l_type != F_UNLCK;
}

std::vector<std::string> RunRegistry::hidden_dirs() const {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(base_, ec)) {
    std::string n = e.path().filename().string();
    for (const char* p : {kNewPrefix, kGonePrefix})
      if (n.rfind(p, 0) == 0 && valid_id(n.substr(std::strlen(p)))) out.push_back(n);
  }
  return out;
}

std::vector<std::string> RunRegistry::list() const {
  std::vector<std::string> out;
  DIR* d = ::opendir(base_.c_str());
  if (!d) return out;
  while (auto* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (valid_id(n)) out.push_back(n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

bool RunRegistry::exists(const std::string& id) const {
  struct stat st {};
  return ::stat(dir(id).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

Result<RunState> RunRegistry::load(const std::string& id) const {
  std::ifstream in(state_path(id));
  if (!in) return os_error(ENOENT, "reading " + state_path(id));
  try {
    return RunState::from_json(nlohmann::json::parse(in));
  } catch (const std::exception& e) {
    return os_error(EINVAL, "parsing " + state_path(id) + ": " + e.what());
  }
}

Status RunRegistry::save(const RunState& s) const {
  std::string tmp = state_path(s.id) + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return errno_error("writing " + tmp);
    out << s.to_json().dump(2) << "\n";
    if (!out.flush()) return errno_error("writing " + tmp);
  }
  if (::rename(tmp.c_str(), state_path(s.id).c_str()) != 0)
    return errno_error("replacing " + state_path(s.id));
  return {};
}

Status RunRegistry::remove_dir(const std::string& id) const {
  // Renamed out of sight first, so nobody sees a run half removed (its lock
  // file gone, its state still there) and takes it for a dead one; the lock
  // file goes last, so an unlocked ".gone-" directory is a dead remover's.
  std::string gone = base_ + "/" + kGonePrefix + id;
  std::error_code ec;
  std::filesystem::remove_all(gone, ec);  // a remover of this id killed mid-way
  if (::rename(dir(id).c_str(), gone.c_str()) != 0 && errno != ENOENT) return errno_error("removing " + dir(id));
  for (int attempt = 0; attempt < 5; ++attempt) {  // a last log line may land while it goes
    ec.clear();
    for (const auto& e : std::filesystem::directory_iterator(gone, ec))
      if (e.path().filename() != "lock") std::filesystem::remove_all(e.path(), ec);
    if (ec == std::errc::no_such_file_or_directory) ec.clear();
    if (!ec) {
      release(id);  // before the last trace goes: no moment with a record and no directory
      ::unlink((gone + "/lock").c_str());
      if (::rmdir(gone.c_str()) != 0 && errno != ENOENT) ec = std::error_code(errno, std::generic_category());
    }
    if (ec != std::errc::directory_not_empty) break;
    ::usleep(20000);
  }
  if (ec) return std::system_error(ec, "removing " + gone);
  return {};
}

std::string RunRegistry::new_id() const {
  std::random_device rd;
  for (;;) {
    std::string id = fmt::format("{:04x}", rd() & 0xffff);
    if (!std::isalpha(static_cast<unsigned char>(id[0]))) id[0] = static_cast<char>('a' + (rd() % 6));
    if (!exists(id) && ::access((owners_ + "/" + id + ".json").c_str(), F_OK) != 0 &&
        list_netns(netns_prefix(id)).empty())
      return id;
  }
}

uint64_t process_start_time(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s;
  if (!std::getline(in, s)) return 0;
  auto close = s.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(s.substr(close + 2));
  std::string field;
  // fields after the command: state is field 3; start time is field 22
  for (int i = 3; i <= 22; ++i) {
    if (!(rest >> field)) return 0;
    if (i == 3 && (field == "Z" || field == "X")) return 0;  // exited, not yet reaped
  }
  return std::stoull(field);
}

std::vector<std::string> process_cmdline(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::vector<std::string> out;
  std::string arg;
  while (std::getline(in, arg, '\0')) out.push_back(arg);
  return out;
}

namespace {

// "lanes supervise ID --state-dir BASE ...": the id and base of a
// supervisor's command line, or nullopt if PID is not a lanes supervisor.
std::optional<std::pair<std::string, std::string>> supervisor_args(pid_t pid) {
  auto argv = process_cmdline(pid);
  if (argv.size() < 5 || argv[1] != "supervise" || argv[3] != "--state-dir") return std::nullopt;
  if (std::filesystem::path(argv[0]).filename() != "lanes") return std::nullopt;
  // the program itself must be a lanes binary, not a process that took the name
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec);
  // "lanes (deleted)": the binary was rebuilt or upgraded while the run was
  // up; the process is still the supervisor it was
  if (ec || (exe.filename() != "lanes" && exe.filename() != "lanes (deleted)")) return std::nullopt;
  return std::make_pair(argv[2], argv[4]);
}

}  // namespace

bool is_supervisor_of(pid_t pid, uint64_t start_time, const std::string& id, const std::string& base) {
  if (pid <= 1) return false;
  uint64_t st = process_start_time(pid);
  if (st == 0 || (start_time != 0 && st != start_time)) return false;
  auto a = supervisor_args(pid);
  return a && a->first == id && a->second == base && process_start_time(pid) == st;
}

std::vector<SupervisorProcess> find_supervisors(const std::string& base) {
  std::vector<SupervisorProcess> out;
  for (pid_t pid : list_pids()) {
    if (pid <= 1 || pid == ::getpid()) continue;
    uint64_t st = process_start_time(pid);
    if (st == 0) continue;
    auto a = supervisor_args(pid);
    if (a && a->second == base) out.push_back({a->first, pid, st});
  }
  return out;
}

std::vector<std::pair<pid_t, uint64_t>> find_supervisors(const std::string& id, const std::string& base) {
  std::vector<std::pair<pid_t, uint64_t>> out;
  for (const auto& s : find_supervisors(base))
    if (s.id == id) out.emplace_back(s.pid, s.start_time);
  return out;
}

}  // namespace lanes::testbed
