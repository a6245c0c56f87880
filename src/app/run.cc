#include "app/run.h"

#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>

#include "admin/admin_server.h"
#include "app/gateway.h"
#include "config/config.h"
#include "config/units.h"
#include "observe/log.h"

namespace sluice::app {
namespace {

constexpr const char* kUsage =
    "usage: sluice --config FILE [--listen HOST:PORT] [--admin-listen HOST:PORT]\n"
    "              [--threads N] [--admin-token-file FILE] [--log-level debug|info|warn|error]\n"
    "              [--access-log FILE|-] [--access-log-format json|text]\n";

[[noreturn]] void usage_error(const std::string& what) {
  std::cerr << "sluice: " << what << "\n" << kUsage;
  std::exit(2);
}

struct Options {
  std::string config_path, listen, admin_listen, token_file, access_log, access_log_format;
  int threads = -1;
  log::Level level = log::Level::kInfo;
  bool level_given = false;
};

// Returns nullopt after --help (printed).
std::optional<Options> parse_command_line(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(std::string(arg) + " needs a value");
      return argv[++i];
    };
    if (arg == "--config")
      o.config_path = value();
    else if (arg == "--listen")
      o.listen = value();
    else if (arg == "--admin-listen")
      o.admin_listen = value();
    else if (arg == "--admin-token-file")
      o.token_file = value();
    else if (arg == "--access-log")
      o.access_log = value();
    else if (arg == "--access-log-format") {
      o.access_log_format = value();
      if (o.access_log_format != "json" && o.access_log_format != "text")
        usage_error("--access-log-format must be json or text");
    } else if (arg == "--threads") {
      auto v = value();
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 1 || n > 256) usage_error("--threads must be 1..256");
      o.threads = static_cast<int>(n);
    } else if (arg == "--log-level") {
      if (!log::parse_level(value(), o.level)) usage_error("unknown --log-level");
      o.level_given = true;
    } else if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return std::nullopt;
    } else {
      usage_error("unknown argument '" + std::string(arg) + "'");
    }
  }
  if (o.config_path.empty()) usage_error("--config is required");
  return o;
}

// The command line wins over the file's server: section.
void apply_command_line(const Options& o, config::Config& config) {
  if (!o.listen.empty()) {
    if (!config::parse_host_port(o.listen)) usage_error("--listen must be HOST:PORT");
    config.server.listen = o.listen;
  }
  if (!o.admin_listen.empty()) {
    if (!config::parse_host_port(o.admin_listen)) usage_error("--admin-listen must be HOST:PORT");
    config.server.admin_listen = o.admin_listen;
  }
  if (o.threads > 0) config.server.threads = o.threads;
  log::Level level = o.level;
  if (!o.level_given) log::parse_level(config.server.log_level, level);
  log::set_level(level);
  if (!o.access_log.empty()) config.server.access_log = o.access_log;
  if (!o.access_log_format.empty()) config.server.access_log_format = o.access_log_format;
}

// The admin token: --admin-token-file, else SLUICE_ADMIN_TOKEN; empty
// without one. False (with the reason printed) when the file is unusable.
bool read_admin_token(const Options& o, std::string& token) {
  if (!o.token_file.empty()) {
    std::ifstream in(o.token_file);
    if (!in) {
      std::cerr << "sluice: cannot read --admin-token-file " << o.token_file << "\n";
      return false;
    }
    std::getline(in, token);
    while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
    if (token.empty()) {
      std::cerr << "sluice: --admin-token-file " << o.token_file << " is empty\n";
      return false;
    }
  } else if (const char* env = std::getenv("SLUICE_ADMIN_TOKEN"); env && *env) {
    token = env;
  }
  return true;
}

// Without a token, the admin plane may only listen on loopback.
bool admin_exposure_allowed(const config::Config& config, const std::string& token) {
  auto hp = config::parse_host_port(config.server.admin_listen);
  if (!hp) usage_error("admin listen address must be HOST:PORT");
  if (token.empty() && !admin::is_loopback_host(std::string(hp->host))) {
    std::cerr << "sluice: refusing to start: the admin plane would listen on "
              << config.server.admin_listen
              << " (not loopback) without a token; give --admin-token-file or "
                 "SLUICE_ADMIN_TOKEN, or listen on 127.0.0.1\n";
    return false;
  }
  return true;
}

// Starts the gateway, reloads on SIGHUP, shuts down on SIGTERM or SIGINT
// (`signals`, blocked in every thread, are waited for here).
int serve(const config::Config& config, const std::string& token, const std::string& config_path,
          sigset_t signals) {
  // Building the data plane's context reads files the config names (the
  // upstream TLS files): one that does not load is a config error, as the
  // config's own.
  std::unique_ptr<Gateway> built;
  try {
    built = std::make_unique<Gateway>(config, token);
  } catch (const config::ConfigError& e) {
    std::cerr << "sluice: invalid config: " << e.what() << "\n";
    return 2;
  }
  Gateway& gateway = *built;
  {
    std::string error;
    if (!gateway.open_access_log(error)) {
      std::cerr << "sluice: " << error << "\n";
      return 2;
    }
  }
  Gateway::Bound bound;
  try {
    bound = gateway.bind(config.server.listen, config.server.admin_listen);
  } catch (const config::ConfigError& e) {
    std::cerr << "sluice: invalid config: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "sluice: cannot start: " << e.what() << "\n";
    return 1;
  }
  gateway.start();
  // One write: whoever reads the addresses gets them together.
  std::string lines;
  if (!bound.data.empty()) lines += "listening on " + bound.data + "\n";
  if (!bound.tls.empty()) lines += "tls listening on " + bound.tls + "\n";
  lines += "admin listening on " + bound.admin + "\n";
  std::fputs(lines.c_str(), stdout);
  std::fflush(stdout);
  SLUICE_LOG(kInfo, "server",
             "listening on " << (bound.data.empty() ? "" : bound.data + " ")
                             << (bound.tls.empty() ? "" : "tls " + bound.tls + " ") << "with "
                             << config.endpoints.size() << " endpoint(s)");
  int sig = 0;
  for (;;) {
    sigwait(&signals, &sig);
    if (sig != SIGHUP) break;
    SLUICE_LOG(kInfo, "reload", "SIGHUP: reloading " << config_path);
    gateway.reload([](admin::ReloadResult r) {
      if (r.ok) SLUICE_LOG(kInfo, "reload", "config reloaded");
      // An invalid file was logged by reload(); the running config stays.
    });
  }
  SLUICE_LOG(kInfo, "server", "received " << (sig == SIGTERM ? "SIGTERM" : "SIGINT"));
  gateway.shutdown();
  return 0;
}

}  // namespace

int run(int argc, char** argv) {
  const auto options = parse_command_line(argc, argv);
  if (!options) return 0;
  log::set_level(options->level);
  // From here on no thread but the log's own writes to stderr.
  log::start_writer();

  config::Config config;
  try {
    config = config::load_config_file(options->config_path);
  } catch (const config::ConfigError& e) {
    std::cerr << "sluice: invalid config: " << e.what() << "\n";
    return 2;
  }
  apply_command_line(*options, config);
  std::string token;
  if (!read_admin_token(*options, token)) return 2;
  if (!admin_exposure_allowed(config, token)) return 2;

  // Block the shutdown signals in every thread; the main thread waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  const int code = serve(config, token, options->config_path, signals);
  log::stop_writer();
  return code;
}

}  // namespace sluice::app
