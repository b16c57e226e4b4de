#include "lanes/testbed/mptcp.hpp"

#include <fmt/format.h>
#include <netinet/in.h>
#include <linux/mptcp.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <netlink/netlink.h>

#include <cstring>
#include <optional>

#include "lanes/testbed/netlink.hpp"
#include "lanes/testbed/netns.hpp"

namespace lanes::testbed {

namespace {

std::system_error nl_failed(int err, const std::string& what) {
  return std::system_error(std::abs(err), libnl_category(), what);
}

struct MsgFree {
  void operator()(nl_msg* m) const { nlmsg_free(m); }
};
using Msg = std::unique_ptr<nl_msg, MsgFree>;

// A request of CMD to the path manager (FLAGS beside NLM_F_REQUEST)
Msg request(int family, uint8_t cmd, int flags) {
  Msg m(nlmsg_alloc());
  if (m && !genlmsg_put(m.get(), NL_AUTO_PORT, NL_AUTO_SEQ, family, 0, flags, cmd, MPTCP_PM_VER)) m.reset();
  return m;
}

// Sends M and reads the answers, each handed to PARSE: a dump's, or a
// get's one (whose ACK libnl leaves to nl_wait_for_ack)
template <typename Parse>
Status exchange(nl_sock* sk, nl_msg* m, bool dump, const std::string& what, Parse parse) {
  if (int sent = nl_send_auto(sk, m); sent < 0) return nl_failed(sent, what);
  nl_cb* cb = nl_cb_alloc(NL_CB_DEFAULT);
  if (!cb) return os_error(ENOMEM, what);
  auto trampoline = [](nl_msg* msg, void* arg) -> int {
    (*static_cast<Parse*>(arg))(nlmsg_hdr(msg));
    return NL_OK;
  };
  nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, trampoline, &parse);
  int err = nl_recvmsgs(sk, cb);
  nl_cb_put(cb);
  if (err < 0) return nl_failed(err, what);
  if (!dump)
    if (err = nl_wait_for_ack(sk); err < 0) return nl_failed(err, what);
  return {};
}

Status send_sync(nl_sock* sk, Msg m, const std::string& what) {
  int err = nl_send_sync(sk, m.release());  // frees the message
  if (err < 0) return nl_failed(err, what);
  return {};
}

}  // namespace

std::string MptcpEndpoint::describe() const {
  return fmt::format("{} id {}{}{}{}", addr.to_string(), id, subflow ? " subflow" : "", signal ? " signal" : "",
                     ifindex ? fmt::format(" dev {}", ifindex) : "");
}

void MptcpPm::Free::operator()(nl_sock* s) const { nl_socket_free(s); }

MptcpPm::MptcpPm(nl_sock* sk, int family, std::string ns) : sk_(sk), family_(family), ns_(std::move(ns)) {}
MptcpPm::MptcpPm(MptcpPm&&) noexcept = default;
MptcpPm& MptcpPm::operator=(MptcpPm&&) noexcept = default;
MptcpPm::~MptcpPm() = default;

Result<MptcpPm> MptcpPm::open_in(int ns_fd, const std::string& ns) {
  std::optional<MptcpPm> out;
  auto st = run_in_netns(
      ns_fd,
      [&]() -> Status {
        std::unique_ptr<nl_sock, Free> sk(nl_socket_alloc());
        if (!sk) return os_error(ENOMEM, "allocating a netlink socket");
        if (int err = genl_connect(sk.get()); err < 0) return nl_failed(err, "a generic netlink socket in " + ns);
        int family = genl_ctrl_resolve(sk.get(), MPTCP_PM_NAME);
        if (family < 0)
          return nl_failed(family, "the MPTCP path manager in " + ns +
                                       " (this kernel has no MPTCP: CONFIG_MPTCP, or net.mptcp.enabled is 0)");
        out.emplace(MptcpPm(sk.release(), family, ns));
        return {};
      },
      "the MPTCP path manager in " + ns);
  if (!st) return st.error();
  return std::move(*out);
}

Status MptcpPm::set_limits(const MptcpLimits& l) {
  std::string what = fmt::format("{}: MPTCP limits subflows {} add_addr_accepted {}", ns_, l.subflows, l.add_addr_accepted);
  Msg m = request(family_, MPTCP_PM_CMD_SET_LIMITS, 0);
  if (!m || nla_put_u32(m.get(), MPTCP_PM_ATTR_SUBFLOWS, l.subflows) < 0 ||
      nla_put_u32(m.get(), MPTCP_PM_ATTR_RCV_ADD_ADDRS, l.add_addr_accepted) < 0)
    return os_error(ENOMEM, what);
  return send_sync(sk_.get(), std::move(m), what);
}

Result<MptcpLimits> MptcpPm::limits() {
  std::string what = ns_ + ": MPTCP limits";
  Msg m = request(family_, MPTCP_PM_CMD_GET_LIMITS, 0);
  if (!m) return os_error(ENOMEM, what);
  MptcpLimits l;
  auto st = exchange(sk_.get(), m.get(), false, what, [&](nlmsghdr* h) {
    nlattr* tb[MPTCP_PM_ATTR_MAX + 1] = {};
    if (genlmsg_parse(h, 0, tb, MPTCP_PM_ATTR_MAX, nullptr) < 0) return;
    if (tb[MPTCP_PM_ATTR_SUBFLOWS]) l.subflows = nla_get_u32(tb[MPTCP_PM_ATTR_SUBFLOWS]);
    if (tb[MPTCP_PM_ATTR_RCV_ADD_ADDRS]) l.add_addr_accepted = nla_get_u32(tb[MPTCP_PM_ATTR_RCV_ADD_ADDRS]);
  });
  if (!st) return st.error();
  return l;
}

Status MptcpPm::add_endpoint(const MptcpEndpoint& e) {
  std::string what = ns_ + ": MPTCP endpoint " + e.describe();
  Msg m = request(family_, MPTCP_PM_CMD_ADD_ADDR, 0);
  if (!m) return os_error(ENOMEM, what);
  nlattr* nest = nla_nest_start(m.get(), MPTCP_PM_ATTR_ADDR | NLA_F_NESTED);
  uint32_t flags = (e.subflow ? MPTCP_PM_ADDR_FLAG_SUBFLOW : 0) | (e.signal ? MPTCP_PM_ADDR_FLAG_SIGNAL : 0);
  bool ok = nest && nla_put_u16(m.get(), MPTCP_PM_ADDR_ATTR_FAMILY, e.addr.is_v6() ? AF_INET6 : AF_INET) >= 0 &&
            nla_put_u8(m.get(), MPTCP_PM_ADDR_ATTR_ID, e.id) >= 0 &&
            nla_put_u32(m.get(), MPTCP_PM_ADDR_ATTR_FLAGS, flags) >= 0;
  if (ok && e.addr.is_v6()) {
    auto b = e.addr.to_v6().to_bytes();
    ok = nla_put(m.get(), MPTCP_PM_ADDR_ATTR_ADDR6, static_cast<int>(b.size()), b.data()) >= 0;
  } else if (ok) {
    auto b = e.addr.to_v4().to_bytes();
    ok = nla_put(m.get(), MPTCP_PM_ADDR_ATTR_ADDR4, static_cast<int>(b.size()), b.data()) >= 0;
  }
  if (ok && e.ifindex) ok = nla_put_s32(m.get(), MPTCP_PM_ADDR_ATTR_IF_IDX, e.ifindex) >= 0;
  if (!ok) return os_error(ENOMEM, what);
  nla_nest_end(m.get(), nest);
  return send_sync(sk_.get(), std::move(m), what);
}

Result<std::vector<MptcpEndpoint>> MptcpPm::endpoints() {
  std::string what = ns_ + ": MPTCP endpoints";
  Msg m = request(family_, MPTCP_PM_CMD_GET_ADDR, NLM_F_DUMP);
  if (!m) return os_error(ENOMEM, what);
  std::vector<MptcpEndpoint> out;
  auto st = exchange(sk_.get(), m.get(), true, what, [&](nlmsghdr* h) {
    nlattr* tb[MPTCP_PM_ATTR_MAX + 1] = {};
    if (genlmsg_parse(h, 0, tb, MPTCP_PM_ATTR_MAX, nullptr) < 0 || !tb[MPTCP_PM_ATTR_ADDR]) return;
    nlattr* a[MPTCP_PM_ADDR_ATTR_MAX + 1] = {};
    if (nla_parse_nested(a, MPTCP_PM_ADDR_ATTR_MAX, tb[MPTCP_PM_ATTR_ADDR], nullptr) < 0) return;
    MptcpEndpoint e;
    if (a[MPTCP_PM_ADDR_ATTR_ID]) e.id = nla_get_u8(a[MPTCP_PM_ADDR_ATTR_ID]);
    if (a[MPTCP_PM_ADDR_ATTR_IF_IDX]) e.ifindex = static_cast<int>(nla_get_u32(a[MPTCP_PM_ADDR_ATTR_IF_IDX]));
    uint32_t flags = a[MPTCP_PM_ADDR_ATTR_FLAGS] ? nla_get_u32(a[MPTCP_PM_ADDR_ATTR_FLAGS]) : 0;
    e.subflow = flags & MPTCP_PM_ADDR_FLAG_SUBFLOW;
    e.signal = flags & MPTCP_PM_ADDR_FLAG_SIGNAL;
    if (a[MPTCP_PM_ADDR_ATTR_ADDR4] && nla_len(a[MPTCP_PM_ADDR_ATTR_ADDR4]) == 4) {
      boost::asio::ip::address_v4::bytes_type b;
      std::memcpy(b.data(), nla_data(a[MPTCP_PM_ADDR_ATTR_ADDR4]), 4);
      e.addr = boost::asio::ip::address_v4(b);
    } else if (a[MPTCP_PM_ADDR_ATTR_ADDR6] && nla_len(a[MPTCP_PM_ADDR_ATTR_ADDR6]) == 16) {
      boost::asio::ip::address_v6::bytes_type b;
      std::memcpy(b.data(), nla_data(a[MPTCP_PM_ADDR_ATTR_ADDR6]), 16);
      e.addr = boost::asio::ip::address_v6(b);
    }
    out.push_back(e);
  });
  if (!st) return st.error();
  return out;
}

}  // namespace lanes::testbed
