#include "lanes/vip/bgp.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <set>

namespace lanes::vip {
namespace {

// A bounds-checked reader over a byte span.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> b) : b_(b) {}
  size_t left() const { return b_.size() - pos_; }
  bool u8(uint8_t& v) {
    if (left() < 1) return false;
    v = b_[pos_++];
    return true;
  }
  bool u16(uint16_t& v) {
    if (left() < 2) return false;
    v = static_cast<uint16_t>(b_[pos_] << 8 | b_[pos_ + 1]);
    pos_ += 2;
    return true;
  }
  bool u32(uint32_t& v) {
    if (left() < 4) return false;
    v = static_cast<uint32_t>(b_[pos_]) << 24 | static_cast<uint32_t>(b_[pos_ + 1]) << 16 |
        static_cast<uint32_t>(b_[pos_ + 2]) << 8 | b_[pos_ + 3];
    pos_ += 4;
    return true;
  }
  bool bytes(size_t n, std::span<const uint8_t>& out) {
    if (left() < n) return false;
    out = b_.subspan(pos_, n);
    pos_ += n;
    return true;
  }

 private:
  std::span<const uint8_t> b_;
  size_t pos_ = 0;
};

class Writer {
 public:
  void u8(uint8_t v) { b_.push_back(v); }
  void u16(uint16_t v) {
    b_.push_back(static_cast<uint8_t>(v >> 8));
    b_.push_back(static_cast<uint8_t>(v));
  }
  void u32(uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) b_.push_back(static_cast<uint8_t>(v >> s));
  }
  void bytes(const uint8_t* p, size_t n) { b_.insert(b_.end(), p, p + n); }
  void bytes(const std::vector<uint8_t>& v) { b_.insert(b_.end(), v.begin(), v.end()); }
  size_t size() const { return b_.size(); }
  void put16_at(size_t at, uint16_t v) {
    b_[at] = static_cast<uint8_t>(v >> 8);
    b_[at + 1] = static_cast<uint8_t>(v);
  }
  std::vector<uint8_t> take() { return std::move(b_); }

 private:
  std::vector<uint8_t> b_;
};

std::vector<uint8_t> frame(MsgType type, const std::vector<uint8_t>& body) {
  Writer w;
  for (int i = 0; i < 16; ++i) w.u8(0xff);
  w.u16(static_cast<uint16_t>(kHeaderLen + body.size()));
  w.u8(static_cast<uint8_t>(type));
  w.bytes(body);
  return w.take();
}

DecodeError error(uint8_t code, uint8_t sub, std::string what, std::vector<uint8_t> data = {}) {
  return DecodeError{{code, sub, std::move(data)}, std::move(what), false, {}};
}

std::vector<uint8_t> be16(uint16_t v) { return {static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v)}; }

// Parses a run of (path id,) length, prefix entries.
bool parse_prefixes(std::span<const uint8_t> b, Afi afi, bool path_ids, std::vector<Prefix>& out) {
  Reader r(b);
  unsigned max = afi == Afi::ipv4 ? 32 : 128;
  while (r.left()) {
    Prefix p;
    p.afi = afi;
    if (path_ids && !r.u32(p.path_id)) return false;
    if (!r.u8(p.len) || p.len > max) return false;
    std::span<const uint8_t> a;
    if (!r.bytes((p.len + 7u) / 8u, a)) return false;
    std::copy(a.begin(), a.end(), p.addr.begin());
    // host bits beyond the length are ignored, as the RFC allows
    out.push_back(p);
  }
  return true;
}

void put_prefixes(Writer& w, const std::vector<Prefix>& v, bool path_ids) {
  for (const auto& p : v) {
    if (path_ids) w.u32(p.path_id);
    w.u8(p.len);
    w.bytes(p.addr.data(), (p.len + 7u) / 8u);
  }
}

void put_attr(Writer& w, uint8_t flags, uint8_t type, const std::vector<uint8_t>& v) {
  if (v.size() > 255) flags |= 0x10;
  w.u8(flags);
  w.u8(type);
  if (flags & 0x10)
    w.u16(static_cast<uint16_t>(v.size()));
  else
    w.u8(static_cast<uint8_t>(v.size()));
  w.bytes(v);
}

Decoded decode_open(std::span<const uint8_t> body) {
  Reader r(body);
  uint8_t version = 0, optlen = 0;
  uint16_t as2 = 0, hold = 0;
  uint32_t id = 0;
  if (!r.u8(version) || !r.u16(as2) || !r.u16(hold) || !r.u32(id) || !r.u8(optlen))
    return error(err::kHeader, err::kBadLength, "OPEN too short", be16(static_cast<uint16_t>(kHeaderLen + body.size())));
  if (version != 4) return error(err::kOpen, err::kUnsupportedVersion, "BGP version " + std::to_string(version), be16(4));
  if (hold == 1 || hold == 2) return error(err::kOpen, err::kUnacceptableHold, "hold time " + std::to_string(hold));
  if (id == 0) return error(err::kOpen, err::kBadBgpId, "BGP identifier 0");
  if (optlen != r.left()) return error(err::kOpen, 0, "optional parameters length does not match the message");
  Open o;
  o.asn = as2;
  o.hold_time = hold;
  o.bgp_id = htonl(id);
  o.mp_ipv4 = false;
  o.four_octet = false;
  bool any_mp = false;
  while (r.left()) {
    uint8_t ptype = 0, plen = 0;
    std::span<const uint8_t> pv;
    if (!r.u8(ptype) || !r.u8(plen) || !r.bytes(plen, pv)) return error(err::kOpen, 0, "truncated optional parameter");
    if (ptype != 2) return error(err::kOpen, err::kUnsupportedOptParam, "optional parameter " + std::to_string(ptype));
    Reader c(pv);
    while (c.left()) {
      uint8_t code = 0, clen = 0;
      std::span<const uint8_t> cv;
      if (!c.u8(code) || !c.u8(clen) || !c.bytes(clen, cv)) return error(err::kOpen, 0, "truncated capability");
      Reader v(cv);
      if (code == 1) {  // multiprotocol
        uint16_t afi = 0;
        uint8_t res = 0, safi = 0;
        if (clen != 4 || !v.u16(afi) || !v.u8(res) || !v.u8(safi)) return error(err::kOpen, 0, "bad MP capability");
        any_mp = true;
        if (safi == kSafiUnicast && afi == 1) o.mp_ipv4 = true;
        if (safi == kSafiUnicast && afi == 2) o.mp_ipv6 = true;
      } else if (code == 2) {
        o.route_refresh = true;
      } else if (code == 65) {  // 4-octet AS
        uint32_t as4 = 0;
        if (clen != 4 || !v.u32(as4)) return error(err::kOpen, 0, "bad 4-octet AS capability");
        o.four_octet = true;
        o.asn = as4;
      } else if (code == 69) {  // ADD-PATH
        if (clen % 4) return error(err::kOpen, 0, "bad ADD-PATH capability");
        while (v.left()) {
          uint16_t afi = 0;
          uint8_t safi = 0, sr = 0;
          v.u16(afi);
          v.u8(safi);
          v.u8(sr);
          if (safi == kSafiUnicast && (afi == 1 || afi == 2) && sr >= 1 && sr <= 3)
            o.add_path.push_back({static_cast<Afi>(afi), sr});
        }
      }
      // other capabilities are ignored (RFC 5492)
    }
  }
  if (!any_mp) o.mp_ipv4 = true;  // no MP capability: IPv4 unicast only
  return Message{o};
}

Decoded decode_update(std::span<const uint8_t> body, const CodecContext& ctx) {
  Reader r(body);
  uint16_t wlen = 0, alen = 0;
  std::span<const uint8_t> wb, ab, nb;
  if (!r.u16(wlen) || !r.bytes(wlen, wb) || !r.u16(alen) || !r.bytes(alen, ab))
    return error(err::kUpdate, err::kMalformedAttrList, "withdrawn or attribute length beyond the message");
  r.bytes(r.left(), nb);
  Update u;
  if (!parse_prefixes(wb, Afi::ipv4, ctx.add_path_rx_v4, u.withdrawn))
    return error(err::kUpdate, err::kInvalidNetwork, "malformed withdrawn routes");
  if (!parse_prefixes(nb, Afi::ipv4, ctx.add_path_rx_v4, u.nlri))
    return error(err::kUpdate, err::kInvalidNetwork, "malformed NLRI");

  // attributes; RFC 7606 decides what a bad one costs
  bool withdraw_all = false;
  std::string why;
  std::set<uint8_t> seen;
  bool has_next_hop = false;
  Reader a(ab);
  while (a.left()) {
    uint8_t flags = 0, type = 0;
    if (!a.u8(flags) || !a.u8(type)) {
      withdraw_all = true;
      why = "truncated attribute header";
      break;
    }
    uint16_t len = 0;
    uint8_t l8 = 0;
    bool ok = (flags & 0x10) ? a.u16(len) : (a.u8(l8) && (len = l8, true));
    std::span<const uint8_t> v;
    if (!ok || !a.bytes(len, v)) {
      if (seen.count(14) == 0 && type != 14 && type != 15) {
        withdraw_all = true;
        why = "attribute length beyond the attributes";
        break;
      }
      return error(err::kUpdate, err::kMalformedAttrList, "attribute length beyond the attributes");
    }
    if (!seen.insert(type).second) {
      if (type == 14 || type == 15) return error(err::kUpdate, err::kMalformedAttrList, "repeated MP attribute");
      continue;  // a repeated attribute: keep the first (RFC 7606 §3(g))
    }
    bool optional = flags & 0x80, transitive = flags & 0x40;
    Reader x(v);
    switch (type) {
      case 1:  // ORIGIN
        if (optional || !transitive || len != 1) {
          withdraw_all = true;
          why = "malformed ORIGIN";
        } else {
          x.u8(u.origin);
          if (u.origin > 2) {
            withdraw_all = true;
            why = "invalid ORIGIN";
          }
          u.has_origin = true;
        }
        break;
      case 2: {  // AS_PATH: 4-octet ASNs when both ends have the capability, else 2-octet
        if (optional || !transitive) {
          withdraw_all = true;
          why = "AS_PATH flags";
          break;
        }
        u.has_as_path = true;
        size_t width = ctx.four_octet_as ? 4 : 2;
        while (x.left()) {
          uint8_t st = 0, n = 0;
          std::span<const uint8_t> seg;
          if (!x.u8(st) || !x.u8(n) || st < 1 || st > 4 || n == 0 || !x.bytes(size_t{n} * width, seg)) {
            withdraw_all = true;
            why = "malformed AS_PATH";
            break;
          }
          Reader s(seg);
          for (int i = 0; i < n; ++i) {
            uint32_t asn = 0;
            uint16_t as2 = 0;
            if (width == 4) s.u32(asn);
            else s.u16(as2), asn = as2;
            u.as_path.push_back(asn);
          }
        }
        break;
      }
      case 3:  // NEXT_HOP
        if (optional || !transitive || len != 4) {
          withdraw_all = true;
          why = "malformed NEXT_HOP";
        } else {
          std::array<uint8_t, 4> nh{};
          std::copy(v.begin(), v.end(), nh.begin());
          uint32_t h = static_cast<uint32_t>(nh[0]) << 24 | nh[1] << 16 | nh[2] << 8 | nh[3];
          if (h == 0 || (h >> 28) == 0xe || h == 0xffffffff) {
            withdraw_all = true;
            why = "invalid NEXT_HOP";
          }
          u.next_hop = nh;
          has_next_hop = true;
        }
        break;
      case 4:  // MED
      case 5:  // LOCAL_PREF
        if (len != 4) {
          withdraw_all = true;
          why = "malformed MED or LOCAL_PREF";
        }
        break;
      case 6:  // ATOMIC_AGGREGATE: a bad one is discarded
      case 7:  // AGGREGATOR
        break;
      case 14: {  // MP_REACH_NLRI
        uint16_t afi = 0;
        uint8_t safi = 0, nhlen = 0, reserved = 0;
        std::span<const uint8_t> nh;
        if (!x.u16(afi) || !x.u8(safi) || !x.u8(nhlen) || !x.bytes(nhlen, nh) || !x.u8(reserved))
          return error(err::kUpdate, err::kOptionalAttr, "malformed MP_REACH_NLRI");
        if (afi != 2 || safi != kSafiUnicast) break;  // a family we did not negotiate: ignore
        if (nhlen != 16 && nhlen != 32)
          return error(err::kUpdate, err::kOptionalAttr, "MP_REACH_NLRI next hop length " + std::to_string(nhlen));
        std::copy(nh.begin(), nh.begin() + 16, u.mp_next_hop.begin());
        std::span<const uint8_t> rest;
        x.bytes(x.left(), rest);
        if (!parse_prefixes(rest, Afi::ipv6, ctx.add_path_rx_v6, u.mp_reach))
          return error(err::kUpdate, err::kOptionalAttr, "malformed MP_REACH_NLRI prefixes");
        break;
      }
      case 15: {  // MP_UNREACH_NLRI
        uint16_t afi = 0;
        uint8_t safi = 0;
        if (!x.u16(afi) || !x.u8(safi)) return error(err::kUpdate, err::kOptionalAttr, "malformed MP_UNREACH_NLRI");
        if (afi != 2 || safi != kSafiUnicast) break;
        std::span<const uint8_t> rest;
        x.bytes(x.left(), rest);
        if (!parse_prefixes(rest, Afi::ipv6, ctx.add_path_rx_v6, u.mp_unreach))
          return error(err::kUpdate, err::kOptionalAttr, "malformed MP_UNREACH_NLRI prefixes");
        break;
      }
      default:
        if (!optional) {
          // the attribute as it came: flags, type, length, value (RFC 4271 §6.3)
          std::vector<uint8_t> data = {flags, type};
          if (flags & 0x10) data.push_back(static_cast<uint8_t>(len >> 8));
          data.push_back(static_cast<uint8_t>(len));
          data.insert(data.end(), v.begin(), v.end());
          return error(err::kUpdate, err::kUnrecognizedWellKnown, "unrecognized well-known attribute " + std::to_string(type),
                       data);
        }
        break;  // unknown optional attributes are kept or dropped; lanes does not forward
    }
  }
  bool announces = !u.nlri.empty() || !u.mp_reach.empty();
  if (!withdraw_all && announces && (!u.has_origin || !u.has_as_path)) {
    withdraw_all = true;
    why = "missing ORIGIN or AS_PATH";
  }
  if (!withdraw_all && !u.nlri.empty() && !has_next_hop) {
    withdraw_all = true;
    why = "missing NEXT_HOP";
  }
  if (withdraw_all) {
    DecodeError e;
    e.treat_as_withdraw = true;
    e.what = why + " (treat-as-withdraw, RFC 7606)";
    e.withdraw = u.withdrawn;
    e.withdraw.insert(e.withdraw.end(), u.nlri.begin(), u.nlri.end());
    e.withdraw.insert(e.withdraw.end(), u.mp_reach.begin(), u.mp_reach.end());
    e.withdraw.insert(e.withdraw.end(), u.mp_unreach.begin(), u.mp_unreach.end());
    return e;
  }
  return Message{u};
}

}  // namespace

std::string Prefix::str() const {
  char buf[64] = {};
  inet_ntop(afi == Afi::ipv4 ? AF_INET : AF_INET6, addr.data(), buf, sizeof buf);
  return std::string(buf) + "/" + std::to_string(len) + (path_id ? " id " + std::to_string(path_id) : "");
}

std::optional<Prefix> Prefix::parse(const std::string& s, uint32_t path_id) {
  auto slash = s.find('/');
  if (slash == std::string::npos) return std::nullopt;
  Prefix p;
  p.path_id = path_id;
  std::string a = s.substr(0, slash);
  int len = std::atoi(s.substr(slash + 1).c_str());
  if (inet_pton(AF_INET, a.c_str(), p.addr.data()) == 1) {
    p.afi = Afi::ipv4;
    if (len < 0 || len > 32) return std::nullopt;
  } else if (inet_pton(AF_INET6, a.c_str(), p.addr.data()) == 1) {
    p.afi = Afi::ipv6;
    if (len < 0 || len > 128) return std::nullopt;
  } else {
    return std::nullopt;
  }
  p.len = static_cast<uint8_t>(len);
  return p;
}

std::variant<size_t, DecodeError> frame_length(std::span<const uint8_t> buf) {
  if (buf.size() < kHeaderLen) return size_t{0};
  for (size_t i = 0; i < 16; ++i)
    if (buf[i] != 0xff) return error(err::kHeader, err::kConnNotSynced, "bad marker");
  size_t len = static_cast<size_t>(buf[16] << 8 | buf[17]);
  if (len < kHeaderLen || len > kMaxMessageLen)
    return error(err::kHeader, err::kBadLength, "message length " + std::to_string(len), {buf[16], buf[17]});
  return len;
}

Decoded decode(std::span<const uint8_t> msg, const CodecContext& ctx) {
  auto fl = frame_length(msg);
  if (auto* e = std::get_if<DecodeError>(&fl)) return *e;
  size_t len = std::get<size_t>(fl);
  if (len == 0 || msg.size() != len) return error(err::kHeader, err::kBadLength, "incomplete message", be16(static_cast<uint16_t>(len)));
  uint8_t type = msg[18];
  auto body = msg.subspan(kHeaderLen);
  auto bad_len = [&] { return error(err::kHeader, err::kBadLength, "bad length for message type " + std::to_string(type), be16(static_cast<uint16_t>(len))); };
  switch (type) {
    case 1:
      if (len < 29) return bad_len();
      return decode_open(body);
    case 2:
      if (len < 23) return bad_len();
      return decode_update(body, ctx);
    case 3: {
      if (len < 21) return bad_len();
      Notification n;
      n.code = body[0];
      n.subcode = body[1];
      n.data.assign(body.begin() + 2, body.end());
      return Message{n};
    }
    case 4:
      if (len != 19) return bad_len();
      return Message{Keepalive{}};
    case 5: {
      if (len != 23) return bad_len();
      RouteRefresh rr;
      rr.afi = static_cast<Afi>(body[0] << 8 | body[1]);
      rr.safi = body[3];
      return Message{rr};
    }
    default:
      return error(err::kHeader, err::kBadType, "message type " + std::to_string(type), {type});
  }
}

std::vector<uint8_t> encode(const Open& m) {
  Writer caps;
  auto cap = [&](uint8_t code, const std::vector<uint8_t>& v) {
    caps.u8(code);
    caps.u8(static_cast<uint8_t>(v.size()));
    caps.bytes(v);
  };
  if (m.mp_ipv4) cap(1, {0, 1, 0, kSafiUnicast});
  if (m.mp_ipv6) cap(1, {0, 2, 0, kSafiUnicast});
  if (m.route_refresh) cap(2, {});
  if (m.four_octet)
    cap(65, {static_cast<uint8_t>(m.asn >> 24), static_cast<uint8_t>(m.asn >> 16), static_cast<uint8_t>(m.asn >> 8),
             static_cast<uint8_t>(m.asn)});
  if (!m.add_path.empty()) {
    std::vector<uint8_t> v;
    for (const auto& a : m.add_path) {
      v.push_back(0);
      v.push_back(static_cast<uint8_t>(a.afi));
      v.push_back(kSafiUnicast);
      v.push_back(a.send_receive);
    }
    cap(69, v);
  }
  auto cv = caps.take();
  Writer b;
  b.u8(4);
  b.u16(m.asn > 0xffff ? kAsTrans : static_cast<uint16_t>(m.asn));
  b.u16(m.hold_time);
  b.u32(ntohl(m.bgp_id));
  if (cv.empty()) {
    b.u8(0);
  } else {
    b.u8(static_cast<uint8_t>(cv.size() + 2));
    b.u8(2);  // capabilities
    b.u8(static_cast<uint8_t>(cv.size()));
    b.bytes(cv);
  }
  return frame(MsgType::open, b.take());
}

std::vector<uint8_t> encode(const Update& m, const CodecContext& ctx) {
  Writer w;
  Writer wd;
  put_prefixes(wd, m.withdrawn, ctx.add_path_tx_v4);
  auto wv = wd.take();
  w.u16(static_cast<uint16_t>(wv.size()));
  w.bytes(wv);
  Writer at;
  bool announces = !m.nlri.empty() || !m.mp_reach.empty();
  // AS_SEQUENCE segments of at most 255 ASNs, each 4 octets or (to a
  // 2-octet speaker) 2, with AS_TRANS for an ASN that does not fit
  auto path_of = [&](bool four) {
    std::vector<uint8_t> path;
    for (size_t i = 0; i < m.as_path.size(); i += 255) {
      size_t n = std::min<size_t>(255, m.as_path.size() - i);
      path.push_back(2);
      path.push_back(static_cast<uint8_t>(n));
      for (size_t j = i; j < i + n; ++j) {
        uint32_t asn = four || m.as_path[j] <= 0xffff ? m.as_path[j] : kAsTrans;
        for (int s = four ? 24 : 8; s >= 0; s -= 8) path.push_back(static_cast<uint8_t>(asn >> s));
      }
    }
    return path;
  };
  if (announces) {
    put_attr(at, 0x40, 1, {m.origin});
    put_attr(at, 0x40, 2, path_of(ctx.four_octet_as));
    if (!m.nlri.empty() && m.next_hop) put_attr(at, 0x40, 3, {m.next_hop->begin(), m.next_hop->end()});
  }
  if (!m.mp_reach.empty()) {
    Writer mp;
    mp.u16(2);
    mp.u8(kSafiUnicast);
    mp.u8(16);
    mp.bytes(m.mp_next_hop.data(), 16);
    mp.u8(0);
    put_prefixes(mp, m.mp_reach, ctx.add_path_tx_v6);
    put_attr(at, 0x80, 14, mp.take());
  }
  if (!m.mp_unreach.empty()) {
    Writer mp;
    mp.u16(2);
    mp.u8(kSafiUnicast);
    put_prefixes(mp, m.mp_unreach, ctx.add_path_tx_v6);
    put_attr(at, 0x80, 15, mp.take());
  }
  // AS4_PATH (optional transitive, type 17: after the others, in type
  // order) only where the 2-octet AS_PATH lost something
  bool wide = std::any_of(m.as_path.begin(), m.as_path.end(), [](uint32_t a) { return a > 0xffff; });
  if (announces && !ctx.four_octet_as && wide) put_attr(at, 0xc0, 17, path_of(true));
  auto av = at.take();
  w.u16(static_cast<uint16_t>(av.size()));
  w.bytes(av);
  put_prefixes(w, m.nlri, ctx.add_path_tx_v4);
  return frame(MsgType::update, w.take());
}

std::vector<uint8_t> encode(const Notification& m) {
  std::vector<uint8_t> b = {m.code, m.subcode};
  b.insert(b.end(), m.data.begin(), m.data.end());
  return frame(MsgType::notification, b);
}

std::vector<uint8_t> encode_keepalive() { return frame(MsgType::keepalive, {}); }

std::vector<uint8_t> encode(const RouteRefresh& m) {
  Writer w;
  w.u16(static_cast<uint16_t>(m.afi));
  w.u8(0);
  w.u8(m.safi);
  return frame(MsgType::route_refresh, w.take());
}

std::vector<uint8_t> encode_end_of_rib(Afi afi) {
  Writer w;
  w.u16(0);  // no withdrawn routes
  if (afi == Afi::ipv4) {
    w.u16(0);  // no attributes, no NLRI
  } else {
    Writer at;
    put_attr(at, 0x80, 15, {0, static_cast<uint8_t>(afi), kSafiUnicast});
    auto av = at.take();
    w.u16(static_cast<uint16_t>(av.size()));
    w.bytes(av);
  }
  return frame(MsgType::update, w.take());
}

std::string describe(const Notification& n) {
  static const char* codes[] = {"?", "message header error", "OPEN message error", "UPDATE message error",
                                "hold timer expired", "FSM error", "cease"};
  return std::string(n.code <= 6 ? codes[n.code] : "unknown") + " (" + std::to_string(n.code) + "/" +
         std::to_string(n.subcode) + ")";
}

}  // namespace lanes::vip
