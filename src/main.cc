// sluice: priority-and-fairness gateway for LLM inference servers.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>

#include "admin/admin_server.h"
#include "config/config.h"
#include "config/units.h"
#include "observe/log.h"
#include "proxy/server.h"

namespace {

constexpr const char* kUsage =
    "usage: sluice --config FILE [--listen HOST:PORT] [--admin-listen HOST:PORT]\n"
    "              [--threads N] [--admin-token-file FILE] [--log-level debug|info|warn|error]\n"
    "              [--access-log FILE|-] [--access-log-format json|text]\n";

[[noreturn]] void usage_error(const std::string& what) {
  std::cerr << "sluice: " << what << "\n" << kUsage;
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path, listen, admin_listen, token_file, access_log, access_log_format;
  int threads = -1;
  sluice::log::Level level = sluice::log::Level::kInfo;
  bool level_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(std::string(arg) + " needs a value");
      return argv[++i];
    };
    if (arg == "--config")
      config_path = value();
    else if (arg == "--listen")
      listen = value();
    else if (arg == "--admin-listen")
      admin_listen = value();
    else if (arg == "--admin-token-file")
      token_file = value();
    else if (arg == "--access-log")
      access_log = value();
    else if (arg == "--access-log-format") {
      access_log_format = value();
      if (access_log_format != "json" && access_log_format != "text")
        usage_error("--access-log-format must be json or text");
    } else if (arg == "--threads") {
      auto v = value();
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 1 || n > 256) usage_error("--threads must be 1..256");
      threads = static_cast<int>(n);
    } else if (arg == "--log-level") {
      if (!sluice::log::parse_level(value(), level)) usage_error("unknown --log-level");
      level_given = true;
    } else if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    } else {
      usage_error("unknown argument '" + std::string(arg) + "'");
    }
  }
  if (config_path.empty()) usage_error("--config is required");
  sluice::log::set_level(level);
  // From here on no thread but the log's own writes to stderr.
  sluice::log::start_writer();

  sluice::config::Config config;
  try {
    config = sluice::config::load_config_file(config_path);
  } catch (const sluice::config::ConfigError& e) {
    std::cerr << "sluice: invalid config: " << e.what() << "\n";
    return 2;
  }
  if (!listen.empty()) {
    if (!sluice::config::parse_host_port(listen)) usage_error("--listen must be HOST:PORT");
    config.server.listen = listen;
  }
  if (!admin_listen.empty()) {
    if (!sluice::config::parse_host_port(admin_listen))
      usage_error("--admin-listen must be HOST:PORT");
    config.server.admin_listen = admin_listen;
  }
  if (threads > 0) config.server.threads = threads;
  // The command line wins over the file's server: section.
  if (!level_given) sluice::log::parse_level(config.server.log_level, level);
  sluice::log::set_level(level);
  if (!access_log.empty()) config.server.access_log = access_log;
  if (!access_log_format.empty()) config.server.access_log_format = access_log_format;

  // The admin token: --admin-token-file, else SLUICE_ADMIN_TOKEN. Without
  // one, the admin plane may only listen on loopback.
  std::string token;
  if (!token_file.empty()) {
    std::ifstream in(token_file);
    if (!in) {
      std::cerr << "sluice: cannot read --admin-token-file " << token_file << "\n";
      return 2;
    }
    std::getline(in, token);
    while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
    if (token.empty()) {
      std::cerr << "sluice: --admin-token-file " << token_file << " is empty\n";
      return 2;
    }
  } else if (const char* env = std::getenv("SLUICE_ADMIN_TOKEN"); env && *env) {
    token = env;
  }
  {
    auto hp = sluice::config::parse_host_port(config.server.admin_listen);
    if (!hp) usage_error("admin listen address must be HOST:PORT");
    if (token.empty() && !sluice::admin::is_loopback_host(std::string(hp->host))) {
      std::cerr
          << "sluice: refusing to start: the admin plane would listen on "
          << config.server.admin_listen
          << " (not loopback) without a token; give --admin-token-file or SLUICE_ADMIN_TOKEN, or "
             "listen on 127.0.0.1\n";
      return 2;
    }
  }

  // Block the shutdown signals in every thread; the main thread waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  sluice::proxy::Server server(config);
  {
    std::string error;
    if (!server.context().access_log.open(config.server.access_log, config.server.access_log_format,
                                          error)) {
      std::cerr << "sluice: " << error << "\n";
      return 2;
    }
  }
  sluice::admin::AdminServer admin(server, token);
  std::string bound, admin_bound;
  try {
    bound = server.bind(config.server.listen);
    admin_bound = admin.bind(config.server.admin_listen);
  } catch (const sluice::config::ConfigError& e) {
    std::cerr << "sluice: invalid config: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "sluice: cannot start: " << e.what() << "\n";
    return 1;
  }
  server.start();
  admin.start();
  std::printf("listening on %s\nadmin listening on %s\n", bound.c_str(), admin_bound.c_str());
  std::fflush(stdout);
  SLUICE_LOG(kInfo, "server",
             "listening on " << bound << " with " << config.endpoints.size() << " endpoint(s)");

  int sig = 0;
  for (;;) {
    sigwait(&signals, &sig);
    if (sig != SIGHUP) break;
    SLUICE_LOG(kInfo, "reload", "SIGHUP: reloading " << config_path);
    server.reload([](sluice::proxy::ReloadResult r) {
      if (r.ok) SLUICE_LOG(kInfo, "reload", "config reloaded");
      // An invalid file was logged by reload(); the running config stays.
    });
  }
  SLUICE_LOG(kInfo, "server", "received " << (sig == SIGTERM ? "SIGTERM" : "SIGINT"));
  admin.stop();
  server.shutdown();
  sluice::log::stop_writer();
  return 0;
}
