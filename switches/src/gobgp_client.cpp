#include "lanes/switches/gobgp_client.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <grpcpp/create_channel_posix.h>
#include <grpcpp/grpcpp.h>

#include <fmt/format.h>

#include <mutex>
#include <thread>

#include "attribute.pb.h"
#include "gobgp.grpc.pb.h"
#include "lanes/testbed/handle.hpp"
#include "lanes/testbed/netns.hpp"

namespace lanes::switches {

using namespace lanes::testbed;

struct GobgpClient::Impl {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<apipb::GobgpApi::Stub> stub;
};

namespace {

using std::chrono::milliseconds;

void set_deadline(grpc::ClientContext& ctx, milliseconds timeout) {
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
}

std::system_error rpc_error(const char* what, const grpc::Status& s) {
  int code = s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ? ETIMEDOUT
             : s.error_code() == grpc::StatusCode::UNAVAILABLE    ? ECONNRESET
                                                                   : EIO;
  return os_error(code, fmt::format("gobgpd {}: {}", what, s.error_message()));
}

// A TCP connection to 127.0.0.1:PORT made in the calling thread's namespace.
Result<Fd> dial(uint16_t port, milliseconds timeout) {
  Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s) return errno_error("socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    if (errno != EINPROGRESS) return errno_error(fmt::format("connecting to gobgpd at 127.0.0.1:{}", port));
    pollfd p{s.get(), POLLOUT, 0};
    int n = ::poll(&p, 1, static_cast<int>(timeout.count()));
    if (n == 0) return os_error(ETIMEDOUT, fmt::format("connecting to gobgpd at 127.0.0.1:{}", port));
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (n < 0 || err != 0) return os_error(n < 0 ? errno : err, fmt::format("connecting to gobgpd at 127.0.0.1:{}", port));
  }
  // gRPC takes the socket as it is (non-blocking)
  return s;
}

apipb::Family family_of(int af) {
  apipb::Family f;
  f.set_afi(af == AF_INET6 ? apipb::Family::AFI_IP6 : apipb::Family::AFI_IP);
  f.set_safi(apipb::Family::SAFI_UNICAST);
  return f;
}

// The prefix a path is for ("" when it is not an IP prefix).
std::string prefix_of(const apipb::Path& p) {
  apipb::IPAddressPrefix nlri;
  if (!p.nlri().UnpackTo(&nlri)) return "";
  return nlri.prefix() + "/" + std::to_string(nlri.prefix_len());
}

std::string next_hop_of(const apipb::Path& p) {
  for (const auto& a : p.pattrs()) {
    if (apipb::NextHopAttribute nh; a.UnpackTo(&nh)) return nh.next_hop();
    if (apipb::MpReachNLRIAttribute mp; a.UnpackTo(&mp) && mp.next_hops_size() > 0) return mp.next_hops(0);
  }
  return "";
}

// Adds P to SETS: a withdrawal still names its prefix (an empty set).
void add_path(PathSets& sets, const apipb::Path& p) {
  std::string prefix = prefix_of(p);
  if (prefix.empty()) return;
  auto& v = sets[prefix];
  if (p.is_withdraw()) return;
  if (auto nh = next_hop_of(p); !nh.empty()) v.push_back(std::move(nh));
}

class Watch final : public GobgpWatch {
 public:
  explicit Watch(std::shared_ptr<GobgpClient::Impl> impl) : impl_(std::move(impl)), efd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    apipb::WatchEventRequest req;
    req.mutable_peer();
    auto* f = req.mutable_table()->add_filters();
    f->set_type(apipb::WatchEventRequest::Table::Filter::BEST);
    f->set_init(true);
    reader_ = impl_->stub->WatchEvent(&ctx_, req);
    thread_ = std::thread([this] { read_loop(); });
  }
  ~Watch() override {
    ctx_.TryCancel();
    thread_.join();
  }
  int fd() const override { return efd_.get(); }
  std::vector<Event> take() override {
    uint64_t n;
    (void)!::read(efd_.get(), &n, sizeof n);
    std::lock_guard lk(mu_);
    return std::exchange(events_, {});
  }

 private:
  void read_loop() {
    apipb::WatchEventResponse rsp;
    bool first_table = true;
    while (reader_->Read(&rsp)) {
      Event e;
      if (rsp.has_table()) {
        e.kind = Event::Kind::table;
        e.snapshot = std::exchange(first_table, false);
        for (const auto& p : rsp.table().paths()) add_path(e.paths, p);
      } else if (rsp.has_peer()) {
        const auto& pe = rsp.peer();
        if (pe.type() != apipb::WatchEventResponse::PeerEvent::INIT &&
            pe.type() != apipb::WatchEventResponse::PeerEvent::STATE)
          continue;
        e.kind = Event::Kind::peer;
        e.neighbor = pe.peer().state().neighbor_address();
        e.state = static_cast<int>(pe.peer().state().session_state());
      } else {
        continue;
      }
      push(std::move(e));
    }
    (void)reader_->Finish();
    Event closed;
    closed.kind = Event::Kind::closed;
    push(std::move(closed));
  }
  void push(Event e) {
    {
      std::lock_guard lk(mu_);
      events_.push_back(std::move(e));
    }
    uint64_t one = 1;
    (void)!::write(efd_.get(), &one, sizeof one);
  }

  std::shared_ptr<GobgpClient::Impl> impl_;
  Fd efd_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReader<apipb::WatchEventResponse>> reader_;
  std::mutex mu_;
  std::vector<Event> events_;
  std::thread thread_;
};

}  // namespace

const char* session_state_name(int s) {
  static const char* names[] = {"unknown", "idle", "connect", "active", "opensent", "openconfirm", "established"};
  return s >= 0 && s <= 6 ? names[s] : "unknown";
}

Result<GobgpClient> GobgpClient::connect(int netns_fd, uint16_t port, milliseconds timeout) {
  Fd sock;
  if (netns_fd < 0) {
    auto s = dial(port, timeout);
    if (!s) return s.error();
    sock = std::move(s).value();
  } else {
    auto st = run_in_netns(
        netns_fd,
        [&]() -> Status {
          auto s = dial(port, timeout);
          if (!s) return s.error();
          sock = std::move(s).value();
          return {};
        },
        "connecting to gobgpd");
    if (!st) return st.error();
  }
  auto impl = std::make_shared<Impl>();
  impl->channel = grpc::CreateInsecureChannelFromFd("gobgpd", sock.release());
  impl->stub = apipb::GobgpApi::NewStub(impl->channel);
  return GobgpClient(std::move(impl));
}

Status GobgpClient::ping(milliseconds timeout) const {
  grpc::ClientContext ctx;
  set_deadline(ctx, timeout);
  apipb::GetBgpResponse rsp;
  auto s = impl_->stub->GetBgp(&ctx, apipb::GetBgpRequest(), &rsp);
  if (!s.ok()) return rpc_error("GetBgp", s);
  if (rsp.global().asn() == 0) return os_error(EAGAIN, "gobgpd's BGP server has not started");
  return {};
}

Result<std::vector<BgpSession>> GobgpClient::sessions(milliseconds timeout) const {
  grpc::ClientContext ctx;
  set_deadline(ctx, timeout);
  auto reader = impl_->stub->ListPeer(&ctx, apipb::ListPeerRequest());
  std::vector<BgpSession> out;
  apipb::ListPeerResponse rsp;
  while (reader->Read(&rsp)) {
    const auto& p = rsp.peer();
    BgpSession s;
    s.neighbor = p.conf().neighbor_address();
    s.description = p.conf().description();
    s.peer_as = p.conf().peer_asn();
    s.state = static_cast<int>(p.state().session_state());
    for (const auto& af : p.afi_safis()) s.received += af.state().received();
    if (s.established()) s.up_since_unix = p.timers().state().uptime().seconds();
    out.push_back(std::move(s));
  }
  if (auto s = reader->Finish(); !s.ok()) return rpc_error("ListPeer", s);
  return out;
}

Result<std::vector<BgpRoute>> GobgpClient::routes(int family, const std::string& prefix, milliseconds timeout) const {
  grpc::ClientContext ctx;
  set_deadline(ctx, timeout);
  apipb::ListPathRequest req;
  req.set_table_type(apipb::GLOBAL);
  *req.mutable_family() = family_of(family);
  if (!prefix.empty()) {
    auto* p = req.add_prefixes();
    p->set_prefix(prefix);
    p->set_type(apipb::TableLookupPrefix::EXACT);
  }
  auto reader = impl_->stub->ListPath(&ctx, req);
  std::vector<BgpRoute> out;
  apipb::ListPathResponse rsp;
  while (reader->Read(&rsp))
    for (const auto& p : rsp.destination().paths())
      out.push_back({rsp.destination().prefix(), next_hop_of(p), p.neighbor_ip(), p.best()});
  if (auto s = reader->Finish(); !s.ok()) return rpc_error("ListPath", s);
  return out;
}

Status GobgpClient::originate(const std::string& prefix, milliseconds timeout) const {
  auto slash = prefix.find('/');
  if (slash == std::string::npos) return os_error(EINVAL, "not a prefix: " + prefix);
  bool v6 = prefix.find(':') != std::string::npos;
  apipb::IPAddressPrefix nlri;
  nlri.set_prefix(prefix.substr(0, slash));
  nlri.set_prefix_len(static_cast<uint32_t>(std::stoul(prefix.substr(slash + 1))));
  apipb::AddPathRequest req;
  req.set_table_type(apipb::GLOBAL);
  auto* path = req.mutable_path();
  *path->mutable_family() = family_of(v6 ? AF_INET6 : AF_INET);
  path->mutable_nlri()->PackFrom(nlri);
  apipb::OriginAttribute origin;  // IGP
  path->add_pattrs()->PackFrom(origin);
  if (v6) {
    apipb::MpReachNLRIAttribute mp;
    *mp.mutable_family() = family_of(AF_INET6);
    mp.add_next_hops("::");
    mp.add_nlris()->PackFrom(nlri);
    path->add_pattrs()->PackFrom(mp);
  } else {
    apipb::NextHopAttribute nh;
    nh.set_next_hop("0.0.0.0");
    path->add_pattrs()->PackFrom(nh);
  }
  grpc::ClientContext ctx;
  set_deadline(ctx, timeout);
  apipb::AddPathResponse rsp;
  if (auto s = impl_->stub->AddPath(&ctx, req, &rsp); !s.ok()) return rpc_error("AddPath", s);
  return {};
}

Result<std::map<std::string, std::string>> GobgpClient::peer_configs(milliseconds timeout) const {
  grpc::ClientContext ctx;
  set_deadline(ctx, timeout);
  auto r = impl_->stub->ListPeer(&ctx, apipb::ListPeerRequest());
  std::map<std::string, std::string> out;
  apipb::ListPeerResponse rsp;
  while (r->Read(&rsp)) {
    apipb::Peer peer = rsp.peer();
    // its configuration only: what ListPeer says of the session goes
    peer.clear_state();
    peer.mutable_timers()->clear_state();
    peer.mutable_transport()->set_local_port(0);
    peer.mutable_transport()->set_remote_port(0);
    peer.mutable_transport()->clear_remote_address();
    for (auto& af : *peer.mutable_afi_safis()) af.clear_state();
    out[peer.conf().neighbor_address()] = peer.SerializeAsString();
  }
  if (auto s = r->Finish(); !s.ok()) return rpc_error("ListPeer", s);
  return out;
}

Status GobgpClient::delete_peer(const std::string& neighbor, milliseconds timeout) const {
  grpc::ClientContext ctx;
  set_deadline(ctx, timeout);
  apipb::DeletePeerRequest req;
  req.set_address(neighbor);
  google::protobuf::Empty rsp;
  if (auto s = impl_->stub->DeletePeer(&ctx, req, &rsp); !s.ok()) {
    // gone already (a call that timed out here went through there)
    if (s.error_message().find("can't delete a peer configuration") != std::string::npos) return {};
    return rpc_error("DeletePeer", s);
  }
  return {};
}

Status GobgpClient::add_peer(const std::string& config, milliseconds timeout) const {
  apipb::AddPeerRequest req;
  if (!req.mutable_peer()->ParseFromString(config)) return os_error(EINVAL, "not a peer configuration");
  grpc::ClientContext ctx;
  set_deadline(ctx, timeout);
  google::protobuf::Empty rsp;
  if (auto s = impl_->stub->AddPeer(&ctx, req, &rsp); !s.ok()) {
    if (s.error_message().find("exist") != std::string::npos) return {};  // an earlier try went through
    return rpc_error("AddPeer", s);
  }
  return {};
}

std::vector<GobgpWatch::Event> coalesce_tables(std::vector<GobgpWatch::Event> events) {
  std::vector<GobgpWatch::Event> out;
  for (auto& e : events) {
    bool change = e.kind == GobgpWatch::Event::Kind::table && !e.snapshot;
    if (change && !out.empty() && out.back().kind == GobgpWatch::Event::Kind::table && !out.back().snapshot) {
      for (auto& [prefix, set] : e.paths) out.back().paths[prefix] = std::move(set);
      continue;
    }
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::unique_ptr<GobgpWatch>> GobgpClient::watch() const {
  return std::unique_ptr<GobgpWatch>(std::make_unique<Watch>(impl_));
}

}  // namespace lanes::switches
