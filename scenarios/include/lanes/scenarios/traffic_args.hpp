#pragma once
// What each lanes-traffic mode is told: one struct per mode, written into an
// argv by the workloads (to_argv) and read back by lanes-traffic (parse), so
// that a flag's name, its type and its default exist once. Its outputs are
// traffic_results.hpp's.
//
// Every struct lists its flags in fields(V&): V is called with the flag and
// the member. A member's type says how it is spelled: a number or a string
// takes the next word, a bool is a flag alone, an optional is absent when
// empty, a list is one word joined by commas.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace lanes::scenarios::traffic {

// Flags every mode takes
struct CommonArgs {
  std::string congestion;  // TCP congestion control of its TCP sockets; empty: the namespace's default
  bool mptcp = false;  // its TCP sockets are MPTCP sockets (IPPROTO_MPTCP)
  std::optional<uint64_t> window;  // SO_SNDBUF and SO_RCVBUF of its TCP sockets; absent: the kernel's autotuning
};

// recv: counts and verifies the flows of send
struct RecvArgs : CommonArgs {
  static constexpr std::string_view kMode = "recv";
  int port = 5301;
  uint64_t seed = 1;
  int flows = 0;  // ends after this many flows finished (0: at SIGTERM)
  // set: it opens the --flows connections, to a send --listen at this
  // address and --port, instead of accepting them
  std::optional<std::string> from;
  template <class V> void fields(V&& v) {
    v("--port", port);
    v("--seed", seed);
    v("--flows", flows);
    v("--from", from);
  }
};

// send: F flows of N bytes each, or F flows that share --total bytes chunk by chunk
struct SendArgs : CommonArgs {
  static constexpr std::string_view kMode = "send";
  std::string to;
  int port = 5301;
  int flows = 1;
  uint64_t bytes = 10'000'000;
  std::optional<uint64_t> total;
  uint64_t chunk = 1 << 20;
  uint64_t seed = 1;
  int interval_ms = 100;
  std::optional<std::string> bind;
  bool wait_go = false;
  bool listen = false;  // it accepts the --flows connections on --port (a recv --from opens them) instead of --to
  double accept_timeout = 60;  // --listen: a flow whose connection has not come by then (seconds after the go) failed
  template <class V> void fields(V&& v) {
    v("--to", to);
    v("--port", port);
    v("--flows", flows);
    v("--bytes", bytes);
    v("--total", total);
    v("--chunk", chunk);
    v("--seed", seed);
    v("--interval-ms", interval_ms);
    v("--bind", bind);
    v("--wait-go", wait_go);
    v("--listen", listen);
    v("--accept-timeout", accept_timeout);
  }
};

// serve: answers fetch's requests
struct ServeArgs : CommonArgs {
  static constexpr std::string_view kMode = "serve";
  int port = 5401;
  uint64_t seed = 1;
  template <class V> void fields(V&& v) {
    v("--port", port);
    v("--seed", seed);
  }
};

// fetch: C connections of R requests each (closed loop), or requests that
// arrive at --rate a second for --duration seconds (open loop)
struct FetchArgs : CommonArgs {
  static constexpr std::string_view kMode = "fetch";
  std::string to;
  int port = 5401;
  int conns = 1;
  int requests = 1;
  uint64_t bytes = 65536;
  uint64_t seed = 1;
  double timeout = 120;  // seconds
  std::optional<std::string> bind;
  std::optional<double> rate;  // set: open loop
  double duration = 10;
  std::string arrival = "poisson";  // or constant
  bool wait_go = false;
  template <class V> void fields(V&& v) {
    v("--to", to);
    v("--port", port);
    v("--conns", conns);
    v("--requests", requests);
    v("--bytes", bytes);
    v("--seed", seed);
    v("--timeout", timeout);
    v("--bind", bind);
    v("--rate", rate);
    v("--duration", duration);
    v("--arrival", arrival);
    v("--wait-go", wait_go);
  }
};

// probe-recv: counts UDP probes per path
struct ProbeRecvArgs : CommonArgs {
  static constexpr std::string_view kMode = "probe-recv";
  int port = 5501;
  template <class V> void fields(V&& v) { v("--port", port); }
};

// probe-send: probes on N paths at HZ each
struct ProbeSendArgs : CommonArgs {
  static constexpr std::string_view kMode = "probe-send";
  std::string to;
  int port = 5501;
  int paths = 1;
  double rate = 1000;
  double seconds = 0;  // 0: until SIGTERM
  std::vector<std::string> bind;  // path i binds the i-th, cyclically
  template <class V> void fields(V&& v) {
    v("--to", to);
    v("--port", port);
    v("--paths", paths);
    v("--rate", rate);
    v("--seconds", seconds);
    v("--bind", bind);
  }
};

// collective: one rank of a ring collective
struct CollectiveArgs : CommonArgs {
  static constexpr std::string_view kMode = "collective";
  std::string op = "allreduce";
  int rank = -1;
  int ranks = 0;
  std::string to;  // the next rank
  int port = 5501;
  std::optional<int> next_port;  // the next rank's port (unset: --port)
  int listen_fd = -1;  // a listener handed over (tests), instead of --port
  uint64_t bytes = 0;
  int channels = 8;
  int iterations = 3;
  int warmup = 1;
  uint64_t piece = 256 * 1024;
  uint64_t seed = 1;
  double timeout = 600;
  bool wait_go = false;
  template <class V> void fields(V&& v) {
    v("--op", op);
    v("--rank", rank);
    v("--ranks", ranks);
    v("--to", to);
    v("--port", port);
    v("--next-port", next_port);
    v("--listen-fd", listen_fd);
    v("--bytes", bytes);
    v("--channels", channels);
    v("--iterations", iterations);
    v("--warmup", warmup);
    v("--piece", piece);
    v("--seed", seed);
    v("--timeout", timeout);
    v("--wait-go", wait_go);
  }
};

// training: one rank of a training job, with its checkpoints to a store
struct TrainingArgs : CommonArgs {
  static constexpr std::string_view kMode = "training";
  int rank = -1;
  int ranks = 0;
  std::string to;  // the next rank
  int port = 5501;
  std::optional<int> next_port;
  uint64_t gradient = 0;
  int steps = 0;
  double compute_ms = 0;
  int channels = 8;
  int checkpoint_every = 0;
  uint64_t checkpoint = 0;  // bytes per rank
  int checkpoint_flows = 1;  // connections a checkpoint is striped over
  std::optional<std::string> store;
  int store_port = 0;
  int incarnation = 0;
  bool resume = false;
  // a hot spare's store: every checkpoint saved is pushed there too, behind the job
  std::optional<std::string> spare;
  int spare_port = 0;
  // --resume from this store (a hot spare's) instead of --store, and this step (-1: the latest whole one)
  std::optional<std::string> restore_from;
  int restore_port = 0;
  int restore_step = -1;
  uint64_t seed = 1;
  double timeout = 600;
  bool wait_go = false;
  template <class V> void fields(V&& v) {
    v("--rank", rank);
    v("--ranks", ranks);
    v("--to", to);
    v("--port", port);
    v("--next-port", next_port);
    v("--spare", spare);
    v("--spare-port", spare_port);
    v("--restore-from", restore_from);
    v("--restore-port", restore_port);
    v("--restore-step", restore_step);
    v("--gradient", gradient);
    v("--steps", steps);
    v("--compute-ms", compute_ms);
    v("--channels", channels);
    v("--checkpoint-every", checkpoint_every);
    v("--checkpoint", checkpoint);
    v("--checkpoint-flows", checkpoint_flows);
    v("--store", store);
    v("--store-port", store_port);
    v("--incarnation", incarnation);
    v("--resume", resume);
    v("--seed", seed);
    v("--timeout", timeout);
    v("--wait-go", wait_go);
  }
};

// trace: one rank of a Chakra trace's replay (trace_replay.hpp)
struct TraceArgs : CommonArgs {
  static constexpr std::string_view kMode = "trace";
  std::string trace;  // this rank's file
  int rank = -1;
  int ranks = 0;
  std::string to;  // the next rank
  int port = 5501;
  std::optional<int> next_port;
  int listen_fd = -1;  // a listener handed over (tests), instead of --port
  // the direct connections (all-to-all, gather, scatter, sends): every
  // rank's address, the port they listen on (or each one's), a listener handed over
  std::vector<std::string> peers;
  int mesh_port = 5502;
  std::vector<std::string> peer_ports;
  int mesh_listen_fd = -1;
  int channels = 8;
  int iterations = 1;
  double scale = 1;  // compute durations times this
  uint64_t seed = 1;
  double timeout = 600;
  bool wait_go = false;
  template <class V> void fields(V&& v) {
    v("--trace", trace);
    v("--rank", rank);
    v("--ranks", ranks);
    v("--to", to);
    v("--port", port);
    v("--next-port", next_port);
    v("--listen-fd", listen_fd);
    v("--peers", peers);
    v("--mesh-port", mesh_port);
    v("--peer-ports", peer_ports);
    v("--mesh-listen-fd", mesh_listen_fd);
    v("--channels", channels);
    v("--iterations", iterations);
    v("--scale", scale);
    v("--seed", seed);
    v("--timeout", timeout);
    v("--wait-go", wait_go);
  }
};

// store: the training job's checkpoint server
struct StoreArgs : CommonArgs {
  static constexpr std::string_view kMode = "store";
  int port = 0;
  int ranks = 0;
  uint64_t seed = 1;
  template <class V> void fields(V&& v) {
    v("--port", port);
    v("--ranks", ranks);
    v("--seed", seed);
  }
};

namespace detail {
// One flag's word(s) into OUT; the parsers of one word (false: malformed)
void put(std::vector<std::string>& out, std::string_view flag, const std::string& v);
void put(std::vector<std::string>& out, std::string_view flag, int v);
void put(std::vector<std::string>& out, std::string_view flag, uint64_t v);
void put(std::vector<std::string>& out, std::string_view flag, double v);
void put(std::vector<std::string>& out, std::string_view flag, bool v);
void put(std::vector<std::string>& out, std::string_view flag, const std::vector<std::string>& v);
template <class T> void put(std::vector<std::string>& out, std::string_view flag, const std::optional<T>& v) {
  if (v) put(out, flag, *v);
}
bool take(std::string_view word, std::string& v);
bool take(std::string_view word, int& v);
bool take(std::string_view word, uint64_t& v);
bool take(std::string_view word, double& v);
bool take(std::string_view word, std::vector<std::string>& v);
template <class T> bool take(std::string_view word, std::optional<T>& v) {
  T x{};
  if (!take(word, x)) return false;
  v = std::move(x);
  return true;
}
template <class T> constexpr const char* value_name() {
  if constexpr (std::is_same_v<T, int> || std::is_same_v<T, std::optional<int>>) return "an integer";
  else if constexpr (std::is_same_v<T, uint64_t> || std::is_same_v<T, std::optional<uint64_t>>)
    return "a whole number";
  else if constexpr (std::is_same_v<T, double> || std::is_same_v<T, std::optional<double>>) return "a number";
  else return "a value";
}
}  // namespace detail

// ARGS as lanes-traffic's argv after the program: {mode, flags...}
template <class A> std::vector<std::string> to_argv(const A& args) {
  std::vector<std::string> out{std::string(A::kMode)};
  auto copy = args;
  copy.fields([&](std::string_view flag, const auto& member) { detail::put(out, flag, member); });
  if (!args.congestion.empty()) detail::put(out, "--congestion", args.congestion);
  if (args.mptcp) out.push_back("--mptcp");
  detail::put(out, "--window", args.window);
  return out;
}

// WORDS (what follows the mode) read as mode A's flags. nullopt and ERROR
// ("--flows x: expected an integer", "--bogus: not a flag of send") when a
// word is not A's flag, a flag lacks its value, or a value is malformed.
template <class A> std::optional<A> parse(std::span<const std::string> words, std::string& error) {
  A a;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& flag = words[i];
    bool known = false, ok = true;
    std::string_view expected;
    auto one = [&](std::string_view name, auto& member) {
      if (known || flag != name) return;
      known = true;
      using T = std::decay_t<decltype(member)>;
      if constexpr (std::is_same_v<T, bool>) {
        member = true;
      } else if (i + 1 >= words.size()) {
        ok = false;
        expected = "needs a value";
      } else if (!detail::take(words[++i], member)) {
        ok = false;
        expected = detail::value_name<T>();
      }
    };
    one("--congestion", a.congestion);
    one("--mptcp", a.mptcp);
    one("--window", a.window);
    a.fields(one);
    if (!known) {
      error = flag + ": not a flag of " + std::string(A::kMode);
      return std::nullopt;
    }
    if (!ok) {
      error = expected == "needs a value" ? flag + " needs a value"
                                          : flag + " " + words[i] + ": expected " + std::string(expected);
      return std::nullopt;
    }
  }
  return a;
}

}  // namespace lanes::scenarios::traffic
