#include "tools/mock/mock_server.h"

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <memory>
#include <nlohmann/json.hpp>

#include "protocol/openai_request.h"
#include "protocol/routes.h"

namespace sluice::mock {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using nlohmann::json;

namespace {

constexpr std::int64_t kCreated = 1700000000;  // fixed: output is deterministic

std::string chunk(const std::string& payload) {
  char head[24];
  int n = std::snprintf(head, sizeof head, "%zx\r\n", payload.size());
  std::string out(head, static_cast<std::size_t>(n));
  out += payload;
  out += "\r\n";
  return out;
}

class MockSession : public std::enable_shared_from_this<MockSession> {
 public:
  MockSession(tcp::socket socket, MockServer& server)
      : stream_(std::move(socket)), server_(server) {}

  void start() { read_request(); }

 private:
  void read_request() {
    if (closed_) return;
    parser_.emplace();
    parser_->body_limit(64u << 20);
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_request(ec); });
  }

  void on_request(beast::error_code ec) {
    if (ec) return close();
    busy_ = true;
    complete_ = false;
    auto& req = parser_->get();
    keep_alive_ = req.keep_alive();
    request_id_ = std::string(req["x-request-id"]);
    // What a P/D decode sidecar would read: echoed so tests can see it.
    prefiller_ = std::string(req["x-prefiller-host-port"]);
    control_headers_seen_ = 0;
    priority_ = 0;
    for (const auto& f : req) {
      auto name = f.name_string();
      if (beast::iequals(name.substr(0, 19), "x-gateway-inference") ||
          beast::iequals(name, "x-slo-ttft-ms"))
        ++control_headers_seen_;
    }
    handle(req);
    // Watch the socket while the response is produced: EOF means the client
    // left, and generation for it must stop.
    watch();
  }

  void handle(http::request<http::string_body>& req) {
    auto target = std::string_view(req.target().data(), req.target().size());
    auto route = protocol::classify_target(target);
    if (target == "/health" && req.method() == http::verb::get)
      return simple(200, "application/json", "{}");
    if (target == "/metrics" && req.method() == http::verb::get)
      return simple(200, "text/plain; version=0.0.4", server_.metrics_text());
    if (route == protocol::Route::kModels && req.method() == http::verb::get) {
      json j = {{"object", "list"},
                {"data", json::array({{{"id", server_.options().model},
                                       {"object", "model"},
                                       {"created", kCreated},
                                       {"owned_by", "sluice-mock"}}})}};
      return simple(200, "application/json",
                    j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    }
    if ((route == protocol::Route::kCompletions || route == protocol::Route::kChatCompletions) &&
        req.method() == http::verb::post) {
      return generate(req, route == protocol::Route::kChatCompletions);
    }
    return simple(
        404, "application/json",
        R"({"error":{"message":"not found","type":"invalid_request_error","code":null}})");
  }

  void generate(http::request<http::string_body>& req, bool chat) {
    std::string prompt;
    auto parsed = protocol::parse_openai_request(req.body(), &prompt);
    if (!parsed.ok()) {
      json j = {
          {"error",
           {{"message", parsed.error_message}, {"type", "invalid_request_error"}, {"code", 400}}}};
      return simple(400, "application/json",
                    j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    }
    const auto& r = parsed.request;
    // vLLM: an integer "priority", and only under priority scheduling.
    if (r.has_priority && !r.priority)
      return simple(
          400, "application/json",
          R"({"error":{"message":"'priority' must be an integer","type":"invalid_request_error","code":400}})");
    if (r.priority.value_or(0) != 0 && !server_.engine().options().priority_scheduling) {
      json j = {{"error",
                 {{"message", "Got priority " + std::to_string(*r.priority) +
                                  " but Priority scheduling is not enabled."},
                  {"type", "invalid_request_error"},
                  {"code", 400}}}};
      return simple(400, "application/json", j.dump());
    }
    priority_ = r.priority.value_or(0);
    server_.requests_total += 1;
    std::uint32_t max_tokens = static_cast<std::uint32_t>(r.max_tokens.value_or(16));
    if (auto o = req["x-mock-output-tokens"]; !o.empty()) {
      max_tokens = static_cast<std::uint32_t>(std::strtoul(std::string(o).c_str(), nullptr, 10));
    }
    chat_ = chat;
    stream_mode_ = r.stream;
    include_usage_ = r.include_usage;
    model_ = r.model;
    text_.clear();
    response_id_ = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(server_.next_response_id++);
    seq_ = server_.engine().make_sequence(
        r.model, prompt, static_cast<std::uint32_t>(r.estimated_input_tokens), max_tokens);
    seq_->priority = priority_;
    std::weak_ptr<MockSession> weak = shared_from_this();
    seq_->on_token = [weak](Sequence& s, std::string_view token, bool last) {
      if (auto self = weak.lock()) self->on_token(s, token, last);
    };
    if (stream_mode_) {
      std::string common =
          "data: {\"id\":\"" + response_id_ + "\",\"object\":\"" +
          (chat ? "chat.completion.chunk" : "text_completion") +
          "\",\"created\":" + std::to_string(kCreated) + ",\"model\":" +
          json(model_).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
          ",\"choices\":[{\"index\":0,";
      if (chat) {
        prefix_ = common + "\"delta\":{\"content\":";
        first_prefix_ = common + "\"delta\":{\"role\":\"assistant\",\"content\":";
        suffix_ = "},\"logprobs\":null,\"finish_reason\":null}]}\n\n";
        suffix_length_ = "},\"logprobs\":null,\"finish_reason\":\"length\"}]}\n\n";
      } else {
        prefix_ = first_prefix_ = common + "\"text\":";
        suffix_ = ",\"logprobs\":null,\"finish_reason\":null}]}\n\n";
        suffix_length_ = ",\"logprobs\":null,\"finish_reason\":\"length\"}]}\n\n";
      }
      std::string head =
          "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
          "Transfer-Encoding: chunked\r\n";
      head += extra_headers();
      head += keep_alive_ ? "\r\n" : "Connection: close\r\n\r\n";
      send(std::move(head));
    }
    server_.engine().submit(seq_);
    server_.kick();
  }

  std::string extra_headers() const {
    std::string h;
    if (!request_id_.empty()) h += "x-request-id: " + request_id_ + "\r\n";
    h += "x-mock-control-headers-seen: " + std::to_string(control_headers_seen_) + "\r\n";
    h += "x-mock-priority: " + std::to_string(priority_) + "\r\n";
    if (!prefiller_.empty()) h += "x-mock-prefiller-host-port: " + prefiller_ + "\r\n";
    return h;
  }

  json usage(const Sequence& s) const {
    return {{"prompt_tokens", s.prompt_tokens},
            {"completion_tokens", s.generated},
            {"total_tokens", s.prompt_tokens + s.generated},
            {"prompt_tokens_details", {{"cached_tokens", s.cached_tokens}}}};
  }

  void on_token(Sequence& s, std::string_view token, bool last) {
    if (closed_) return;
    const char* finish = last ? "length" : nullptr;
    if (!stream_mode_) {
      text_.append(token);
      if (!last) return;
      json j;
      if (chat_) {
        j = {{"id", response_id_},
             {"object", "chat.completion"},
             {"created", kCreated},
             {"model", model_},
             {"choices", json::array({{{"index", 0},
                                       {"message", {{"role", "assistant"}, {"content", text_}}},
                                       {"finish_reason", "length"}}})},
             {"usage", usage(s)}};
      } else {
        j = {{"id", response_id_},
             {"object", "text_completion"},
             {"created", kCreated},
             {"model", model_},
             {"choices", json::array({{{"index", 0},
                                       {"text", text_},
                                       {"logprobs", nullptr},
                                       {"finish_reason", "length"}}})},
             {"usage", usage(s)}};
      }
      seq_.reset();
      complete_ = true;
      return simple(200, "application/json",
                    j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    }
    if (!token.empty() || last) {
      // Per-token events are the hot path of a streaming mock: the parts
      // around the token were built once per request (see generate()).
      std::string event = s.generated <= 1 ? first_prefix_ : prefix_;
      event +=
          json(std::string(token)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      event += finish ? suffix_length_ : suffix_;
      send(chunk(event));
    }
    if (last) {
      if (include_usage_) {
        json j = {{"id", response_id_},
                  {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
                  {"created", kCreated},
                  {"model", model_},
                  {"choices", json::array()},
                  {"usage", usage(s)}};
        send(chunk("data: " + j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                   "\n\n"));
      }
      send(chunk("data: [DONE]\n\n") + "0\r\n\r\n");
      seq_.reset();
      complete_ = true;
      maybe_finish();
    }
  }

  void simple(int status, const char* content_type, const std::string& body) {
    std::string out = "HTTP/1.1 " + std::to_string(status) + (status == 200 ? " OK" : " Error") +
                      "\r\nContent-Type: " + content_type +
                      "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" +
                      extra_headers();
    out += keep_alive_ ? "\r\n" : "Connection: close\r\n\r\n";
    out += body;
    complete_ = true;
    send(std::move(out));
  }

  void send(std::string data) {
    out_.push_back(std::move(data));
    write_next();
  }

  void write_next() {
    if (writing_ || closed_) return;
    if (out_.empty()) return maybe_finish();
    // Everything queued while the last write was in flight goes out in one
    // write (a fast decode loop produces many small chunks per write).
    if (out_.size() > 1) {
      std::string joined;
      std::size_t total = 0;
      for (const auto& piece : out_) total += piece.size();
      joined.reserve(total);
      for (auto& piece : out_) joined += piece;
      out_.clear();
      out_.push_back(std::move(joined));
    }
    writing_ = true;
    net::async_write(stream_, net::buffer(out_.front()),
                     [self = shared_from_this()](beast::error_code ec, std::size_t) {
                       self->writing_ = false;
                       self->out_.pop_front();
                       if (ec) return self->close();
                       self->write_next();
                     });
  }

  void maybe_finish() {
    if (!busy_ || !complete_ || writing_ || !out_.empty()) return;
    busy_ = false;
    if (!keep_alive_) return close();
    if (!watching_) read_request();  // else the watch read brings the next request
  }

  void watch() {
    watching_ = true;
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              self->watching_ = false;
                              if (ec) return self->close();
                              self->buffer_.commit(n);
                              if (!self->busy_) self->read_request();
                            });
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    if (seq_) {
      // The client left before the answer's end (an eviction, a client
      // gone): generation stops here.
      server_.engine().cancel(*seq_);
      server_.requests_cancelled_total += 1;
    }
    seq_.reset();
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  MockServer& server_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::deque<std::string> out_;
  bool writing_ = false, watching_ = false, busy_ = false, complete_ = false, closed_ = false;
  bool keep_alive_ = true, chat_ = false, stream_mode_ = false, include_usage_ = false;
  int control_headers_seen_ = 0;
  std::int64_t priority_ = 0;  // the request's "priority" as the engine took it
  std::string request_id_, prefiller_, model_, text_, response_id_;
  std::string prefix_, first_prefix_, suffix_, suffix_length_;
  std::shared_ptr<Sequence> seq_;
};

}  // namespace

MockServer::MockServer(net::io_context& ioc, ServerOptions options, EngineOptions engine)
    : ioc_(ioc), acceptor_(ioc), timer_(ioc), options_(std::move(options)), engine_(engine) {}

std::string MockServer::listen(const std::string& host, std::uint16_t port) {
  tcp::endpoint ep(net::ip::make_address(host), port);
  acceptor_.open(ep.protocol());
  acceptor_.set_option(net::socket_base::reuse_address(true));
  acceptor_.bind(ep);
  acceptor_.listen(net::socket_base::max_listen_connections);
  accept();
  auto bound = acceptor_.local_endpoint();
  return bound.address().to_string() + ":" + std::to_string(bound.port());
}

void MockServer::stop() {
  beast::error_code ec;
  acceptor_.close(ec);
  timer_.cancel();
}

void MockServer::accept() {
  acceptor_.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (ec) {
      if (acceptor_.is_open()) accept();
      return;
    }
    ++connections_total;
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    std::make_shared<MockSession>(std::move(socket), *this)->start();
    accept();
  });
}

void MockServer::kick() {
  if (!stepping_) step();
}

void MockServer::step() {
  auto duration = engine_.begin_step();
  if (!duration) {
    stepping_ = false;
    return;
  }
  stepping_ = true;
  if (duration->count() == 0) {
    // A zero-length step needs no timer (and no trip through epoll).
    net::post(ioc_, [this] {
      engine_.end_step();
      step();
    });
    return;
  }
  timer_.expires_after(*duration);
  timer_.async_wait([this](beast::error_code ec) {
    if (ec) {
      stepping_ = false;
      return;
    }
    engine_.end_step();
    step();
  });
}

std::string MockServer::metrics_text() const {
  std::string out;
  const std::string label = "{model_name=\"" + options_.model + "\"}";
  auto gauge = [&](const char* name, const char* help, const std::string& labels, double value) {
    out += "# HELP ";
    out += name;
    out += " ";
    out += help;
    out += "\n# TYPE ";
    out += name;
    out += " gauge\n";
    out += name;
    out += labels;
    char buf[64];
    std::snprintf(buf, sizeof buf, " %.6g\n", value);
    out += buf;
  };
  const auto& eo = engine_.options();
  if (options_.engine == "sglang") {
    gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", label,
          static_cast<double>(engine_.waiting()));
    gauge("sglang:num_running_reqs", "The number of running requests.", label,
          static_cast<double>(engine_.running()));
    gauge("sglang:token_usage", "The token usage.", label, engine_.kv_usage());
  } else {
    gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", label,
          static_cast<double>(engine_.waiting()));
    gauge("vllm:num_requests_running", "Number of requests in model execution batches.", label,
          static_cast<double>(engine_.running()));
    gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", label,
          engine_.kv_usage());
    gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig.",
          "{block_size=\"" + std::to_string(kBlockTokens) + "\",num_gpu_blocks=\"" +
              std::to_string(engine_.kv_capacity_blocks()) + "\",enable_prefix_caching=\"" +
              (eo.prefix_cache ? "True" : "False") + "\"}",
          1.0);
  }
  auto counter = [&](const char* name, const char* help, double value) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " %.17g\n", value);
    out +=
        std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n" + name + buf;
  };
  counter("mock_requests_total", "Generation requests received.",
          static_cast<double>(requests_total));
  counter("mock_requests_cancelled_total",
          "Generation requests whose client closed the connection before their answer ended.",
          static_cast<double>(requests_cancelled_total));
  counter("mock_connections_accepted_total", "TCP connections accepted.",
          static_cast<double>(connections_total));
  counter("mock_prefix_cache_hit_tokens_total", "Prompt tokens served from the prefix cache.",
          static_cast<double>(engine_.prefix_hits_tokens()));
  counter("mock_preemptions_total", "Running sequences preempted for KV cache (vLLM's).",
          static_cast<double>(engine_.preemptions()));
  return out;
}

}  // namespace sluice::mock
