#pragma once
// BGP-4 messages (RFC 4271) with 4-octet AS numbers (RFC 6793),
// multiprotocol extensions for IPv6 unicast (RFC 4760) and ADD-PATH
// (RFC 7911): encoding, and decoding that reports every malformed input as
// the NOTIFICATION the RFCs prescribe (or, for UPDATE attribute errors,
// treat-as-withdraw per RFC 7606).

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

namespace lanes::vip {

inline constexpr size_t kHeaderLen = 19;
inline constexpr size_t kMaxMessageLen = 4096;
inline constexpr uint16_t kAsTrans = 23456;

enum class MsgType : uint8_t { open = 1, update = 2, notification = 3, keepalive = 4, route_refresh = 5 };

enum class Afi : uint16_t { ipv4 = 1, ipv6 = 2 };
inline constexpr uint8_t kSafiUnicast = 1;

// NOTIFICATION codes and subcodes (RFC 4271 §4.5, RFC 4486)
namespace err {
inline constexpr uint8_t kHeader = 1, kOpen = 2, kUpdate = 3, kHoldTimer = 4, kFsm = 5, kCease = 6;
inline constexpr uint8_t kConnNotSynced = 1, kBadLength = 2, kBadType = 3;                       // header
inline constexpr uint8_t kUnsupportedVersion = 1, kBadPeerAs = 2, kBadBgpId = 3, kUnsupportedOptParam = 4,
                         kUnacceptableHold = 6, kUnsupportedCapability = 7;                      // OPEN
inline constexpr uint8_t kMalformedAttrList = 1, kUnrecognizedWellKnown = 2, kMissingWellKnown = 3,
                         kAttrFlags = 4, kAttrLength = 5, kInvalidOrigin = 6, kInvalidNextHop = 8,
                         kOptionalAttr = 9, kInvalidNetwork = 10, kMalformedAsPath = 11;         // UPDATE
inline constexpr uint8_t kAdminShutdown = 2, kMaxPrefixes = 1;                                   // Cease
}  // namespace err

struct AddPathCap {
  Afi afi = Afi::ipv4;
  uint8_t send_receive = 0;  // 1 receive, 2 send, 3 both
};

struct Open {
  uint32_t asn = 0;          // the 4-octet AS (capability 65); the 2-octet field carries AS_TRANS if needed
  uint16_t hold_time = 90;
  uint32_t bgp_id = 0;       // network order
  bool mp_ipv4 = true, mp_ipv6 = false, route_refresh = false, four_octet = true;
  std::vector<AddPathCap> add_path;
};

struct Prefix {
  Afi afi = Afi::ipv4;
  std::array<uint8_t, 16> addr{};  // network order, IPv4 in the first 4 bytes
  uint8_t len = 0;
  uint32_t path_id = 0;            // with ADD-PATH
  bool operator==(const Prefix&) const = default;
  std::string str() const;
  static std::optional<Prefix> parse(const std::string& s, uint32_t path_id = 0);
};

struct Update {
  std::vector<Prefix> withdrawn;      // IPv4
  std::vector<Prefix> nlri;           // IPv4
  std::vector<Prefix> mp_reach;       // IPv6
  std::array<uint8_t, 16> mp_next_hop{};
  std::vector<Prefix> mp_unreach;     // IPv6
  uint8_t origin = 0;                 // IGP
  std::vector<uint32_t> as_path;      // one AS_SEQUENCE
  std::optional<std::array<uint8_t, 4>> next_hop;
  bool has_origin = false, has_as_path = false;
  bool end_of_rib() const { return withdrawn.empty() && nlri.empty() && mp_reach.empty() && mp_unreach.empty(); }
};

struct Notification {
  uint8_t code = 0, subcode = 0;
  std::vector<uint8_t> data;
};

struct Keepalive {};
struct RouteRefresh {  // RFC 2918
  Afi afi = Afi::ipv4;
  uint8_t safi = kSafiUnicast;
};

using Message = std::variant<Open, Update, Notification, Keepalive, RouteRefresh>;

// What the codec needs to know about the session.
struct CodecContext {
  bool add_path_rx_v4 = false, add_path_rx_v6 = false;  // peer sends path ids to us
  bool add_path_tx_v4 = false, add_path_tx_v6 = false;  // we send path ids
  // both ends announced 4-octet AS support (capability 65); with a peer
  // that did not, AS_PATH carries 2-octet ASNs (AS_TRANS for the larger
  // ones) and AS4_PATH the real path (RFC 6793 §4.2.2)
  bool four_octet_as = true;
};

// A decoding failure: the NOTIFICATION to send, or (treat_as_withdraw) the
// prefixes of an UPDATE whose attributes were bad (RFC 7606).
struct DecodeError {
  Notification notification;
  std::string what;
  bool treat_as_withdraw = false;
  std::vector<Prefix> withdraw;
};

using Decoded = std::variant<Message, DecodeError>;

// Frame length of the message at the start of BUF once its header is
// complete; 0 if more bytes are needed; a DecodeError for a bad header.
std::variant<size_t, DecodeError> frame_length(std::span<const uint8_t> buf);
// Decodes one complete message (header included).
Decoded decode(std::span<const uint8_t> msg, const CodecContext& ctx);

std::vector<uint8_t> encode(const Open& m);
std::vector<uint8_t> encode(const Update& m, const CodecContext& ctx);
std::vector<uint8_t> encode(const Notification& m);
std::vector<uint8_t> encode_keepalive();
std::vector<uint8_t> encode(const RouteRefresh& m);
// The End-of-RIB marker of AFI (RFC 4724 §2): an empty UPDATE for IPv4, an
// UPDATE with an empty MP_UNREACH_NLRI for IPv6.
std::vector<uint8_t> encode_end_of_rib(Afi afi);

std::string describe(const Notification& n);

}  // namespace lanes::vip
