#include "server/upstream_pool.h"

namespace sluice::server {

std::unique_ptr<UpstreamConnection> UpstreamPool::take(std::size_t endpoint) {
  if (endpoint >= idle_.size()) idle_.resize(endpoint + 1);  // added at runtime
  auto& list = idle_[endpoint];
  if (list.empty()) return nullptr;
  auto conn = std::move(list.back());
  list.pop_back();
  return conn;
}

void UpstreamPool::give_back(std::unique_ptr<UpstreamConnection> conn) {
  if (conn->endpoint >= idle_.size()) idle_.resize(conn->endpoint + 1);
  auto& list = idle_[conn->endpoint];
  if (list.size() >= max_idle_ || conn->buffer.size() != 0) {
    boost::beast::error_code ec;
    conn->stream.socket().close(ec);
    return;
  }
  list.push_back(std::move(conn));
}

void UpstreamPool::close_all() {
  for (auto& list : idle_) {
    for (auto& c : list) {
      boost::beast::error_code ec;
      c->stream.socket().close(ec);
    }
    list.clear();
  }
}

}  // namespace sluice::server
