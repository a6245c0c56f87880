#include "fleet/redis_connection.h"

#include <hiredis.h>
#include <sys/time.h>

#include <utility>

namespace sluice::fleet {

struct RedisConnection::Context {
  redisContext* c = nullptr;
  ~Context() {
    if (c) redisFree(c);
  }
};

namespace {

timeval to_timeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

RedisReply copy_reply(const redisReply* r, int depth = 0) {
  RedisReply out;
  if (!r) return out;
  switch (r->type) {
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::kInteger;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_STRING:
      out.type = RedisReply::Type::kString;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = RedisReply::Type::kStatus;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = RedisReply::Type::kError;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::kArray;
      // hiredis bounds nesting itself (7 levels); keep the copy bounded too.
      if (depth < 8) {
        out.elements.reserve(r->elements);
        for (size_t i = 0; i < r->elements; ++i)
          out.elements.push_back(copy_reply(r->element[i], depth + 1));
      }
      break;
    default:
      out.type = RedisReply::Type::kNil;
      break;
  }
  return out;
}

std::string context_error(const redisContext* c, const char* what) {
  std::string m = what;
  if (c && c->err) {
    m += ": ";
    m += c->errstr;
  }
  return m;
}

}  // namespace

RedisConnection::RedisConnection(RedisAddress address) : address_(std::move(address)) {}

RedisConnection::~RedisConnection() { disconnect(); }

void RedisConnection::disconnect() {
  delete ctx_;
  ctx_ = nullptr;
}

bool RedisConnection::fail(std::string message) {
  error_ = std::move(message);
  disconnect();
  return false;
}

bool RedisConnection::ensure_connected() {
  if (ctx_) return true;
  const timeval tv = to_timeval(address_.timeout);
  redisContext* c = address_.unix_socket.empty()
                        ? redisConnectWithTimeout(address_.host.c_str(), address_.port, tv)
                        : redisConnectUnixWithTimeout(address_.unix_socket.c_str(), tv);
  if (!c) return fail("redis: out of memory allocating a connection");
  ctx_ = new Context{c};
  const std::string where = address_.unix_socket.empty()
                                ? address_.host + ":" + std::to_string(address_.port)
                                : address_.unix_socket;
  if (c->err) return fail(context_error(c, ("redis " + where + ": cannot connect").c_str()));
  if (redisSetTimeout(c, tv) != REDIS_OK)
    return fail(context_error(c, ("redis " + where + ": cannot set the timeout").c_str()));
  // Both failures name the setting to fix: the operator reads them in a log
  // line or /admin/v1/fleet, far from the Redis that refused.
  if (!address_.password.empty()) {
    std::vector<std::string> auth = {"AUTH"};
    if (!address_.user.empty()) auth.push_back(address_.user);
    auth.push_back(address_.password);
    auto replies = exchange({auth});
    if (!replies) return false;  // error_ set, disconnected
    if ((*replies)[0].is_error())
      return fail("redis " + where + ": AUTH refused: " + (*replies)[0].str +
                  " (check redis.passwordFile, and redis.user for an ACL user)");
  } else {
    // A server that requires a password accepts the connection and refuses
    // each command with NOAUTH, and Redis 7 closes it at the first command
    // of more than 10 arguments (the fleet's first write): the caller would
    // see only "Server closed the connection". One PING per connect says why.
    auto replies = exchange({{"PING"}});
    if (!replies) return false;  // error_ set, disconnected
    const RedisReply& pong = (*replies)[0];
    if (pong.is_error() && pong.str.rfind("NOAUTH", 0) == 0)
      return fail("redis " + where + ": Redis refused: " + pong.str +
                  " (set redis.passwordFile, and redis.user for an ACL user)");
  }
  ++connects_;
  return true;
}

std::optional<std::vector<RedisReply>> RedisConnection::pipeline(
    const std::vector<std::vector<std::string>>& commands) {
  if (!ensure_connected()) return std::nullopt;
  return exchange(commands);
}

std::optional<std::vector<RedisReply>> RedisConnection::exchange(
    const std::vector<std::vector<std::string>>& commands) {
  redisContext* c = ctx_->c;
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& cmd : commands) {
    argv.clear();
    lens.clear();
    for (const auto& a : cmd) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    if (redisAppendCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()) !=
        REDIS_OK) {
      fail(context_error(c, "redis: cannot queue a command"));
      return std::nullopt;
    }
  }
  std::vector<RedisReply> out;
  out.reserve(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(c, &raw) != REDIS_OK || !raw) {
      fail(context_error(c, "redis: no reply"));
      return std::nullopt;
    }
    auto* r = static_cast<redisReply*>(raw);
    out.push_back(copy_reply(r));
    freeReplyObject(r);
  }
  return out;
}

}  // namespace sluice::fleet
