// sluice-mock: an OpenAI-compatible model-server simulator (see mock_engine.h).
#include <boost/asio/signal_set.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "config/units.h"
#include "tools/mock/mock_server.h"

namespace {

constexpr const char* kUsage =
    "usage: sluice-mock --listen HOST:PORT [--engine vllm|sglang] [--max-running N]\n"
    "                   [--prefill-us-per-token X] [--decode-ms-per-token Y]\n"
    "                   [--kv-capacity-tokens N] [--prefix-cache on|off] [--seed S]\n"
    "                   [--model NAME] [--scheduling-policy fcfs|priority]\n";

[[noreturn]] void usage_error(const std::string& what) {
  std::cerr << "sluice-mock: " << what << "\n" << kUsage;
  std::exit(2);
}

double parse_number(const std::string& flag, const std::string& v, double min) {
  char* end = nullptr;
  double d = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !(d >= min)) usage_error(flag + ": invalid value '" + v + "'");
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  sluice::mock::ServerOptions so;
  sluice::mock::EngineOptions eo;
  std::string listen;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--listen")
      listen = value();
    else if (arg == "--engine") {
      so.engine = value();
      if (so.engine != "vllm" && so.engine != "sglang")
        usage_error("--engine must be vllm or sglang");
    } else if (arg == "--max-running")
      eo.max_running = static_cast<std::size_t>(parse_number(arg, value(), 1));
    else if (arg == "--prefill-us-per-token")
      eo.prefill_us_per_token = parse_number(arg, value(), 0);
    else if (arg == "--decode-ms-per-token")
      eo.decode_ms_per_token = parse_number(arg, value(), 0);
    else if (arg == "--kv-capacity-tokens")
      eo.kv_capacity_tokens = static_cast<std::uint64_t>(parse_number(arg, value(), 1));
    else if (arg == "--prefix-cache") {
      auto v = value();
      if (v != "on" && v != "off") usage_error("--prefix-cache must be on or off");
      eo.prefix_cache = v == "on";
    } else if (arg == "--seed")
      eo.seed = static_cast<std::uint64_t>(parse_number(arg, value(), 0));
    else if (arg == "--model")
      so.model = value();
    else if (arg == "--scheduling-policy") {
      auto v = value();
      if (v != "fcfs" && v != "priority")
        usage_error("--scheduling-policy must be fcfs or priority");
      eo.priority_scheduling = v == "priority";
    } else if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    } else
      usage_error("unknown argument '" + arg + "'");
  }
  if (listen.empty()) usage_error("--listen is required");
  auto hp = sluice::config::parse_host_port(listen);
  if (!hp) usage_error("--listen must be HOST:PORT");

  boost::asio::io_context ioc(1);
  sluice::mock::MockServer server(ioc, so, eo);
  std::string bound;
  try {
    bound = server.listen(std::string(hp->host), hp->port);
  } catch (const std::exception& e) {
    std::cerr << "sluice-mock: cannot listen on " << listen << ": " << e.what() << "\n";
    return 1;
  }
  std::printf("listening on %s\n", bound.c_str());
  std::fflush(stdout);
  boost::asio::signal_set signals(ioc, SIGTERM, SIGINT);
  signals.async_wait([&](boost::system::error_code, int) {
    server.stop();
    ioc.stop();
  });
  ::signal(SIGPIPE, SIG_IGN);
  ioc.run();
  return 0;
}
