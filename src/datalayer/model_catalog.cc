#include "datalayer/model_catalog.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "datalayer/http_fetch.h"

namespace sluice::datalayer {

bool parse_models_answer(const std::string& body, std::vector<CatalogModel>& out) {
  out.clear();
  const auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return false;
  const auto data = j.find("data");
  if (data == j.end() || !data->is_array()) return false;
  for (const auto& m : *data) {
    if (out.size() >= kMaxModels) break;
    if (!m.is_object()) continue;
    const auto id = m.find("id");
    if (id == m.end() || !id->is_string() || id->get_ref<const std::string&>().empty()) continue;
    out.push_back(
        {id->get<std::string>(), m.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)});
  }
  return true;
}

ModelCatalogPoller::ModelCatalogPoller(boost::asio::io_context& ioc,
                                       std::chrono::nanoseconds interval, Publish publish)
    : ioc_(ioc), timer_(ioc), interval_(interval), publish_(std::move(publish)) {}

void ModelCatalogPoller::set_endpoints(std::vector<std::string> addresses) {
  addresses_ = std::move(addresses);
  // An endpoint that left takes its models with it at the next merge.
  for (auto it = answers_.begin(); it != answers_.end();)
    it = std::find(addresses_.begin(), addresses_.end(), it->first) == addresses_.end()
             ? answers_.erase(it)
             : std::next(it);
}

void ModelCatalogPoller::start() { poll(); }

void ModelCatalogPoller::stop() {
  stopped_ = true;
  timer_.cancel();
}

void ModelCatalogPoller::poll() {
  if (stopped_) return;
  if (pending_ == 0) {
    FetchOptions o;
    o.timeout = std::chrono::seconds(2);
    for (const auto& a : addresses_) {
      ++pending_;
      o.authorization = credentials_ ? credentials_->for_address(a) : std::string();
      o.tls = tls_ ? tls_->for_address(a) : nullptr;
      const std::string url = (o.tls ? "https://" : "http://") + a + "/v1/models";
      http_get(ioc_, url, o, [this, a](FetchResult r) {
        std::vector<CatalogModel> models;
        if (r.ok && parse_models_answer(r.body, models)) {
          answers_[a] = std::move(models);
          polled_ = true;
        }
        if (--pending_ == 0 && !stopped_) merge_and_publish();
      });
    }
  }
  timer_.expires_after(interval_);
  timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) poll();
  });
}

void ModelCatalogPoller::merge_and_publish() {
  std::map<std::string, std::string> by_id;
  for (const auto& [_, models] : answers_)
    for (const auto& m : models)
      if (by_id.size() < kMaxModels) by_id.emplace(m.id, m.entry);
  auto c = std::make_shared<ModelCatalog>();
  c->polled = polled_;
  for (auto& [id, entry] : by_id) c->models.push_back({id, std::move(entry)});
  publish_(std::move(c));
}

}  // namespace sluice::datalayer
