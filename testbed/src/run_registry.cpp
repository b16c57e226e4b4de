#include "lanes/testbed/run_registry.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "lanes/testbed/log.hpp"
#include "lanes/testbed/netns.hpp"

namespace lanes::testbed {

nlohmann::json RunState::to_json() const {
  nlohmann::json d = nlohmann::json::array();
  for (const auto& r : daemons)
    d.push_back({{"name", r.name}, {"node", r.node}, {"pid", r.pid}, {"start_time", r.start_time},
                 {"log", r.log}});
  return {{"id", id},         {"topology_name", topology_name}, {"topology_file", topology_file},
          {"phase", phase},   {"owner", owner},                 {"created_unix", created_unix},
          {"daemons", d},     {"extra", extra}};
}

RunState RunState::from_json(const nlohmann::json& j) {
  RunState s;
  s.id = j.value("id", "");
  s.topology_name = j.value("topology_name", "");
  s.topology_file = j.value("topology_file", "");
  s.phase = j.value("phase", "");
  s.owner = j.value("owner", 0);
  s.created_unix = j.value("created_unix", int64_t{0});
  for (const auto& d : j.value("daemons", nlohmann::json::array()))
    s.daemons.push_back({d.value("name", ""), d.value("node", ""), d.value("pid", 0),
                         d.value("start_time", uint64_t{0}), d.value("log", "")});
  s.extra = j.value("extra", nlohmann::json::object());
  return s;
}

RunRegistry::RunRegistry(std::string base) : base_(std::move(base)) {}

std::string RunRegistry::default_base() {
  if (const char* e = std::getenv("LANES_STATE_DIR"); e && *e) return e;
  return "/run/lanes";
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
  std::error_code ec;
  std::filesystem::create_directories(base_, ec);
  if (ec) return std::system_error(ec, "creating the state directory " + base_);
  if (::mkdir(dir(id).c_str(), 0755) != 0) return errno_error("creating run directory " + dir(id));
  return lock(id, false);
}

Result<RunLock> RunRegistry::lock(const std::string& id, bool wait) const {
  std::string p = dir(id) + "/lock";
  Fd fd(::open(p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!fd) return errno_error("opening " + p);
  if (::flock(fd.get(), LOCK_EX | (wait ? 0 : LOCK_NB)) != 0)
    return errno_error("locking run " + id + " (another lanes process is working on it)");
  return RunLock(std::move(fd));
}

bool RunRegistry::in_use(const std::string& id) const {
  std::string p = dir(id) + "/lock";
  Fd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return false;
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) return errno == EWOULDBLOCK;
  ::flock(fd.get(), LOCK_UN);
  return false;
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
  std::error_code ec;
  std::filesystem::remove_all(dir(id), ec);
  if (ec) return std::system_error(ec, "removing " + dir(id));
  return {};
}

std::string RunRegistry::new_id() const {
  std::random_device rd;
  for (;;) {
    std::string id = fmt::format("{:04x}", rd() & 0xffff);
    if (!std::isalpha(static_cast<unsigned char>(id[0]))) id[0] = static_cast<char>('a' + (rd() % 6));
    if (!exists(id) && list_netns(netns_prefix(id)).empty()) return id;
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

}  // namespace lanes::testbed
