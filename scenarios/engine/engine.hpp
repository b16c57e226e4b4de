#pragma once
// What lanes-traffic's modes share: their arguments, the start signal of a
// burst, addresses and sockets, and the stop signals.

#include <sys/socket.h>

#include <atomic>
#include <optional>
#include <string>

#include "lanes/testbed/event_loop.hpp"

namespace lanes::traffic_engine {

// SIGTERM or SIGINT came (set by the handler main installs)
extern std::atomic<bool> g_stop;
extern "C" void on_term(int);

// The value after NAME among argv[2..] (argv[1] is the mode).
std::optional<std::string> arg(int argc, char** argv, const std::string& name);
bool has_flag(int argc, char** argv, const std::string& name);

// --wait-go: lanes started this process with SIGUSR1 blocked and sends it
// to every process of a burst once all are running, so that a thousand of
// them start at one moment, not over the seconds it took to start them.
// false: SIGTERM came first.
bool wait_for_go(int argc, char** argv);

// --congestion NAME (any mode): the TCP congestion control of every TCP
// socket this process opens, so that a run's figures do not depend on the
// machine's default (lanes run passes the scenario's tcp-congestion). Empty:
// the namespace's default.
extern std::string g_congestion;
// Sets g_congestion on FD; false and WHY when the kernel refuses it.
bool set_congestion(int fd, std::string& why);

bool make_addr(const std::string& a, int port, sockaddr_storage& ss, socklen_t& len);
// A socket of TYPE towards DST, bound to BIND when given, connecting
// (non-blocking for TCP). On failure: -1 and WHY says what failed.
int open_to(const sockaddr_storage& dst, socklen_t dlen, int type, const std::optional<std::string>& bind,
            std::string& why);
// --to ADDR and --port P (default PORT) of MODE: false after saying what is wrong.
bool target_of(int argc, char** argv, const char* mode, int default_port, sockaddr_storage& dst, socklen_t& dlen);
// A non-blocking TCP listener on PORT of every address, both families (-1 after saying why not).
int listen_tcp(int port);
// SIGTERM and SIGINT end LOOP (through its signalfd); one that came before
// the loop took them over ends it at once. false: MODE could not set it up.
bool stop_on_signals(testbed::EventLoop& loop, const char* mode);

// The modes beyond traffic_main.cpp's
int collective_main(int argc, char** argv);
int training_main(int argc, char** argv);
int store_main(int argc, char** argv);

}  // namespace lanes::traffic_engine
