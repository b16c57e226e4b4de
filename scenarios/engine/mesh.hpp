#pragma once
// The trace mode's direct connections between ranks, beside the ring: a
// rank opens PER_PEER connections to every other rank and accepts as many
// from each, and moves messages over them — the blocks of an all-to-all, a
// gather or a scatter, a point-to-point send. A message is named by a key
// both ends know (the exchange, or the transfer's tag and place), cut into
// pieces that any of the peer's connections with room takes, and filled
// with collective::block_word(seed, key, from, to, i): the receiver checks
// every word as its piece arrives.
//
// Receiving is eager: whatever comes is read, checked and counted at once,
// before or after the receiver asks for it (expect), so no two ranks can
// hold each other up on a full socket whatever order their graphs run in.
// A message that nobody expects, or more bytes than expected, is an error.

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lanes/testbed/event_loop.hpp"

namespace lanes::traffic_engine {

class Mesh {
 public:
  struct Addr {
    sockaddr_storage ss{};
    socklen_t len = 0;
  };
  Mesh(testbed::EventLoop& loop, int rank, int ranks, int per_peer, uint64_t piece, uint64_t seed);
  ~Mesh();
  Mesh(const Mesh&) = delete;
  Mesh& operator=(const Mesh&) = delete;

  // connects to every other rank (PEERS[r]; this rank's own entry unused)
  // and takes theirs on LISTENER. false: a connection could not be opened
  bool start(const std::vector<Addr>& peers, int listener);
  // every connection up both ways
  std::function<void()> on_ready;
  // the mesh failed (once; WHY says how)
  std::function<void(const std::string&)> on_fail;

  // a message of BYTES (a multiple of 8) to PEER named KEY; DONE once every
  // byte of it is handed to TCP
  void send(int peer, uint64_t key, uint64_t bytes, std::function<void()> done);
  // DONE once the message KEY of BYTES from PEER has come whole (at once,
  // on the loop's next turn, if it already has)
  void expect(int peer, uint64_t key, uint64_t bytes, std::function<void()> done);
  // nothing more to send: the connections out are shut for writing
  void finish();

  bool ready() const { return ready_; }
  bool failed() const { return failed_; }
  // every message expected came whole, nothing else came, every word right
  bool verified() const;
  uint64_t sent_bytes() const { return sent_bytes_; }
  uint64_t received_bytes() const { return received_bytes_; }
  uint64_t expected_bytes() const { return expected_bytes_; }
  uint64_t checked_bytes() const { return checked_bytes_; }
  // the first wrong word: the offset in its message (-1: none)
  int64_t first_bad_offset() const { return first_bad_offset_; }
  const std::vector<std::string>& errors() const { return errors_; }
  // payload bytes each connection out carried, peer by peer
  std::vector<uint64_t> connection_bytes() const;
  uint64_t retransmits() const;

  // the framing on the wire
  struct Hello {
    uint32_t magic, rank, channel, ranks;
  };
  struct Header {
    uint32_t magic, length;
    uint64_t key, offset;
  };
  static constexpr uint32_t kHelloMagic = 0x4c4e4d31;  // "LNM1"
  static constexpr uint32_t kPieceMagic = 0x4c4e4d32;  // "LNM2"

 private:
  struct Out {
    int fd = -1, peer = 0;
    bool connected = false;
    Hello hello{};
    size_t hello_sent = 0;
    bool busy = false;
    Header h{};
    size_t message = 0;  // the message the piece belongs to
    std::vector<uint64_t> body;
    size_t done = 0;  // of header and body
    uint64_t payload = 0;
    uint32_t watched = 0;
  };
  struct In {
    int fd = -1, peer = -1;
    bool hello_ok = false, closed = false;
    Hello hello{};
    size_t hello_got = 0;
    Header h{};
    size_t hdr_got = 0;
    bool in_body = false;
    std::vector<uint64_t> body;
    size_t body_got = 0;
  };
  struct Piece {
    size_t message;
    uint64_t key, offset;
    uint32_t length;
  };
  struct Message {
    int peer;
    size_t pieces_left;
    std::function<void()> done;
  };
  struct Expected {
    uint64_t bytes = 0, got = 0;
    bool asked = false, fired = false;
    std::function<void()> done;
  };

  void fail(const std::string& why);
  void on_accept(int listener);
  void on_out(size_t i, uint32_t events);
  void on_in(size_t i);
  bool write_some(Out& o);
  void pump(int peer);
  void watch_out(Out& o);
  bool room(const Out& o) const;
  void piece_arrived(In& in);
  void fire(Expected& e);
  // every connection from PEER came and was closed by it
  bool peer_gone(int peer) const;
  void maybe_ready();

  testbed::EventLoop& loop_;
  int rank_, ranks_, per_peer_;
  uint64_t piece_, seed_;
  int lowat_;
  std::vector<Out> outs_;
  std::vector<In> ins_;
  std::vector<std::deque<Piece>> queue_;  // per peer
  std::vector<Message> messages_;
  std::map<std::pair<int, uint64_t>, Expected> expected_;  // (peer, key)
  int listener_ = -1;
  bool ready_ = false, failed_ = false, finished_ = false;
  uint64_t sent_bytes_ = 0, received_bytes_ = 0, expected_bytes_ = 0, checked_bytes_ = 0;
  int64_t first_bad_offset_ = -1;
  std::vector<std::string> errors_;
};

}  // namespace lanes::traffic_engine
