#pragma once
// How lanes-bfdd tells its clients (the FIB agent in a switch, the host
// agent in a host) which paths are usable: a Unix seqpacket socket in the
// node's run directory; every message is the whole verdict, one JSON object
// {"usable": {"<ifname>": true|false, ...}}, sent to each client when it
// connects and whenever a verdict changes. Clients and bfdd come and go on
// their own (each is restarted by the supervisor): a client keeps the last
// verdicts it heard while bfdd is away, and connects again.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lanes/testbed/event_loop.hpp"
#include "lanes/testbed/handle.hpp"
#include "lanes/testbed/result.hpp"

namespace lanes::bfd {

using Verdicts = std::map<std::string, bool>;  // ifname → usable

std::string encode_verdicts(const Verdicts& v);
// nullopt if TEXT is not a verdict message
std::optional<Verdicts> decode_verdicts(const std::string& text);

// bfdd's end.
class Notifier {
 public:
  // Listens at PATH (a stale socket file there is replaced).
  static testbed::Result<Notifier> open(const std::string& path);
  int fd() const { return listen_.get(); }
  // A client is waiting (fd() readable): it gets CURRENT at once.
  void accept(const Verdicts& current);
  // Every client gets V; clients gone are dropped.
  void publish(const Verdicts& v);
  size_t clients() const { return clients_.size(); }

 private:
  std::string path_;
  testbed::Fd listen_;
  std::vector<testbed::Fd> clients_;
};

// A client's end.
class VerdictClient {
 public:
  explicit VerdictClient(std::string path) : path_(std::move(path)) {}
  // Connects if not connected; true when connected.
  bool connect();
  bool connected() const { return static_cast<bool>(fd_); }
  int fd() const { return fd_.get(); }
  // Reads what came (fd() readable): the newest verdicts, if any. On the
  // socket's end (bfdd gone) the client is disconnected.
  std::optional<Verdicts> read();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  testbed::Fd fd_;
};

// A VerdictClient on a daemon's event loop: connected, and again every
// 200 ms while bfdd is away; FN gets every verdict message.
class VerdictFollower {
 public:
  VerdictFollower(testbed::EventLoop& loop, std::string path, std::function<void(const Verdicts&)> fn);
  ~VerdictFollower();
  VerdictFollower(const VerdictFollower&) = delete;
  VerdictFollower& operator=(const VerdictFollower&) = delete;
  bool connected() const { return client_.connected(); }

 private:
  void try_connect();
  void readable();

  testbed::EventLoop& loop_;
  VerdictClient client_;
  std::function<void(const Verdicts&)> fn_;
  int watched_ = -1;
  std::optional<testbed::EventLoop::TimerId> retry_;
};

}  // namespace lanes::bfd
