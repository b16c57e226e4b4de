#include <arpa/inet.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "lanes/vip/bgp.hpp"
#include "support.hpp"

using namespace lanes::vip;

namespace {

std::vector<uint8_t> hex(const std::string& h) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) {
    if (h[i] == '\n' || h[i] == ' ') {
      --i;
      continue;
    }
    out.push_back(static_cast<uint8_t>(std::stoul(h.substr(i, 2), nullptr, 16)));
  }
  return out;
}

std::vector<uint8_t> data_file(const std::string& name) {
  std::ifstream in(lanes::test::source_dir() + "/vip/tests/data/" + name);
  std::string s;
  std::getline(in, s);
  return hex(s);
}

std::vector<uint8_t> with_header(uint8_t type, std::vector<uint8_t> body) {
  std::vector<uint8_t> m(16, 0xff);
  size_t len = 19 + body.size();
  m.push_back(static_cast<uint8_t>(len >> 8));
  m.push_back(static_cast<uint8_t>(len));
  m.push_back(type);
  m.insert(m.end(), body.begin(), body.end());
  return m;
}

template <typename T>
T expect(const Decoded& d) {
  if (auto* e = std::get_if<DecodeError>(&d)) FAIL("decode failed: " << e->what);
  auto& m = std::get<Message>(d);
  REQUIRE(std::holds_alternative<T>(m));
  return std::get<T>(m);
}

}  // namespace

TEST_CASE("KEEPALIVE and NOTIFICATION encode byte for byte", "[unit]") {
  auto ka = encode_keepalive();
  CHECK(ka == hex("ffffffffffffffffffffffffffffffff001304"));
  auto n = encode(Notification{6, 2, {}});
  CHECK(n == hex("ffffffffffffffffffffffffffffffff0015030602"));
  expect<Keepalive>(decode(ka, {}));
  auto back = expect<Notification>(decode(n, {}));
  CHECK(back.code == 6);
  CHECK(back.subcode == 2);
  CHECK(describe(back) == "cease (6/2)");
}

TEST_CASE("OPEN with 4-octet AS, IPv4 and IPv6 and ADD-PATH encodes byte for byte", "[unit]") {
  Open o;
  o.asn = 4200000001u;  // above 65535: AS_TRANS in the 2-octet field
  o.hold_time = 9;
  inet_pton(AF_INET, "198.19.1.0", &o.bgp_id);
  o.mp_ipv6 = true;
  o.add_path = {{Afi::ipv4, 2}, {Afi::ipv6, 2}};
  auto b = encode(o);
  CHECK(b == hex("ffffffffffffffffffffffffffffffff"
                 "003b" "01"             // length 59, OPEN
                 "04" "5ba0" "0009"      // version 4, AS_TRANS 23456, hold 9
                 "c6130100"              // BGP id 198.19.1.0
                 "1e" "02" "1c"          // opt len 30: capabilities, 28 bytes
                 "0104" "00010001"       // MP IPv4 unicast
                 "0104" "00020001"       // MP IPv6 unicast
                 "4104" "fa56ea01"       // 4-octet AS 4200000001
                 "4508" "00010102" "00020102"));  // ADD-PATH send, both families
  auto d = expect<Open>(decode(b, {}));
  CHECK(d.asn == 4200000001u);
  CHECK(d.hold_time == 9);
  CHECK(d.mp_ipv4);
  CHECK(d.mp_ipv6);
  REQUIRE(d.add_path.size() == 2);
  CHECK(d.add_path[1].afi == Afi::ipv6);
  CHECK(d.add_path[1].send_receive == 2);
}

TEST_CASE("GoBGP's own OPEN and UPDATEs (captured once) decode", "[unit]") {
  auto open = expect<Open>(decode(data_file("gobgp_open.hex"), {}));
  CHECK(open.asn == 65101);
  CHECK(open.four_octet);
  CHECK(open.mp_ipv4);
  CHECK(open.mp_ipv6);
  CHECK(open.route_refresh);
  char id[16];
  inet_ntop(AF_INET, &open.bgp_id, id, sizeof id);
  CHECK(std::string(id) == "198.18.0.1");
  REQUIRE_FALSE(open.add_path.empty());
  CHECK(open.add_path[0].afi == Afi::ipv4);
  CHECK((open.add_path[0].send_receive & 2));  // GoBGP sends path ids for IPv4

  CodecContext ctx;
  ctx.add_path_rx_v4 = true;  // as negotiated in that capture
  auto u1 = expect<Update>(decode(data_file("gobgp_update1.hex"), ctx));
  REQUIRE(u1.nlri.size() == 1);
  CHECK(u1.nlri[0].str().rfind("198.19.0.1/32", 0) == 0);
  CHECK(u1.nlri[0].path_id != 0);
  CHECK(u1.as_path == std::vector<uint32_t>{65101});
  REQUIRE(u1.next_hop);
  CHECK((*u1.next_hop == std::array<uint8_t, 4>{198, 18, 128, 1}));
  auto u2 = expect<Update>(decode(data_file("gobgp_update2.hex"), ctx));
  REQUIRE(u2.mp_reach.size() == 1);
  CHECK(u2.mp_reach[0].str() == "2001:2:0:100::1/128");
  char nh[64];
  inet_ntop(AF_INET6, u2.mp_next_hop.data(), nh, sizeof nh);
  CHECK(std::string(nh) == "2001:2:0:2::1");
}

TEST_CASE("UPDATE with ADD-PATH path ids and MP_REACH round-trips byte for byte", "[unit]") {
  CodecContext ctx;
  ctx.add_path_tx_v4 = ctx.add_path_rx_v4 = true;
  Update u;
  u.as_path = {4200000001u};
  u.next_hop = std::array<uint8_t, 4>{198, 19, 1, 2};
  u.nlri = {*Prefix::parse("198.19.0.1/32", 3)};
  auto b = encode(u, ctx);
  CHECK(b == hex("ffffffffffffffffffffffffffffffff"
                 "0034" "02"
                 "0000"                               // no withdrawn routes
                 "0014"                               // 20 bytes of attributes
                 "40010100"                           // ORIGIN IGP
                 "40020602" "01fa56ea01"              // AS_PATH: sequence of 1, AS 4200000001
                 "400304c6130102"                     // NEXT_HOP 198.19.1.2
                 "00000003" "20c6130001"));           // path id 3, 198.19.0.1/32
  auto back = expect<Update>(decode(b, ctx));
  REQUIRE(back.nlri.size() == 1);
  CHECK(back.nlri[0].path_id == 3);
  // IPv6 in MP_REACH, withdrawn in MP_UNREACH
  Update v6;
  v6.as_path = {65001};
  v6.mp_reach = {*Prefix::parse("2001:2:0:100::1/128")};
  inet_pton(AF_INET6, "2001:2:0:100::100", v6.mp_next_hop.data());
  auto b6 = expect<Update>(decode(encode(v6, {}), {}));
  REQUIRE(b6.mp_reach.size() == 1);
  CHECK(b6.mp_reach[0] == v6.mp_reach[0]);
  Update wd;
  wd.mp_unreach = {*Prefix::parse("2001:2:0:100::1/128")};
  wd.withdrawn = {*Prefix::parse("198.19.0.1/32", 3)};
  auto bw = expect<Update>(decode(encode(wd, ctx), ctx));
  CHECK(bw.mp_unreach.size() == 1);
  CHECK(bw.withdrawn[0].path_id == 3);
  CHECK(expect<Update>(decode(encode(Update{}, {}), {})).end_of_rib());
}

TEST_CASE("malformed messages get the NOTIFICATION the RFCs prescribe", "[unit]") {
  auto good_open_body = hex("04fde8005ac6130100" "00");  // AS 65000, hold 90, id, no parameters
  struct Case {
    const char* what;
    std::vector<uint8_t> msg;
    uint8_t code, subcode;
    bool treat_as_withdraw = false;
  };
  auto bad_marker = encode_keepalive();
  bad_marker[3] = 0;
  auto short_len = encode_keepalive();
  short_len[17] = 18;
  auto long_len = encode_keepalive();
  long_len[16] = 0x10;
  long_len[17] = 0x01;
  auto v3 = good_open_body;
  v3[0] = 3;
  auto hold1 = good_open_body;
  hold1[4] = 1;
  auto id0 = hex("04fde8005a00000000" "00");
  auto badparam = hex("04fde8005ac6130100" "03" "010100");  // optional parameter type 1 (authentication)
  const Case cases[] = {
      {"marker not all ones", bad_marker, 1, 1},
      {"length below 19", short_len, 1, 2},
      {"length above 4096", long_len, 1, 2},
      {"unknown message type", with_header(9, {}), 1, 3},
      {"KEEPALIVE with a body", with_header(4, {0}), 1, 2},
      {"OPEN too short", with_header(1, {4, 0}), 1, 2},
      {"OPEN version 3", with_header(1, v3), 2, 1},
      {"OPEN hold time 1", with_header(1, hold1), 2, 6},
      {"OPEN BGP identifier 0", with_header(1, id0), 2, 3},
      {"OPEN unsupported optional parameter", with_header(1, badparam), 2, 4},
      {"OPEN optional parameters longer than the message", with_header(1, hex("04fde8005ac6130100" "05" "0203")), 2, 0},
      {"ROUTE-REFRESH of the wrong length", with_header(5, hex("000100")), 1, 2},
      {"UPDATE attribute length beyond the message", with_header(2, hex("0000" "00ff" "400101")), 3, 1},
      {"UPDATE withdrawn length beyond the message", with_header(2, hex("00ff" "0000")), 3, 1},
      {"UPDATE NLRI prefix length 33", with_header(2, hex("0000" "0000" "21c6130001ff")), 3, 10},
      {"UPDATE unrecognized well-known attribute", with_header(2, hex("0000" "0003" "4063" "00")), 3, 2},
      {"UPDATE repeated MP_UNREACH_NLRI", with_header(2, hex("0000" "000c" "800f03000201" "800f03000201")), 3, 1},
      {"UPDATE MP_REACH next hop length 5",
       with_header(2, hex("0000" "000d" "800e0a000201" "05" "0102030405" "00")), 3, 9},
      {"UPDATE ORIGIN value 7: treat-as-withdraw",
       with_header(2, hex("0000" "0014" "40010107" "40020602" "01000000fe" "400304c6130102" "20c6130001")), 0, 0, true},
      {"UPDATE NEXT_HOP missing: treat-as-withdraw",
       with_header(2, hex("0000" "000d" "40010100" "40020602" "01000000fe" "20c6130001")), 0, 0, true},
      {"UPDATE AS_PATH segment overrun: treat-as-withdraw",
       with_header(2, hex("0000" "0014" "40010100" "40020602" "05000000fe" "400304c6130102" "20c6130001")), 0, 0, true},
      {"UPDATE ORIGIN flagged optional: treat-as-withdraw",
       with_header(2, hex("0000" "0014" "c0010100" "40020602" "01000000fe" "400304c6130102" "20c6130001")), 0, 0, true},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    auto d = decode(c.msg, {});
    REQUIRE(std::holds_alternative<DecodeError>(d));
    const auto& e = std::get<DecodeError>(d);
    CHECK(e.treat_as_withdraw == c.treat_as_withdraw);
    if (c.treat_as_withdraw) {
      REQUIRE(e.withdraw.size() == 1);
      CHECK(e.withdraw[0].str() == "198.19.0.1/32");
    } else {
      CHECK(e.notification.code == c.code);
      CHECK(e.notification.subcode == c.subcode);
    }
  }
}

TEST_CASE("ROUTE-REFRESH decodes byte for byte", "[unit]") {
  auto rr = expect<RouteRefresh>(decode(hex("ffffffffffffffffffffffffffffffff" "0017" "05" "0002" "00" "01"), {}));
  CHECK(rr.afi == Afi::ipv6);
}

TEST_CASE("the framer waits for a whole header and message", "[unit]") {
  auto ka = encode_keepalive();
  CHECK(std::get<size_t>(frame_length(std::span(ka).first(10))) == 0);
  CHECK(std::get<size_t>(frame_length(ka)) == 19);
  auto two = ka;
  two.insert(two.end(), ka.begin(), ka.end());
  CHECK(std::get<size_t>(frame_length(two)) == 19);
  // a repeated ordinary attribute: the first one counts (RFC 7606)
  auto rep = with_header(2, hex("0000" "0018" "40010100" "40010102" "40020602" "01000000fe" "400304c6130102" "20c6130001"));
  auto u = expect<Update>(decode(rep, {}));
  CHECK(u.origin == 0);
  // unknown optional attributes are accepted
  auto opt = with_header(2, hex("0000" "0018" "40010100" "40020602" "01000000fe" "400304c6130102" "c0630100" "20c6130001"));
  CHECK(expect<Update>(decode(opt, {})).nlri.size() == 1);
}

TEST_CASE("End-of-RIB and ROUTE-REFRESH are encoded byte for byte", "[unit]") {
  // RFC 4724 §2: IPv4 an UPDATE with nothing in it; IPv6 an empty MP_UNREACH_NLRI
  CHECK(encode_end_of_rib(Afi::ipv4) == with_header(2, {0, 0, 0, 0}));
  CHECK(encode_end_of_rib(Afi::ipv6) == with_header(2, {0, 0, 0, 6, 0x80, 15, 3, 0, 2, 1}));
  // and they decode as End-of-RIB
  auto eor = std::get<Update>(std::get<Message>(decode(encode_end_of_rib(Afi::ipv6), {})));
  CHECK(eor.end_of_rib());
  // RFC 2918 §3: AFI, reserved, SAFI
  CHECK(encode(RouteRefresh{Afi::ipv6, kSafiUnicast}) == with_header(5, {0, 2, 0, 1}));
  auto rr = std::get<RouteRefresh>(std::get<Message>(decode(with_header(5, {0, 1, 0, 1}), {})));
  CHECK(rr.afi == Afi::ipv4);
  CHECK(rr.safi == kSafiUnicast);
}

TEST_CASE("NOTIFICATION 3/2 returns the unrecognized well-known attribute whole: flags, type, length, value", "[unit]") {
  // ORIGIN, AS_PATH, then well-known (not optional) attribute 99 of two bytes
  std::vector<uint8_t> attrs = {0x40, 1, 1, 0, 0x40, 2, 0, 0x40, 99, 2, 0xaa, 0xbb};
  std::vector<uint8_t> body = {0, 0, 0, static_cast<uint8_t>(attrs.size())};
  body.insert(body.end(), attrs.begin(), attrs.end());
  auto d = decode(with_header(2, body), {});
  auto& e = std::get<DecodeError>(d);
  CHECK(e.notification.code == err::kUpdate);
  CHECK(e.notification.subcode == err::kUnrecognizedWellKnown);
  CHECK(e.notification.data == std::vector<uint8_t>{0x40, 99, 2, 0xaa, 0xbb});
  // with the extended-length flag the length is two octets
  attrs = {0x40, 1, 1, 0, 0x40, 2, 0, 0x50, 99, 0, 2, 0xaa, 0xbb};
  body = {0, 0, 0, static_cast<uint8_t>(attrs.size())};
  body.insert(body.end(), attrs.begin(), attrs.end());
  auto ext = std::get<DecodeError>(decode(with_header(2, body), {}));
  CHECK(ext.notification.data == std::vector<uint8_t>{0x50, 99, 0, 2, 0xaa, 0xbb});
}
