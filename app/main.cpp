// kwatch-apiserver: parses the flags and runs the application (app/application.hpp).
#include "app/application.hpp"
#include "app/line_sink.hpp"
#include "app/options.hpp"
#include "server/version.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include <unistd.h>

using namespace kwatch;

int main(int argc, char** argv) {
  auto outcome = app::parse_options(std::vector<std::string>(argv + 1, argv + argc));
  if (std::holds_alternative<app::ParseHelp>(outcome)) {
    std::fputs(app::usage().c_str(), stdout);
    return 0;
  }
  if (std::holds_alternative<app::ParseVersion>(outcome)) {
    std::printf("kwatch-apiserver %s (Kubernetes API v1.%s)\n", server::kKwatchVersion,
                server::kKubernetesMinor);
    return 0;
  }
  if (auto* err = std::get_if<app::ParseError>(&outcome)) {
    std::fprintf(stderr, "kwatch-apiserver: %s\nRun 'kwatch-apiserver --help' for usage.\n",
                 err->message.c_str());
    return 2;
  }
  const auto options = std::get<app::Options>(outcome);
  // An audit log on standard output has it to itself: the server's own log moves to stderr.
  // On a terminal, in colour; elsewhere a line at a time with no lock (app/line_sink.hpp).
  const int log_fd = options.audit_log_path == "-" ? STDERR_FILENO : STDOUT_FILENO;
  std::shared_ptr<spdlog::sinks::sink> sink;
  if (::isatty(log_fd)) {
    if (log_fd == STDERR_FILENO) sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    else sink = std::make_shared<spdlog::sinks::stdout_color_sink_mt>();
  } else {
    sink = std::make_shared<app::LineSink>(log_fd);
  }
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("", std::move(sink)));
  spdlog::set_level(spdlog::level::from_str(options.log_level));

  app::Application application(options);
  if (!application.start()) return 1;
  return application.run();
}
