#pragma once
// What lanes-traffic's modes share: their arguments, the start signal of a
// burst, addresses and sockets, and the stop signals.

#include <sys/socket.h>

#include <atomic>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lanes/scenarios/traffic_args.hpp"
#include "lanes/scenarios/traffic_results.hpp"
#include "lanes/testbed/event_loop.hpp"

namespace lanes::traffic_engine {

// SIGTERM or SIGINT came (set by the handler main installs)
extern std::atomic<bool> g_stop;
extern "C" void on_term(int);

// wait_go (--wait-go): lanes started this process with SIGUSR1 blocked and sends it
// to every process of a burst once all are running, so that a thousand of
// them start at one moment, not over the seconds it took to start them.
// false: SIGTERM came first.
bool wait_for_go(bool wait_go);

// --congestion NAME (any mode): the TCP congestion control of every TCP
// socket this process opens, so that a run's figures do not depend on the
// machine's default (lanes run passes the scenario's tcp-congestion). Empty:
// the namespace's default.
extern std::string g_congestion;
// --window BYTES (any mode): each TCP socket's send and receive buffer
// (SO_SNDBUF, SO_RCVBUF; the kernel keeps twice it, for its overhead), so a
// flow's window, and with it what one flow carries over a long round
// trip, is bounded as a scenario says. 0: the kernel's autotuning.
extern uint64_t g_window;
// Sets g_congestion and g_window on FD; false and WHY when the kernel refuses.
bool tune_stream(int fd, std::string& why);

// --mptcp (any mode): every TCP socket this process opens is an MPTCP
// socket (IPPROTO_MPTCP). Its namespace's path manager makes the subflows:
// one from each "subflow" endpoint of the side that connects.
extern bool g_mptcp;
// The protocol of a TCP socket: IPPROTO_MPTCP under --mptcp, else 0
int stream_protocol();
// --mptcp: the subflows of the MPTCP connection FD now (empty when it has
// none left, is not MPTCP, or the kernel cannot say)
std::vector<scenarios::traffic::Subflow> mptcp_subflows(int fd);

bool make_addr(const std::string& a, int port, sockaddr_storage& ss, socklen_t& len);
// A socket of TYPE towards DST, bound to BIND when given, connecting
// (non-blocking for TCP). On failure: -1 and WHY says what failed.
int open_to(const sockaddr_storage& dst, socklen_t dlen, int type, const std::optional<std::string>& bind,
            std::string& why);
// --to ADDR and --port P of MODE: false after saying what is wrong.
bool target_of(const std::string& to, int port, std::string_view mode, sockaddr_storage& dst, socklen_t& dlen);
// A non-blocking TCP listener on PORT of every address, both families (-1 after saying why not).
int listen_tcp(int port);
// SIGTERM and SIGINT end LOOP (through its signalfd); one that came before
// the loop took them over ends it at once. false: MODE could not set it up.
bool stop_on_signals(testbed::EventLoop& loop, const char* mode);

// The modes beyond traffic_main.cpp's
int collective_main(const scenarios::traffic::CollectiveArgs& a);
int training_main(const scenarios::traffic::TrainingArgs& a);
int store_main(const scenarios::traffic::StoreArgs& a);
int trace_main(const scenarios::traffic::TraceArgs& a);

}  // namespace lanes::traffic_engine
