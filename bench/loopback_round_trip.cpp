// The floor under a webhook call's cost on this machine: CPU time per request/answer round trip
// over loopback TCP, for an Asio client run as kwatch runs its I/O (an io_context on N threads,
// a coroutine awaiting each write and read), against an echo peer in another process. No TLS,
// no HTTP, no JSON: what is left is the kernel's loopback path, the wake-ups and Asio's
// scheduling, which two webhook calls per write (mutating, then validating) pay at least twice.
//
//   loopback_round_trip [--round-trips 20000] [--bytes 1500] [--threads 1,2]
//
// Prints one JSON line per thread count: CPU (user + system of this process) and wall time per
// round trip. Only 127.0.0.1 is used; the peer is a child process, ended when the socket closes.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

double cpu_microseconds() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e6 +
         static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec);
}

// Answers every `bytes` it reads with as many, until the client closes.
[[noreturn]] void echo(tcp::acceptor& acceptor, std::size_t bytes) {
  boost::system::error_code ec;
  tcp::socket peer(acceptor.get_executor());
  acceptor.accept(peer, ec);
  if (!ec) peer.set_option(tcp::no_delay(true), ec);
  std::vector<char> buffer(bytes);
  while (!ec) {
    asio::read(peer, asio::buffer(buffer), ec);
    if (!ec) asio::write(peer, asio::buffer(buffer), ec);
  }
  _exit(0);
}

void measure(int round_trips, std::size_t bytes, int threads) {
  asio::io_context listen_context;
  tcp::acceptor acceptor(listen_context, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  const auto endpoint = acceptor.local_endpoint();
  const pid_t child = fork();
  if (child == 0) echo(acceptor, bytes);
  acceptor.close();

  asio::io_context io(threads);
  tcp::socket socket(io);
  socket.connect(endpoint);
  socket.set_option(tcp::no_delay(true));
  std::vector<char> buffer(bytes, 'x');
  double cpu = 0;
  double wall = 0;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        const double cpu_start = cpu_microseconds();
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < round_trips; ++i) {
          co_await asio::async_write(socket, asio::buffer(buffer), asio::use_awaitable);
          co_await asio::async_read(socket, asio::buffer(buffer), asio::use_awaitable);
        }
        cpu = cpu_microseconds() - cpu_start;
        wall = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                   .count();
        socket.close();
      },
      asio::detached);
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back([&io] { io.run(); });
  io.run();
  for (auto& t : pool) t.join();
  waitpid(child, nullptr, 0);
  std::printf("{\"threads\": %d, \"bytes\": %zu, \"round_trips\": %d, "
              "\"cpu_us_per_round_trip\": %.1f, \"wall_us_per_round_trip\": %.1f}\n",
              threads, bytes, round_trips, cpu / round_trips, wall / round_trips);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  int round_trips = 20000;
  std::size_t bytes = 1500;
  std::vector<int> threads{1, 2};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--round-trips") {
      round_trips = std::max(1, std::atoi(value.c_str()));
    } else if (flag == "--bytes") {
      bytes = static_cast<std::size_t>(std::max(1, std::atoi(value.c_str())));
    } else if (flag == "--threads") {
      threads.clear();
      for (std::size_t at = 0; at < value.size();) {
        const std::size_t comma = std::min(value.find(',', at), value.size());
        threads.push_back(std::max(1, std::atoi(value.substr(at, comma - at).c_str())));
        at = comma + 1;
      }
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  for (int t : threads) measure(round_trips, bytes, t);
  return 0;
}
