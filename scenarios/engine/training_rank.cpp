// lanes-traffic training and store: a training job's rank, and the storage
// server its checkpoints go to (lanes/scenarios/training.hpp).
//
//   lanes-traffic training --rank R --ranks N --to NEXT --port P
//       --gradient BYTES --steps S --compute-ms MS --store ADDR
//       --store-port Q [--checkpoint-every K] [--checkpoint BYTES] [--checkpoint-flows F]
//       [--channels C] [--incarnation I] [--resume] [--seed SEED]
//       [--timeout SECONDS] [--wait-go] [--next-port P2]
//   With --resume it first restores the latest checkpoint every rank saved
//   whole (every byte checked; --restore-step S: that one; --restore-from
//   ADDR --restore-port P: from that store, a hot spare's; in F stripes at
//   once as it was saved) and goes on at the step after it. With --spare ADDR --spare-port P every checkpoint it
//   saved is pushed to that store too (a hot spare's), behind the job, the
//   newest waiting while one is on its way (event "spare" once acked). Each step
//   is a pause of MS (the compute) and a ring all-reduce of BYTES with the
//   other ranks (rank.hpp); after every K-th step it saves BYTES of
//   checkpoint to the store (in F stripes at once, a connection each) and
//   waits for its ack. Prints one JSON line per
//   event as it happens (training::Event), so a rank killed mid-run leaves
//   what it did.
//
//   lanes-traffic store --port P --ranks N [--seed SEED]
//       keeps the checkpoints' record: a save (PUT) is checked byte by byte
//       against the pattern of its rank and step and acked (one cut off by
//       its rank's death is no checkpoint, counted apart from wrong ones);
//       a restore (GET) is answered with the latest checkpoint all N ranks
//       saved whole (or the one asked for, if it is; a stripe of it,
//       GET-STRIPE, by the step a first GET of 0 bytes named). A line (role
//       "store-progress") says each step the moment all N saved it whole.
//       Prints a JSON line (role "store") at SIGTERM.

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "lanes/scenarios/pattern.hpp"
#include "lanes/scenarios/training.hpp"
#include "rank.hpp"

namespace lanes::traffic_engine {

namespace training = lanes::scenarios::training;
using lanes::scenarios::Pattern;
using lanes::scenarios::Source;

namespace {

std::mutex g_print;  // a line at a time: the store's threads, a rank and its spare pusher

constexpr uint32_t kStoreMagic = 0x4c4e5331;  // "LNS1"
constexpr uint32_t kPut = 1, kGet = 2, kPutStripe = 3, kGetStripe = 4;
constexpr uint32_t kOk = 0, kBad = 1;

struct StoreHeader {
  uint32_t magic, op, rank;
  int32_t step;  // a GET's answer: -1, none saved
  uint64_t bytes;
};

// whole reads and writes on a blocking socket (false: it failed or closed)
bool read_all(int fd, void* p, size_t n) {
  auto* b = static_cast<uint8_t*>(p);
  while (n > 0) {
    ssize_t r = ::read(fd, b, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    b += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}
bool write_all(int fd, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  while (n > 0) {
    ssize_t w = ::send(fd, b, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    b += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// a striped save's or restore's piece: after the header, whose bytes are the whole checkpoint's
struct Stripe {
  uint64_t offset, length;
};
// ST is a piece of a checkpoint of BYTES (no sum that could wrap)
bool inside(const Stripe& st, uint64_t bytes) {
  return st.length > 0 && st.offset < bytes && st.length <= bytes - st.offset;
}

// Sends BYTES of rank RANK's checkpoint of STEP (its pattern) from FROM.
bool send_checkpoint(int fd, uint64_t seed, int step, int rank, uint64_t bytes, uint64_t from = 0) {
  Source src(seed, training::checkpoint_flow(step, rank));
  for (uint64_t off = from; off < from + bytes;) {
    auto s = src.at(off, static_cast<size_t>(std::min<uint64_t>(1 << 20, from + bytes - off)));
    if (!write_all(fd, s.data(), s.size())) return false;
    off += s.size();
  }
  return true;
}

// Reads BYTES of rank RANK's checkpoint of STEP from FROM, each checked
// against its pattern (MATCHES: every byte was). false: the connection
// ended first.
bool receive_checkpoint(int fd, uint64_t seed, int step, int rank, uint64_t bytes, bool& matches, uint64_t from = 0) {
  Pattern p(seed, training::checkpoint_flow(step, rank));
  std::vector<uint8_t> buf(1 << 20);
  matches = true;
  for (uint64_t off = from; off < from + bytes;) {
    ssize_t r = ::read(fd, buf.data(), static_cast<size_t>(std::min<uint64_t>(buf.size(), from + bytes - off)));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    matches = matches && p.matches(off, std::span<const uint8_t>(buf.data(), static_cast<size_t>(r)));
    off += static_cast<uint64_t>(r);
  }
  return true;
}

// ---- the store ----

class Store {
 public:
  Store(int ranks, uint64_t seed) : ranks_(ranks), seed_(seed) {}

  void serve(int fd) {
    StoreHeader h{};
    if (!read_all(fd, &h, sizeof h) || h.magic != kStoreMagic) return bad("a request that is not the store's");
    if (h.op == kPut) return put(fd, h, {0, h.bytes});
    if (h.op == kPutStripe) {
      Stripe st{};
      if (!read_all(fd, &st, sizeof st) || !inside(st, h.bytes)) return bad("a stripe that is not in its checkpoint");
      return put(fd, h, st);
    }
    if (h.op == kGet) return get(fd, h, {0, h.bytes});
    if (h.op == kGetStripe) {
      Stripe st{};
      if (!read_all(fd, &st, sizeof st) || h.step < 0 || !inside(st, h.bytes))
        return bad("a restore's stripe that is not in its checkpoint");
      return get(fd, h, st);
    }
    bad("an unknown request");
  }

  nlohmann::json result() {
    std::lock_guard lk(mu_);
    nlohmann::json at = nlohmann::json::object();
    for (const auto& [step, t] : complete_at_) at[std::to_string(step)] = t;
    nlohmann::json complete = nlohmann::json::array();
    for (const auto& [step, rs] : saved_)
      if (static_cast<int>(rs.size()) >= ranks_) complete.push_back(step);
    return {{"role", "store"},       {"puts", puts_},   {"gets", gets_},          {"verified_bytes", verified_},
            {"served_bytes", served_}, {"bad", bad_},   {"cut_off", cut_off_},    {"complete_steps", complete},
            {"complete_at_s", at},     {"errors", errors_}};
  }

 private:
  void bad(const std::string& why) {
    std::lock_guard lk(mu_);
    ++bad_;
    if (errors_.size() < 5) errors_.push_back(why);
  }

  // a checkpoint, or one stripe of it (a rank's checkpoint is saved once
  // every byte of it arrived right)
  void put(int fd, const StoreHeader& h, const Stripe& st) {
    bool ok = false;
    if (!receive_checkpoint(fd, seed_, h.step, static_cast<int>(h.rank), st.length, ok, st.offset)) {
      // the rank died mid-save (a job failure): no checkpoint, and no error of the store's
      std::lock_guard lk(mu_);
      ++cut_off_;
      return;
    }
    {
      std::lock_guard lk(mu_);
      ++puts_;
      auto& got = stripes_[{h.step, static_cast<int>(h.rank)}];
      if (ok) got.emplace(st.offset, st.length);  // (a step done again after a failure is saved again)
      uint64_t have = 0;
      for (const auto& [o, l] : got) have += l;
      if (ok) verified_ += st.length;
      if (ok && have == h.bytes) {
        auto& ranks = saved_[h.step];
        ranks.insert(static_cast<int>(h.rank));
        // the step is whole here: said at once (a hot spare's staleness is read while the job runs)
        if (static_cast<int>(ranks.size()) == ranks_ && !complete_at_.count(h.step)) {
          double t = mono_s();
          complete_at_[h.step] = t;
          std::lock_guard out(g_print);
          std::cout << nlohmann::json{{"role", "store-progress"}, {"step", h.step}, {"complete_s", t}}.dump()
                    << std::endl;
        }
      } else if (!ok) {
        ++bad_;
        if (errors_.size() < 5) errors_.push_back("rank " + std::to_string(h.rank) + "'s checkpoint of step " +
                                                  std::to_string(h.step) + " is not its pattern");
      }
    }
    uint32_t ack[2] = {kStoreMagic, ok ? kOk : kBad};
    write_all(fd, ack, sizeof ack);
  }

  // the latest checkpoint every rank saved whole, or (STEP ≥ 0 asked) that
  // one if it is whole here (-1: none); of it the stripe ST (a whole
  // restore's is all of it; asked for 0 bytes: only which step)
  void get(int fd, const StoreHeader& h, Stripe st) {
    int step;
    {
      std::lock_guard lk(mu_);
      ++gets_;
      if (h.step >= 0) {
        auto it = saved_.find(h.step);
        step = it != saved_.end() && static_cast<int>(it->second.size()) >= ranks_ ? h.step : -1;
      } else {
        step = training::resume_step(saved_, ranks_) - 1;
      }
    }
    StoreHeader a{kStoreMagic, h.op, h.rank, step, step >= 0 ? st.length : 0};
    if (!write_all(fd, &a, sizeof a)) return bad("a restore's answer could not be sent");
    if (!send_checkpoint(fd, seed_, step, static_cast<int>(h.rank), a.bytes, st.offset))
      return bad("a restore of rank " + std::to_string(h.rank) + " broke off");
    std::lock_guard lk(mu_);
    served_ += a.bytes;
  }

  int ranks_;
  uint64_t seed_;
  std::mutex mu_;
  std::map<int, std::set<int>> saved_;
  std::map<int, double> complete_at_;
  std::map<std::pair<int, int>, std::map<uint64_t, uint64_t>> stripes_;  // (step, rank) → offset → length, arrived right
  uint64_t puts_ = 0, gets_ = 0, verified_ = 0, served_ = 0, bad_ = 0, cut_off_ = 0;
  std::vector<std::string> errors_;
};

// ---- a rank's side of the store ----

// A blocking connection to the store, or -1 (WHY says why).
int store_connect(const sockaddr_storage& dst, socklen_t len, double timeout_s, std::string& why) {
  int fd = ::socket(dst.ss_family, SOCK_STREAM | SOCK_CLOEXEC, stream_protocol());
  if (fd < 0) {
    why = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  if (!tune_stream(fd, why)) {
    ::close(fd);
    return -1;
  }
  timeval tv{static_cast<time_t>(timeout_s), 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&dst), len) != 0) {
    why = std::string("connecting to the store: ") + std::strerror(errno);
    ::close(fd);
    return -1;
  }
  return fd;
}

// Saves rank RANK's checkpoint after STEP: true once the store acked it
// whole and right. FLOWS > 1: in as many stripes at once, a connection each
// (so that it can spread over the NICs as a checkpoint workload's flows do).
bool save(const sockaddr_storage& dst, socklen_t len, int rank, int step, uint64_t bytes, uint64_t seed,
          double timeout_s, std::string& why, int flows = 1) {
  auto one = [&](uint64_t offset, uint64_t length, bool striped, std::string& err) {
    int fd = store_connect(dst, len, timeout_s, err);
    if (fd < 0) return false;
    StoreHeader h{kStoreMagic, striped ? kPutStripe : kPut, static_cast<uint32_t>(rank), step, bytes};
    Stripe st{offset, length};
    bool ok = write_all(fd, &h, sizeof h) && (!striped || write_all(fd, &st, sizeof st)) &&
              send_checkpoint(fd, seed, step, rank, length, offset);
    uint32_t ack[2] = {0, kBad};
    ok = ok && read_all(fd, ack, sizeof ack) && ack[0] == kStoreMagic;
    ::close(fd);
    if (!ok) err = "the checkpoint of step " + std::to_string(step) + " was not acked";
    else if (ack[1] != kOk) err = "the store found the checkpoint of step " + std::to_string(step) + " wrong";
    return ok && ack[1] == kOk;
  };
  uint64_t n = std::clamp<uint64_t>(static_cast<uint64_t>(std::max(flows, 1)), 1, std::max<uint64_t>(bytes, 1));
  if (n == 1) return one(0, bytes, false, why);
  std::vector<std::thread> threads;
  std::vector<std::string> errs(n);
  std::vector<char> oks(n, 0);
  uint64_t per = bytes / n;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t off = i * per, length = i + 1 == n ? bytes - off : per;
    threads.emplace_back([&, i, off, length] { oks[i] = one(off, length, true, errs[i]); });
  }
  for (auto& t : threads) t.join();
  for (uint64_t i = 0; i < n; ++i)
    if (!oks[i]) {
      why = errs[i];
      return false;
    }
  return true;
}

// One request of a restore: of rank RANK's checkpoint of WANT (-1: the
// latest whole one), BYTES long, the stripe ST (kGetStripe) or all of it
// from the start (kGet); STEP is the one answered (-1: none), GOT what came
// (checked: VERIFIED).
bool fetch_checkpoint(const sockaddr_storage& dst, socklen_t len, int rank, uint64_t bytes, uint64_t seed,
                      double timeout_s, int want, std::optional<Stripe> st, int& step, uint64_t& got, bool& verified,
                      std::string& why) {
  int fd = store_connect(dst, len, timeout_s, why);
  if (fd < 0) return false;
  StoreHeader h{kStoreMagic, st ? kGetStripe : kGet, static_cast<uint32_t>(rank), want, bytes}, a{};
  bool ok = write_all(fd, &h, sizeof h) && (!st || write_all(fd, &*st, sizeof *st)) && read_all(fd, &a, sizeof a) &&
            a.magic == kStoreMagic;
  step = ok ? a.step : -1;
  got = 0;
  verified = ok;
  if (ok && a.step >= 0 && a.bytes > 0) {
    ok = receive_checkpoint(fd, seed, a.step, rank, a.bytes, verified, st ? st->offset : 0);
    got = ok ? a.bytes : 0;
  }
  ::close(fd);
  if (!ok) why = "the restore broke off";
  return ok;
}

// The latest checkpoint every rank saved (STEP -1: none), read whole and
// checked (WANT ≥ 0: that checkpoint, if it is whole there). FLOWS > 1: the
// store is first asked which step it has, then read in as many stripes at
// once, a connection each, as a striped save wrote it.
bool restore(const sockaddr_storage& dst, socklen_t len, int rank, uint64_t bytes, uint64_t seed, double timeout_s,
             int want, int& step, bool& verified, std::string& why, int flows = 1) {
  uint64_t n = std::clamp<uint64_t>(static_cast<uint64_t>(std::max(flows, 1)), 1, std::max<uint64_t>(bytes, 1));
  uint64_t got = 0;
  if (n == 1) {
    bool ok = fetch_checkpoint(dst, len, rank, bytes, seed, timeout_s, want, std::nullopt, step, got, verified, why);
    verified = verified && ok && (step < 0 || got == bytes);
    return ok;
  }
  bool ok = fetch_checkpoint(dst, len, rank, 0, seed, timeout_s, want, std::nullopt, step, got, verified, why);
  if (!ok || step < 0) return ok;
  std::vector<std::thread> threads;
  std::vector<std::string> errs(n);
  std::vector<char> oks(n, 0), good(n, 0);
  std::vector<uint64_t> gots(n, 0);
  uint64_t per = bytes / n;
  const int which = step;
  for (uint64_t i = 0; i < n; ++i) {
    Stripe st{i * per, i + 1 == n ? bytes - i * per : per};
    threads.emplace_back([&, i, st] {
      int answered = -1;
      bool v = false;
      oks[i] = fetch_checkpoint(dst, len, rank, bytes, seed, timeout_s, which, st, answered, gots[i], v, errs[i]) &&
               answered == which && gots[i] == st.length;
      good[i] = v;
    });
  }
  for (auto& t : threads) t.join();
  verified = true;
  for (uint64_t i = 0; i < n; ++i) {
    if (!oks[i]) {
      why = errs[i].empty() ? "a stripe of the restore did not come whole" : errs[i];
      verified = false;
      return false;
    }
    verified = verified && good[i];
  }
  return true;
}

void print(const training::Event& e) {
  std::lock_guard lk(g_print);
  std::cout << training::to_json_line(e).dump() << std::endl;
}

// A rank's checkpoints on their way to the hot spare, behind the job: one
// at a time, the newest waiting (one that a newer replaced before it left
// is dropped: the spare wants the latest state, not every state)
class SparePusher {
 public:
  SparePusher(const sockaddr_storage& dst, socklen_t len, int rank, int incarnation, uint64_t seed, double timeout,
              int flows)
      : dst_(dst), len_(len), rank_(rank), incarnation_(incarnation), seed_(seed), timeout_(timeout), flows_(flows),
        worker_([this] { run(); }) {}
  ~SparePusher() {
    {
      std::lock_guard lk(mu_);
      closing_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  void push(int step, uint64_t bytes) {
    {
      std::lock_guard lk(mu_);
      if (pending_) ++dropped_;
      pending_ = {step, bytes};
    }
    cv_.notify_all();
  }

 private:
  // the pushes end with the rank: what is on its way is finished, what waits is pushed
  void run() {
    for (;;) {
      std::pair<int, uint64_t> next;
      {
        std::unique_lock lk(mu_);
        cv_.wait(lk, [this] { return pending_ || closing_; });
        if (!pending_) return;
        next = *pending_;
        pending_.reset();
      }
      training::Event e{"spare", rank_, incarnation_, next.first};
      e.start_s = mono_s();
      std::string err;
      e.verified = save(dst_, len_, rank_, next.first, next.second, seed_, timeout_, err, flows_);
      e.end_s = mono_s();
      e.bytes = next.second;
      e.error = err;
      print(e);
    }
  }

  sockaddr_storage dst_;
  socklen_t len_;
  int rank_, incarnation_;
  uint64_t seed_;
  double timeout_;
  int flows_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<std::pair<int, uint64_t>> pending_;
  bool closing_ = false;
  int dropped_ = 0;
  std::thread worker_;
};

}  // namespace

int store_main(const scenarios::traffic::StoreArgs& a) {
  const int port = a.port, ranks = a.ranks;
  const uint64_t seed = a.seed;
  if (port <= 0 || ranks < 1) {
    std::cerr << "lanes-traffic store: --port P and --ranks N are required\n";
    return 2;
  }
  int ls = listen_tcp(port);
  if (ls < 0) return 1;
  Store store(ranks, seed);
  // the stop signals held but while it waits for a connection: one that
  // comes then ends the wait (EINTR), none is missed between check and wait
  sigset_t stops, waiting;
  sigemptyset(&stops);
  sigaddset(&stops, SIGTERM);
  sigaddset(&stops, SIGINT);
  ::sigprocmask(SIG_BLOCK, &stops, &waiting);
  sigdelset(&waiting, SIGTERM);
  sigdelset(&waiting, SIGINT);
  // a thread per connection: the ranks save at once, and a save blocks on its reads
  while (!g_stop) {
    pollfd p{ls, POLLIN, 0};
    if (::ppoll(&p, 1, nullptr, &waiting) <= 0) continue;
    int fd = ::accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::thread([&store, fd] {
      store.serve(fd);
      ::close(fd);
    }).detach();
  }
  std::cout << store.result().dump() << std::endl;
  std::_Exit(0);  // connections still served end with the process
}

int training_main(const scenarios::traffic::TrainingArgs& a) {
  const int rank = a.rank, ranks = a.ranks, channels = a.channels, steps = a.steps, every = a.checkpoint_every,
            incarnation = a.incarnation;
  const uint64_t gradient = a.gradient, ckpt = a.checkpoint, seed = a.seed;
  const double compute_s = a.compute_ms / 1000, timeout = a.timeout;
  const int port = a.port, next_port = a.next_port.value_or(a.port), store_port = a.store_port;
  const bool resume = a.resume;
  std::string why;
  if (ranks < 2) why = "--ranks must be at least 2";
  else if (rank < 0 || rank >= ranks) why = "--rank must be in 0..ranks-1";
  else if (channels < 1 || channels > 256) why = "--channels must be in 1..256";
  else if (steps < 1 || steps > 30000) why = "--steps must be in 1..30000";
  else if (every < 0 || compute_s < 0) why = "--checkpoint-every and --compute-ms must not be negative";
  else if (gradient < 8ull * static_cast<uint64_t>(ranks)) why = "--gradient must be at least 8 bytes per rank";
  sockaddr_storage next{}, store{};
  socklen_t nlen = 0, slen = 0;
  const auto& at = a.store;
  if (why.empty() && a.to.empty()) why = "--to NEXT (the next rank's address) is required";
  if (why.empty() && !make_addr(a.to, next_port, next, nlen)) why = "bad address " + a.to;
  if (why.empty() && (every > 0 || resume) && (!at || store_port <= 0))
    why = "--store ADDR and --store-port Q are required with checkpoints";
  if (why.empty() && at && !make_addr(*at, store_port, store, slen)) why = "bad store address " + *at;
  sockaddr_storage spare{}, from = store;
  socklen_t sparelen = 0, fromlen = slen;
  if (why.empty() && a.spare && (!at || every <= 0 || ckpt == 0))
    why = "--spare needs checkpoints (--store, --checkpoint-every, --checkpoint)";
  if (why.empty() && a.spare && !make_addr(*a.spare, a.spare_port, spare, sparelen)) why = "bad spare address " + *a.spare;
  if (why.empty() && a.restore_from && !make_addr(*a.restore_from, a.restore_port, from, fromlen))
    why = "bad --restore-from address " + *a.restore_from;
  if (!why.empty()) {
    std::cerr << "lanes-traffic training: " << why << "\n";
    return 2;
  }
  int ls = listen_tcp(port);
  if (ls < 0) return 1;
  if (!wait_for_go(a.wait_go)) return 1;

  training::Event start{"start", rank, incarnation};
  start.start_s = mono_s();
  int first = 0;
  if (resume) {
    training::Event r{"restore", rank, incarnation};
    r.start_s = mono_s();
    int step = -1;
    bool verified = false;
    std::string err;
    bool ok = restore(from, fromlen, rank, ckpt, seed, timeout, a.restore_step, step, verified, err, a.checkpoint_flows);
    r.end_s = mono_s();
    r.step = step;
    r.bytes = step >= 0 ? ckpt : 0;
    r.verified = verified;
    r.error = err;
    print(r);
    if (!ok) return 1;
    first = step + 1;
  }
  start.step = first;
  print(start);
  training::Event end{"end", rank, incarnation, steps - 1};
  if (first >= steps) {  // the job was done: nothing to do again
    end.end_s = mono_s();
    end.verified = true;
    print(end);
    return 0;
  }

  coll::Layout l = coll::layout(gradient, ranks, 262144);
  Rank ring(coll::Op::allreduce, rank, ranks, channels, l, seed, steps - first);
  ring.prepare();
  training::Event step{"step", rank, incarnation};
  bool saved_ok = true;
  std::unique_ptr<SparePusher> pusher;
  if (a.spare) pusher = std::make_unique<SparePusher>(spare, sparelen, rank, incarnation, seed, timeout, a.checkpoint_flows);
  ring.before_step = [&](int i) {
    step.step = first + i;
    step.start_s = mono_s();
    step.mid_s = step.start_s + compute_s;
    return compute_s;
  };
  ring.after_step = [&](int i) {
    step.end_s = mono_s();
    print(step);
    int s = first + i;
    if (!training::checkpoint_due(s, every) || ckpt == 0) return;
    training::Event sv{"save", rank, incarnation, s};
    sv.start_s = mono_s();
    std::string err;
    sv.verified = save(store, slen, rank, s, ckpt, seed, timeout, err, a.checkpoint_flows);
    sv.end_s = mono_s();
    sv.bytes = ckpt;
    sv.error = err;
    saved_ok = saved_ok && sv.verified;
    print(sv);
    if (pusher && sv.verified) pusher->push(s, ckpt);
  };
  bool ok = ring.run(next, nlen, ls, timeout);
  ring.verify();
  const auto& res = ring.result();
  end.end_s = mono_s();
  end.verified = ok && res.verified && saved_ok;
  end.bytes = res.checked_bytes;
  if (!res.errors.empty()) end.error = res.errors.front();
  if (ok) print(end);
  else {
    training::Event failed{"failed", rank, incarnation, first};
    failed.end_s = end.end_s;
    failed.error = end.error;
    print(failed);
  }
  return end.verified ? 0 : 1;
}

}  // namespace lanes::traffic_engine
