#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstring>

#include "lanes/switches/frr.hpp"

namespace lanes::switches {

using namespace lanes::testbed;
using Clock = std::chrono::steady_clock;

namespace {

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

uint64_t u64(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_unsigned() ? it->get<uint64_t>()
         : it != j.end() && it->is_number_integer() ? static_cast<uint64_t>(std::max<int64_t>(0, it->get<int64_t>()))
                                                    : 0;
}

}  // namespace

Result<FrrVty> FrrVty::connect(const std::string& path, std::chrono::milliseconds timeout) {
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (path.size() >= sizeof sa.sun_path) return os_error(ENAMETOOLONG, "the vty socket path " + path);
  std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno_error("socket for " + path);
  timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    int e = errno;
    ::close(fd);
    return os_error(e, "connecting to FRR's vty at " + path);
  }
  return FrrVty(fd, path);
}

FrrVty::~FrrVty() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::string> FrrVty::run(const std::string& command, std::chrono::milliseconds timeout) {
  if (fd_ < 0) return os_error(EBADF, "the vty connection to " + path_ + " is closed");
  auto deadline = Clock::now() + timeout;
  // the command with its NUL, as vtysh sends it
  std::string out = command;
  out.push_back('\0');
  for (size_t sent = 0; sent < out.size();) {
    ssize_t n = ::send(fd_, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return errno_error(fmt::format("sending '{}' to {}", command, path_));
    sent += static_cast<size_t>(n);
  }
  // the answer ends with three NULs and the command's status
  std::string in;
  char buf[65536];
  while (in.size() < 4 || in[in.size() - 4] != '\0' || in[in.size() - 3] != '\0' || in[in.size() - 2] != '\0') {
    pollfd p{fd_, POLLIN, 0};
    int r = ::poll(&p, 1, remaining_ms(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      ::close(fd_);  // the answer's rest would be read as the next one's
      fd_ = -1;
      return os_error(ETIMEDOUT, fmt::format("'{}' at {}: no complete answer in {} ms", command, path_,
                                             timeout.count()));
    }
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd_);
      fd_ = -1;
      return os_error(n == 0 ? ECONNRESET : errno, fmt::format("'{}' at {}: the daemon closed the vty", command, path_));
    }
    in.append(buf, static_cast<size_t>(n));
  }
  int status = static_cast<unsigned char>(in.back());
  in.resize(in.size() - 4);
  if (status != 0)
    return os_error(EINVAL, fmt::format("'{}' at {}: FRR says (status {}): {}", command, path_, status, in));
  return in;
}

std::vector<FrrSession> parse_frr_neighbors(const std::string& text) {
  std::vector<FrrSession> out;
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return out;
  for (const auto& [address, nb] : j.items()) {
    if (!nb.is_object() || !nb.contains("bgpState")) continue;
    FrrSession s;
    s.session.neighbor = address;
    s.session.description = nb.value("nbrDesc", "");
    s.session.peer_as = static_cast<uint32_t>(u64(nb, "remoteAs"));
    std::string state = nb.value("bgpState", "");
    // GoBGP's numbering of the FSM, so that one name table serves both
    static const char* kStates[] = {"", "Idle", "Connect", "Active", "OpenSent", "OpenConfirm", "Established"};
    for (int k = 1; k <= 6; ++k)
      if (state == kStates[k]) s.session.state = k;
    if (s.session.established()) s.session.up_since_unix = static_cast<int64_t>(u64(nb, "bgpTimerUpEstablishedEpoch"));
    if (auto afs = nb.find("addressFamilyInfo"); afs != nb.end() && afs->is_object())
      for (const auto& [name, af] : afs->items()) {
        s.accepted += u64(af, "acceptedPrefixCounter");
        if (name == "ipv4Unicast") s.families.push_back(AF_INET);
        if (name == "ipv6Unicast") s.families.push_back(AF_INET6);
      }
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<BgpRoute> parse_frr_routes(const std::string& text, const std::string& prefix) {
  std::vector<BgpRoute> out;
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return out;
  auto add = [&](const std::string& pfx, const nlohmann::json& paths) {
    if (!paths.is_array()) return;
    for (const auto& p : paths) {
      BgpRoute r;
      r.prefix = pfx;
      // the table marks the best path "bestpath": true, one prefix's view
      // "bestpath": {"overall": true}; an equal-cost path "multipath": true
      r.best = p.value("multipath", false);
      if (auto b = p.find("bestpath"); b != p.end())
        r.best = r.best || (b->is_boolean() && b->get<bool>()) || (b->is_object() && b->value("overall", false));
      for (const auto& nh : p.value("nexthops", nlohmann::json::array()))
        if (nh.value("scope", "global") == "global" && nh.value("used", true)) {
          r.next_hop = nh.value("ip", "");
          break;
        }
      // a path this switch originated has no peer
      const auto& peer = p.value("peer", nlohmann::json::object());
      r.neighbor = p.value("peerId", peer.value("peerId", ""));
      if (r.neighbor == "(unspec)" || r.neighbor == "0.0.0.0" || r.neighbor == "::") r.neighbor.clear();
      out.push_back(std::move(r));
    }
  };
  if (!prefix.empty()) {
    // `show bgp ipv4 unicast PREFIX json`: {"prefix": ..., "paths": [...]}
    if (j.contains("paths")) add(j.value("prefix", prefix), j["paths"]);
    return out;
  }
  // the whole table: {"routes": {"PREFIX": [paths]}}
  if (auto routes = j.find("routes"); routes != j.end() && routes->is_object())
    for (const auto& [pfx, paths] : routes->items()) add(pfx, paths);
  return out;
}

uint64_t parse_frr_received(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  return j.is_object() ? u64(j, "totalPrefixCounter") : 0;
}

Result<std::vector<FrrSession>> frr_sessions(FrrVty& vty, bool with_received) {
  auto text = vty.run("show bgp neighbors json");
  if (!text) return text.error();
  auto sessions = parse_frr_neighbors(text.value());
  if (!with_received) return sessions;
  for (auto& s : sessions) {
    if (!s.session.established()) continue;
    for (int fam : s.families) {
      auto r = vty.run(fmt::format("show bgp {} unicast neighbors {} received-routes json",
                                   fam == AF_INET6 ? "ipv6" : "ipv4", s.session.neighbor));
      if (!r) return r.error();
      s.session.received += parse_frr_received(r.value());
    }
  }
  return sessions;
}

Result<std::vector<BgpRoute>> frr_routes(FrrVty& vty, int family, const std::string& prefix) {
  std::string cmd = fmt::format("show bgp {} unicast {}json", family == AF_INET6 ? "ipv6" : "ipv4",
                                prefix.empty() ? "" : prefix + " ");
  auto text = vty.run(cmd, std::chrono::milliseconds(10000));
  if (!text) return text.error();
  return parse_frr_routes(text.value(), prefix);
}

}  // namespace lanes::switches
