// libFuzzer target: any bytes through the BGP framer and decoder, in every
// ADD-PATH combination, and whatever decodes is encoded again and decoded
// once more (it must not fail then).
#include <cstddef>
#include <cstdint>
#include <span>
#include <variant>

#include "lanes/vip/bgp.hpp"

using namespace lanes::vip;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  CodecContext ctx;
  ctx.add_path_rx_v4 = ctx.add_path_tx_v4 = data[0] & 1;
  ctx.add_path_rx_v6 = ctx.add_path_tx_v6 = data[0] & 2;
  std::span<const uint8_t> buf(data + 1, size - 1);
  // frame every message in the buffer, as the session does
  while (!buf.empty()) {
    auto fl = frame_length(buf);
    if (std::holds_alternative<DecodeError>(fl)) break;
    size_t len = std::get<size_t>(fl);
    if (len == 0 || len > buf.size()) break;
    auto d = decode(buf.first(len), ctx);
    if (auto* m = std::get_if<Message>(&d)) {
      std::vector<uint8_t> again;
      if (auto* o = std::get_if<Open>(m)) again = encode(*o);
      if (auto* u = std::get_if<Update>(m)) again = encode(*u, ctx);
      if (auto* n = std::get_if<Notification>(m)) again = encode(*n);
      if (!again.empty() && again.size() <= kMaxMessageLen) {
        auto d2 = decode(again, ctx);
        if (!std::holds_alternative<Message>(d2)) __builtin_trap();  // our own encoding must decode
      }
    }
    buf = buf.subspan(len);
  }
  return 0;
}
