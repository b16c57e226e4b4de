#include "lanes/vip/session.hpp"

#include <algorithm>

namespace lanes::vip {

const char* to_string(State s) {
  switch (s) {
    case State::idle: return "idle";
    case State::open_sent: return "opensent";
    case State::open_confirm: return "openconfirm";
    case State::established: return "established";
  }
  return "?";
}

Session::Session(SessionConfig cfg) : cfg_(cfg) {}

void Session::reset() {
  state_ = State::idle;
  buf_.clear();
  ctx_ = {};
  hold_ = 0;
  ipv4_ = ipv6_ = false;
}

std::vector<Action> Session::fail(uint8_t code, uint8_t subcode, const std::string& why, std::vector<uint8_t> data) {
  std::vector<Action> a;
  bool was_up = state_ == State::established;
  a.push_back({Action::Kind::send, encode(Notification{code, subcode, std::move(data)}), {}});
  a.push_back({Action::Kind::close, {}, why});
  if (was_up) a.push_back({Action::Kind::down, {}, why});
  last_error_ = why;
  reset();
  return a;
}

std::vector<Action> Session::connected(Clock::time_point now) {
  reset();
  Open o;
  o.asn = cfg_.local_as;
  o.hold_time = cfg_.hold_time;
  o.bgp_id = cfg_.bgp_id;
  o.mp_ipv4 = true;
  o.mp_ipv6 = cfg_.ipv6;
  o.route_refresh = true;
  if (cfg_.add_path_send) {
    o.add_path.push_back({Afi::ipv4, 2});
    if (cfg_.ipv6) o.add_path.push_back({Afi::ipv6, 2});
  }
  state_ = State::open_sent;
  // RFC 4271: a large hold timer until the peer's OPEN says otherwise
  hold_deadline_ = now + std::chrono::seconds(240);
  return {{Action::Kind::send, encode(o), {}}};
}

std::vector<Action> Session::handle(const Message& m, Clock::time_point now) {
  std::vector<Action> out;
  if (auto* n = std::get_if<Notification>(&m)) {
    bool was_up = state_ == State::established;
    last_error_ = "peer sent NOTIFICATION " + describe(*n);
    reset();
    out.push_back({Action::Kind::close, {}, last_error_});
    if (was_up) out.push_back({Action::Kind::down, {}, last_error_});
    return out;
  }
  switch (state_) {
    case State::idle:
      return {};
    case State::open_sent: {
      auto* o = std::get_if<Open>(&m);
      if (!o) return fail(err::kFsm, 1, "unexpected message in OpenSent");
      if (o->asn != cfg_.peer_as) {
        std::vector<uint8_t> data = {static_cast<uint8_t>(o->asn >> 8), static_cast<uint8_t>(o->asn)};
        return fail(err::kOpen, err::kBadPeerAs,
                    "peer AS " + std::to_string(o->asn) + ", expected " + std::to_string(cfg_.peer_as), data);
      }
      if (o->bgp_id == cfg_.bgp_id) return fail(err::kOpen, err::kBadBgpId, "peer has our BGP identifier");
      hold_ = std::min(cfg_.hold_time, o->hold_time);
      // what both ends negotiated: the unicast families (an OPEN without
      // any MP capability means IPv4 alone, RFC 4760 §8), 4-octet ASNs
      ipv4_ = o->mp_ipv4;
      ipv6_ = cfg_.ipv6 && o->mp_ipv6;
      ctx_.four_octet_as = o->four_octet;
      // ADD-PATH: we send path ids where we offered send and the peer
      // receive; we never offer receive, so the peer sends none
      for (const auto& ap : o->add_path) {
        bool peer_rx = ap.send_receive & 1;
        if (ap.afi == Afi::ipv4) ctx_.add_path_tx_v4 = cfg_.add_path_send && peer_rx;
        if (ap.afi == Afi::ipv6) ctx_.add_path_tx_v6 = cfg_.add_path_send && peer_rx;
      }
      // Without path ids a path per NIC would replace the one before, and
      // one NIC's withdrawal would withdraw the prefix: a peer that does
      // not receive ADD-PATH is refused, naming the capability (RFC 5492)
      if (cfg_.add_path_send && ((ipv4_ && !ctx_.add_path_tx_v4) || (ipv6_ && !ctx_.add_path_tx_v6))) {
        std::vector<uint8_t> cap = {69, 0};
        for (auto [on, afi] : {std::pair{ipv4_, Afi::ipv4}, std::pair{ipv6_, Afi::ipv6}})
          if (on) cap.insert(cap.end(), {0, static_cast<uint8_t>(afi), kSafiUnicast, 2});
        cap[1] = static_cast<uint8_t>(cap.size() - 2);
        return fail(err::kOpen, err::kUnsupportedCapability,
                    "the peer does not receive ADD-PATH path ids, which add-path mode needs (vip=\"per-nic\" "
                    "works without them)",
                    cap);
      }
      state_ = State::open_confirm;
      out.push_back({Action::Kind::send, encode_keepalive(), {}});
      hold_deadline_ = hold_ ? now + std::chrono::seconds(hold_) : Clock::time_point::max();
      keepalive_due_ = hold_ ? now + std::chrono::seconds(std::max(1, hold_ / 3)) : Clock::time_point::max();
      return out;
    }
    case State::open_confirm:
      if (std::holds_alternative<Keepalive>(m)) {
        state_ = State::established;
        if (hold_) hold_deadline_ = now + std::chrono::seconds(hold_);
        out.push_back({Action::Kind::up, {}, {}});
        return out;
      }
      return fail(err::kFsm, 2, "unexpected message in OpenConfirm");
    case State::established:
      if (std::holds_alternative<Open>(m)) return fail(err::kFsm, 3, "OPEN in Established");
      if (std::holds_alternative<Update>(m)) ++updates_received_;
      if (hold_) hold_deadline_ = now + std::chrono::seconds(hold_);
      // ROUTE-REFRESH (RFC 2918) of a family the session has: everything of
      // it again; of another, ignored
      if (auto* rr = std::get_if<RouteRefresh>(&m))
        if (rr->safi == kSafiUnicast && ((rr->afi == Afi::ipv4 && ipv4_) || (rr->afi == Afi::ipv6 && ipv6_)))
          out.push_back({Action::Kind::refresh, {}, {}, rr->afi});
      return out;
  }
  return {};
}

std::vector<Action> Session::received(std::span<const uint8_t> bytes, Clock::time_point now) {
  buf_.insert(buf_.end(), bytes.begin(), bytes.end());
  std::vector<Action> out;
  size_t off = 0;
  while (state_ != State::idle) {
    auto rest = std::span<const uint8_t>(buf_).subspan(off);
    auto fl = frame_length(rest);
    if (auto* e = std::get_if<DecodeError>(&fl)) {
      auto a = fail(e->notification.code, e->notification.subcode, e->what, e->notification.data);
      out.insert(out.end(), a.begin(), a.end());
      return out;
    }
    size_t len = std::get<size_t>(fl);
    if (len == 0 || len > rest.size()) break;
    auto d = decode(rest.first(len), ctx_);
    off += len;
    if (auto* e = std::get_if<DecodeError>(&d)) {
      if (e->treat_as_withdraw) {
        // RFC 7606: the session stays; the routes in that UPDATE are gone
        last_error_ = e->what;
        ++updates_received_;
        if (hold_) hold_deadline_ = now + std::chrono::seconds(hold_);
        continue;
      }
      auto a = fail(e->notification.code, e->notification.subcode, e->what, e->notification.data);
      out.insert(out.end(), a.begin(), a.end());
      return out;
    }
    auto a = handle(std::get<Message>(d), now);
    out.insert(out.end(), a.begin(), a.end());
  }
  if (state_ != State::idle) buf_.erase(buf_.begin(), buf_.begin() + static_cast<long>(off));
  return out;
}

std::vector<Action> Session::tick(Clock::time_point now) {
  if (state_ == State::idle) return {};
  if (now >= hold_deadline_) return fail(err::kHoldTimer, 0, "hold timer expired");
  std::vector<Action> out;
  if ((state_ == State::established || state_ == State::open_confirm) && hold_ && now >= keepalive_due_) {
    out.push_back({Action::Kind::send, encode_keepalive(), {}});
    keepalive_due_ = now + std::chrono::seconds(std::max(1, hold_ / 3));
  }
  return out;
}

Clock::time_point Session::next_deadline() const {
  if (state_ == State::idle) return Clock::time_point::max();
  auto t = hold_deadline_;
  if ((state_ == State::established || state_ == State::open_confirm) && hold_) t = std::min(t, keepalive_due_);
  return t;
}

std::vector<Action> Session::stop(uint8_t code, uint8_t subcode) {
  if (state_ == State::idle) return {};
  return fail(code, subcode, "stopped");
}

std::vector<Action> Session::transport_lost(const std::string& why) {
  bool was_up = state_ == State::established;
  std::vector<Action> out;
  if (state_ != State::idle) out.push_back({Action::Kind::close, {}, why});
  if (was_up) out.push_back({Action::Kind::down, {}, why});
  last_error_ = why;
  reset();
  return out;
}

std::vector<Action> Session::send(const Update& u) {
  if (state_ != State::established) return {};
  Update x = u;
  if (!ipv4_) x.withdrawn.clear(), x.nlri.clear();
  if (!ipv6_) x.mp_reach.clear(), x.mp_unreach.clear();
  if (x.end_of_rib()) return {};  // nothing of it is for this peer
  ++updates_sent_;
  return {{Action::Kind::send, encode(x, ctx_), {}}};
}

std::vector<Action> Session::end_of_rib(Afi afi) {
  if (state_ != State::established || (afi == Afi::ipv4 ? !ipv4_ : !ipv6_)) return {};
  return {{Action::Kind::send, encode_end_of_rib(afi), {}}};
}

}  // namespace lanes::vip
