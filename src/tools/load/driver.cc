#include "tools/load/driver.h"

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <variant>

#include "tools/load/tls_client.h"

namespace sluice::load {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string make_prompt(Rng& rng, std::uint64_t tokens, int prefix, std::uint64_t prefix_tokens) {
  static constexpr const char* kWords[] = {"the",   "gate", "flow", "queue", "token", "model",
                                           "fair",  "band", "load", "time",  "wait",  "serve",
                                           "batch", "prio", "shed", "pool"};
  std::string out;
  out.reserve(tokens * 5);
  std::uint64_t i = 0;
  if (prefix >= 0) {
    // Identical text for every request with this prefix: "p3w0 p3w1 ...".
    for (; i < prefix_tokens && i < tokens; ++i) {
      out += 'p';
      out += std::to_string(prefix);
      out += 'w';
      out += std::to_string(i % 100);
      out += ' ';
    }
  }
  for (; i < tokens; ++i) {
    out += kWords[rng() % 16];
    out += ' ';
  }
  return out;
}

namespace {

// A connection to the target: plain TCP, or TLS over it (https://, its
// handshake done once after the connect).
struct Connection {
  using TlsStream = beast::ssl_stream<beast::tcp_stream>;
  using Stream = std::variant<beast::tcp_stream, TlsStream>;
  Connection(net::io_context& ioc, net::ssl::context* tls) : stream(open(ioc, tls)) {}
  static Stream open(net::io_context& ioc, net::ssl::context* tls) {
    if (tls) return Stream(std::in_place_index<1>, ioc, *tls);
    return Stream(std::in_place_index<0>, ioc);
  }
  beast::tcp_stream& tcp() {
    return std::visit([](auto& s) -> beast::tcp_stream& { return beast::get_lowest_layer(s); },
                      stream);
  }
  Stream stream;
  beast::flat_buffer buffer;
};

class Runner {
 public:
  Runner(const Scenario& s, const DriverOptions& o)
      : s_(s), o_(o), end_timer_(ioc_), progress_timer_(ioc_) {
    flows_.reserve(s.flows.size());
    for (std::size_t i = 0; i < s.flows.size(); ++i)
      flows_.push_back(std::make_unique<FlowState>(ioc_, s.flows[i], i, s.seed));
    result_.active.resize(s.flows.size());
    result_.not_sent.assign(s.flows.size(), 0);
  }

  RunResult run() {
    // A watchdog: the run is bounded by duration + drain; past that plus a
    // margin something is wrong — say what and give up (exit 1).
    const auto bound = s_.duration + s_.drain + std::chrono::seconds(15);
    std::atomic<bool> finished{false};
    std::thread watchdog([this, bound, &finished] {
      const auto deadline = Clock::now() + bound;
      while (!finished.load() && Clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (finished.load()) return;
      std::fprintf(stderr,
                   "sluice-load: the run did not end within duration + drain + 15 s (sent %llu, "
                   "outstanding %llu, "
                   "ending %d); giving up\n",
                   static_cast<unsigned long long>(sent_.load()),
                   static_cast<unsigned long long>(outstanding_.load()),
                   static_cast<int>(ending_.load()));
      std::_Exit(1);
    });
    struct Join {
      std::atomic<bool>& f;
      std::thread& t;
      ~Join() {
        f = true;
        t.join();
      }
    } join{finished, watchdog};
    if (o_.tls) tls_ = make_tls_client_context(o_.ca_file);
    tcp::resolver resolver(ioc_);
    target_ = *resolver.resolve(o_.host, o_.port).begin();
    start_ = Clock::now();
    for (auto& f : flows_) schedule_flow(*f);
    end_timer_.expires_at(start_ + s_.duration);
    end_timer_.async_wait([this](beast::error_code ec) {
      if (!ec) end_arrivals();
    });
    if (o_.progress) tick_progress();
    ioc_.run();
    // Whatever is still open was cut by the drain's end.
    for (auto& r : result_.records)
      if (r.done < 0 && r.status == 0 && r.error.empty())
        r.error = "unfinished at the end of the drain";
    result_.end = std::max(now(), std::chrono::duration<double>(s_.duration).count());
    for (auto& iv : result_.active)
      for (auto& [a, b] : iv) b = std::min(b, std::chrono::duration<double>(s_.duration).count());
    if (o_.progress) std::fprintf(stderr, "\n");
    return std::move(result_);
  }

 private:
  struct FlowState {
    FlowState(net::io_context& ioc, const FlowSpec& spec, std::size_t index, std::uint64_t seed)
        : spec(spec), index(index), rng(seed * 1000003 + index), arrival_timer(ioc) {
      rate = spec.arrival.rate;
      clients = spec.arrival.clients;
    }
    const FlowSpec& spec;
    std::size_t index;
    Rng rng;
    net::steady_timer arrival_timer;
    std::vector<std::unique_ptr<net::steady_timer>> phase_timers;
    bool active = false;
    double rate = 1;
    int clients = 1;
    int running_clients = 0;
    std::uint64_t generation = 0;  // bumps on every (de)activation / rate change
  };

  struct Call;
  double now() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  void schedule_flow(FlowState& f) {
    auto at = [&](Duration d, std::function<void()> fn) {
      auto t = std::make_unique<net::steady_timer>(ioc_);
      t->expires_at(start_ + d);
      t->async_wait([fn = std::move(fn)](beast::error_code ec) {
        if (!ec) fn();
      });
      f.phase_timers.push_back(std::move(t));
    };
    at(f.spec.start, [this, &f] { activate(f); });
    if (f.spec.stop) at(*f.spec.stop, [this, &f] { deactivate(f); });
    for (const auto& ph : f.spec.phases) {
      at(ph.at, [this, &f, ph] {
        if (ph.stop) return deactivate(f);
        if (ph.rate) f.rate = *ph.rate;
        if (ph.clients) f.clients = *ph.clients;
        if (!f.active) return activate(f);
        ++f.generation;
        start_arrivals(f);
      });
    }
  }

  void activate(FlowState& f) {
    if (ending_ || f.active) return;
    f.active = true;
    ++f.generation;
    result_.active[f.index].push_back({now(), std::numeric_limits<double>::infinity()});
    start_arrivals(f);
  }

  void deactivate(FlowState& f) {
    if (!f.active) return;
    f.active = false;
    ++f.generation;
    f.arrival_timer.cancel();
    auto& iv = result_.active[f.index];
    if (!iv.empty()) iv.back().second = now();
  }

  void start_arrivals(FlowState& f) {
    if (f.spec.arrival.kind == Arrival::Kind::kClosed) {
      // launch() gives the client back when it cannot send: count the tries.
      for (int want = f.clients - f.running_clients; want > 0; --want) {
        ++f.running_clients;
        launch(f, true);
      }
      return;
    }
    f.arrival_timer.cancel();
    next_arrival(f, f.generation);
  }

  void next_arrival(FlowState& f, std::uint64_t generation) {
    const double mean_gap = 1.0 / f.rate;
    const double gap = f.spec.arrival.kind == Arrival::Kind::kPoisson
                           ? std::exponential_distribution<double>(f.rate)(f.rng)
                           : mean_gap;
    f.arrival_timer.expires_after(
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(gap)));
    f.arrival_timer.async_wait([this, &f, generation](beast::error_code ec) {
      if (ec || !f.active || generation != f.generation) return;
      launch(f, false);
      next_arrival(f, generation);
    });
  }

  void end_arrivals() {
    if (!ending_) result_.arrivals_end = now();
    ending_ = true;
    for (auto& f : flows_) deactivate(*f);
    progress_timer_.cancel();
    if (outstanding_ == 0) return stop();
    end_timer_.expires_after(s_.drain);
    end_timer_.async_wait([this](beast::error_code ec) {
      if (!ec) stop();
    });
  }

  void stop() {
    end_timer_.cancel();
    progress_timer_.cancel();
    ioc_.stop();
  }

  // One request of flow `f`; a closed-loop client sends the next one when
  // this one is answered.
  void launch(FlowState& f, bool closed_client) {
    if (ending_ || sent_ >= s_.max_requests) {
      if (closed_client) --f.running_clients;
      if (!ending_ && sent_ >= s_.max_requests) end_arrivals();
      return;
    }
    std::unique_ptr<Connection> conn;
    bool reused = false;
    if (!idle_.empty()) {
      conn = std::move(idle_.back());
      idle_.pop_back();
      reused = true;
    } else if (open_ >= s_.max_connections) {
      if (closed_client) {
        // A closed-loop client keeps its place: it tries again shortly
        // instead of leaving the flow one client short.
        auto t = std::make_shared<net::steady_timer>(ioc_, std::chrono::milliseconds(10));
        t->async_wait([this, &f, t](beast::error_code e) {
          if (e || !f.active || ending_) {
            --f.running_clients;
            return;
          }
          launch(f, true);
        });
        return;
      }
      result_.not_sent[f.index] += 1;
      return;
    } else {
      ++open_;
      conn = std::make_unique<Connection>(ioc_, tls_.get());
    }
    ++sent_;
    ++outstanding_;
    const std::size_t rec = result_.records.size();
    result_.records.emplace_back();
    auto& r = result_.records.back();
    r.flow = static_cast<int>(f.index);
    r.sent = now();
    // The request.
    const auto& spec = f.spec;
    const std::uint64_t prompt_tokens = spec.prompt_tokens.sample_count(f.rng);
    const std::uint64_t max_tokens = spec.max_tokens.sample_count(f.rng);
    int prefix = -1;
    if (spec.shared_prefix_share > 0 &&
        std::uniform_real_distribution<double>(0, 1)(f.rng) < spec.shared_prefix_share)
      prefix = static_cast<int>(f.rng() % static_cast<std::uint64_t>(s_.shared_prefix_count));
    const std::string prompt = make_prompt(f.rng, prompt_tokens, prefix, s_.shared_prefix_tokens);
    json body = {{"model", s_.model}, {"max_tokens", max_tokens}};
    if (s_.path == "/v1/chat/completions")
      body["messages"] = json::array({{{"role", "user"}, {"content", prompt}}});
    else
      body["prompt"] = prompt;
    if (spec.stream) {
      body["stream"] = true;
      body["stream_options"] = {{"include_usage", true}};
    }
    r.input_tokens = prompt_tokens;
    auto call = std::make_shared<Call>();
    call->flow = &f;
    call->record = rec;
    call->closed_client = closed_client;
    call->conn = std::move(conn);
    call->reused = reused;
    auto& req = call->req;
    req.method(http::verb::post);
    req.target(s_.path);
    req.version(11);
    req.set(http::field::host, o_.host + ":" + o_.port);
    req.set(http::field::content_type, "application/json");
    req.set(http::field::user_agent, "sluice-load");
    if (!spec.fairness_id.empty()) req.set("x-gateway-inference-fairness-id", spec.fairness_id);
    if (!spec.objective.empty()) req.set("x-gateway-inference-objective", spec.objective);
    for (const auto& [k, v] : spec.headers) req.set(k, v);
    req.body() = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    req.prepare_payload();
    call->conn->tcp().expires_after(s_.timeout);
    if (call->conn->tcp().socket().is_open()) return send(call);
    connect(call);
  }

  void connect(const std::shared_ptr<Call>& call) {
    call->conn->tcp().async_connect(target_, [this, call](beast::error_code ec) {
      if (ec) return finish(call, ec, "connect");
      call->conn->tcp().socket().set_option(tcp::no_delay(true));
      if (tls_) return handshake(call);
      send(call);
    });
  }

  // https: a full handshake on the new connection, the server verified.
  void handshake(const std::shared_ptr<Call>& call) {
    auto& s = std::get<Connection::TlsStream>(call->conn->stream);
    if (!prepare_tls_session(s.native_handle(), o_.host))
      return finish(call, beast::errc::make_error_code(beast::errc::invalid_argument), "TLS name");
    s.async_handshake(net::ssl::stream_base::client, [this, call](beast::error_code ec) {
      if (ec) return finish(call, ec, "TLS handshake");
      send(call);
    });
  }

  struct Call {
    FlowState* flow = nullptr;
    std::size_t record = 0;
    bool closed_client = false;
    std::unique_ptr<Connection> conn;
    http::request<http::string_body> req;
    std::optional<http::response_parser<http::string_body>> parser;
    std::size_t scanned = 0;  // body bytes already scanned for SSE events
    double retry_after = 0;   // the answer's Retry-After, seconds
    bool reused = false;      // from the keep-alive pool
    bool retried = false;     // once, on a fresh connection
  };

  void send(const std::shared_ptr<Call>& call) {
    auto done = [this, call](beast::error_code ec, std::size_t) {
      if (ec) return finish(call, ec, "write");
      call->parser.emplace();
      call->parser->body_limit(std::numeric_limits<std::uint64_t>::max());
      read(call);
    };
    std::visit([&](auto& s) { http::async_write(s, call->req, std::move(done)); },
               call->conn->stream);
  }

  void read(const std::shared_ptr<Call>& call) {
    auto done = [this, call](beast::error_code ec, std::size_t) {
      if (ec) return finish(call, ec, "read");
      on_bytes(*call);
      if (call->parser->is_done()) return finish(call, {}, nullptr);
      read(call);
    };
    std::visit(
        [&](auto& s) {
          http::async_read_some(s, call->conn->buffer, *call->parser, std::move(done));
        },
        call->conn->stream);
  }

  void on_bytes(Call& call) {
    auto& r = result_.records[call.record];
    auto& p = *call.parser;
    if (!p.is_header_done()) return;
    if (r.first_byte < 0) {
      r.first_byte = now();
      const auto& res = p.get();
      r.status = static_cast<int>(res.result_int());
      r.reason = std::string(res["x-gateway-inference-dropped-reason"]);
      r.endpoint = std::string(res["x-gateway-destination-endpoint-served"]);
      const auto ra = res[http::field::retry_after];
      if (!ra.empty()) call.retry_after = std::atof(std::string(ra).c_str());
    }
    if (!call.flow->spec.stream || r.status / 100 != 2) return;
    // SSE events: "data: {...}\n\n"; the ones with text are tokens.
    const std::string& body = p.get().body();
    while (true) {
      const auto end = body.find("\n\n", call.scanned);
      if (end == std::string::npos) break;
      std::string_view event(body.data() + call.scanned, end - call.scanned);
      call.scanned = end + 2;
      if (event.rfind("data: ", 0) != 0) continue;
      event.remove_prefix(6);
      if (event == "[DONE]") continue;
      auto j = json::parse(event, nullptr, false);
      if (j.is_discarded()) continue;
      if (j.contains("usage") && j["usage"].is_object()) read_usage(j["usage"], r);
      if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) continue;
      const auto& c = j["choices"][0];
      std::string text;
      if (c.contains("text") && c["text"].is_string()) text = c["text"];
      if (c.contains("delta") && c["delta"].is_object() && c["delta"].contains("content") &&
          c["delta"]["content"].is_string())
        text = c["delta"]["content"];
      if (text.empty()) continue;
      const double t = now();
      if (r.first_token < 0) r.first_token = t;
      if (r.last_token >= 0) r.token_gaps.push_back(static_cast<float>(t - r.last_token));
      r.last_token = t;
      r.token_events += 1;
    }
  }

  static void read_usage(const json& u, RequestRecord& r) {
    if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_unsigned())
      r.input_tokens = u["prompt_tokens"];
    if (u.contains("completion_tokens") && u["completion_tokens"].is_number_unsigned())
      r.output_tokens = u["completion_tokens"];
  }

  void finish(const std::shared_ptr<Call>& call, beast::error_code ec, const char* stage) {
    auto& r = result_.records[call->record];
    // A pooled connection the server closed while it sat idle fails before
    // any response byte: send again once on a fresh one (as a proxy would).
    if (ec && call->reused && !call->retried && r.first_byte < 0 && ec != beast::error::timeout &&
        !ending_) {
      call->retried = true;
      beast::error_code ignored;
      call->conn->tcp().socket().close(ignored);
      call->conn = std::make_unique<Connection>(ioc_, tls_.get());
      call->conn->tcp().expires_after(s_.timeout);
      call->parser.reset();
      call->scanned = 0;
      return connect(call);
    }
    r.done = now();
    bool keep = false;
    if (ec) {
      if (r.status == 0)
        r.error = std::string(stage) + ": " + ec.message();
      else if (r.status / 100 == 2)
        r.status = 0, r.error = std::string("cut mid-response: ") + ec.message();
    } else {
      const auto& res = call->parser->get();
      keep = call->parser->keep_alive();
      if (r.status / 100 == 2 && !call->flow->spec.stream) {
        auto j = json::parse(res.body(), nullptr, false);
        if (!j.is_discarded() && j.contains("usage") && j["usage"].is_object())
          read_usage(j["usage"], r);
      }
      if (r.status / 100 == 2 && r.output_tokens == 0) r.output_tokens = r.token_events;
    }
    --outstanding_;
    if (keep && !ending_) {
      call->conn->buffer.clear();
      idle_.push_back(std::move(call->conn));
    } else {
      beast::error_code ignored;
      call->conn->tcp().socket().close(ignored);
      --open_;
    }
    FlowState& f = *call->flow;
    if (call->closed_client) {
      if (f.active && !ending_ && f.running_clients <= f.clients) {
        // A client told to come back later (Retry-After on a shed request)
        // does, as a well-behaved client would; at most 10 s.
        Duration pause = f.spec.arrival.think;
        if (r.status / 100 != 2 && call->retry_after > 0)
          pause = std::max(pause,
                           std::chrono::duration_cast<Duration>(
                               std::chrono::duration<double>(std::min(call->retry_after, 10.0))));
        if (pause > Duration::zero()) {
          auto t = std::make_shared<net::steady_timer>(ioc_, pause);
          t->async_wait([this, &f, t](beast::error_code e) {
            if (e || !f.active || ending_) {
              --f.running_clients;
              return;
            }
            launch(f, true);
          });
        } else {
          launch(f, true);
        }
      } else {
        --f.running_clients;
      }
    }
    if (ending_ && outstanding_ == 0) stop();
  }

  void tick_progress() {
    progress_timer_.expires_after(std::chrono::seconds(1));
    progress_timer_.async_wait([this](beast::error_code ec) {
      if (ec) return;
      std::uint64_t ok = 0, other = 0;
      for (const auto& r : result_.records) {
        if (r.done < 0) continue;
        if (r.status / 100 == 2)
          ++ok;
        else
          ++other;
      }
      std::fprintf(stderr, "\r[%5.1fs / %.0fs] sent %llu  ok %llu  not ok %llu  in flight %llu   ",
                   now(), std::chrono::duration<double>(s_.duration).count(),
                   static_cast<unsigned long long>(sent_.load()),
                   static_cast<unsigned long long>(ok), static_cast<unsigned long long>(other),
                   static_cast<unsigned long long>(outstanding_.load()));
      std::fflush(stderr);
      tick_progress();
    });
  }

  const Scenario& s_;
  DriverOptions o_;
  net::io_context ioc_{1};
  std::shared_ptr<net::ssl::context> tls_;  // https; null: plain HTTP
  tcp::endpoint target_;
  Clock::time_point start_;
  net::steady_timer end_timer_;
  net::steady_timer progress_timer_;
  std::vector<std::unique_ptr<FlowState>> flows_;
  std::vector<std::unique_ptr<Connection>> idle_;
  int open_ = 0;
  // Atomics only so the watchdog can read them; written by the run's thread.
  std::atomic<std::uint64_t> sent_{0};
  std::atomic<std::uint64_t> outstanding_{0};
  std::atomic<bool> ending_{false};
  RunResult result_;
};

}  // namespace

RunResult run_scenario(const Scenario& scenario, const DriverOptions& options) {
  Runner runner(scenario, options);
  return runner.run();
}

}  // namespace sluice::load
