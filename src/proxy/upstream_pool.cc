#include "proxy/upstream_pool.h"

namespace sluice::proxy {

std::unique_ptr<UpstreamConnection> UpstreamPool::take(std::size_t endpoint) {
  if (endpoint >= idle_.size()) idle_.resize(endpoint + 1);  // added at runtime
  auto& list = idle_[endpoint];
  if (list.empty()) return nullptr;
  auto conn = std::move(list.back());
  list.pop_back();
  return conn;
}

void UpstreamPool::give_back(std::unique_ptr<UpstreamConnection> conn,
                             std::chrono::steady_clock::time_point now) {
  HintedReads::read_done(*conn);  // an idle connection has no read
  if (conn->endpoint >= idle_.size()) idle_.resize(conn->endpoint + 1);
  auto& list = idle_[conn->endpoint];
  if (closed_ || list.size() >= max_idle_ || conn->buffer.size() != 0 ||
      !conn->stream.socket().is_open()) {  // (a timeout closes it too)
    conn->stream.close();
    return;
  }
  conn->idle_since = now;
  list.push_back(std::move(conn));
}

std::size_t UpstreamPool::sweep(std::chrono::steady_clock::time_point now,
                                std::chrono::steady_clock::duration max_idle,
                                const std::function<bool(std::size_t)>& gone) {
  std::size_t closed = 0;
  for (std::size_t e = 0; e < idle_.size(); ++e) {
    auto& list = idle_[e];
    if (list.empty()) continue;
    // Given back in time order: the oldest are first.
    std::size_t keep_from = 0;
    if (gone(e)) {
      keep_from = list.size();
    } else {
      while (keep_from < list.size() && now - list[keep_from]->idle_since >= max_idle) ++keep_from;
    }
    for (std::size_t i = 0; i < keep_from; ++i) list[i]->stream.close();
    list.erase(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(keep_from));
    closed += keep_from;
  }
  return closed;
}

void UpstreamPool::close_all() {
  closed_ = true;
  for (auto& list : idle_) {
    for (auto& c : list) c->stream.close();
    list.clear();
  }
}

}  // namespace sluice::proxy
