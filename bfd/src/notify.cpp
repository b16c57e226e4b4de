#include "lanes/bfd/notify.hpp"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "lanes/testbed/log.hpp"

namespace lanes::bfd {

using testbed::errno_error;
using testbed::Fd;
using testbed::os_error;
using testbed::Result;

namespace {

constexpr size_t kMaxMessage = 1 << 16;

std::optional<sockaddr_un> unix_addr(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof a.sun_path) return std::nullopt;
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
}

}  // namespace

std::string encode_verdicts(const Verdicts& v) { return nlohmann::json{{"usable", v}}.dump(); }

std::optional<Verdicts> decode_verdicts(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("usable") || !j["usable"].is_object()) return std::nullopt;
  Verdicts v;
  for (const auto& [k, u] : j["usable"].items()) {
    if (!u.is_boolean()) return std::nullopt;
    v[k] = u.get<bool>();
  }
  return v;
}

Result<Notifier> Notifier::open(const std::string& path) {
  auto a = unix_addr(path);
  if (!a) return os_error(ENAMETOOLONG, "BFD verdict socket " + path + ": the path is longer than a socket's");
  Fd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return errno_error("BFD verdict socket " + path);
  ::unlink(path.c_str());  // an earlier bfdd's, killed
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&*a), sizeof *a) != 0 || ::listen(fd.get(), 8) != 0)
    return errno_error("BFD verdict socket " + path);
  Notifier n;
  n.path_ = path;
  n.listen_ = std::move(fd);
  return n;
}

void Notifier::accept(const Verdicts& current) {
  for (;;) {
    Fd c(::accept4(listen_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!c) return;
    std::string m = encode_verdicts(current);
    if (::send(c.get(), m.data(), m.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(m.size()))
      clients_.push_back(std::move(c));
  }
}

void Notifier::publish(const Verdicts& v) {
  std::string m = encode_verdicts(v);
  std::erase_if(clients_, [&](const Fd& c) {
    return ::send(c.get(), m.data(), m.size(), MSG_NOSIGNAL | MSG_DONTWAIT) != static_cast<ssize_t>(m.size());
  });
}

bool VerdictClient::connect() {
  if (fd_) return true;
  auto a = unix_addr(path_);
  if (!a) return false;
  Fd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd || ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&*a), sizeof *a) != 0) return false;
  fd_ = std::move(fd);
  return true;
}

std::optional<Verdicts> VerdictClient::read() {
  std::optional<Verdicts> newest;
  std::string buf(kMaxMessage, '\0');
  while (fd_) {
    ssize_t n = ::recv(fd_.get(), buf.data(), buf.size(), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
    if (n <= 0) {
      fd_ = Fd();  // bfdd is gone
      break;
    }
    if (auto v = decode_verdicts(buf.substr(0, static_cast<size_t>(n)))) newest = std::move(v);
  }
  return newest;
}

VerdictFollower::VerdictFollower(testbed::EventLoop& loop, std::string path, std::function<void(const Verdicts&)> fn)
    : loop_(loop), client_(std::move(path)), fn_(std::move(fn)) {
  try_connect();
}

VerdictFollower::~VerdictFollower() {
  if (watched_ >= 0) loop_.unwatch(watched_);
  if (retry_) loop_.cancel(*retry_);
}

void VerdictFollower::try_connect() {
  retry_.reset();
  if (client_.connect()) {
    watched_ = client_.fd();
    if (loop_.watch(watched_, EPOLLIN, [this](uint32_t) { readable(); })) {
      log::info("following BFD verdicts at {}", client_.path());
      return;
    }
    watched_ = -1;
  }
  retry_ = loop_.at(testbed::EventLoop::Clock::now() + std::chrono::milliseconds(200), [this] { try_connect(); });
}

void VerdictFollower::readable() {
  if (auto v = client_.read()) fn_(*v);
  if (client_.connected()) return;
  // bfdd went away: the last verdicts stand until it is back
  log::warn("BFD verdicts at {} ended; connecting again", client_.path());
  loop_.unwatch(watched_);
  watched_ = -1;
  try_connect();
}

}  // namespace lanes::bfd
