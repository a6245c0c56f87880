// The models the pool serves: every endpoint's GET /v1/models, polled on
// the data layer's thread and merged by id, so sluice can answer a
// tenant's GET /v1/models with only the models its policy allows (it never
// relays an engine's full list to a tenant restricted to some of them).
// Each endpoint is asked as the proxied requests reach it: over TLS with
// its upstream TLS setting, with its upstream credential. Bounded: 1 MiB an
// answer, kMaxModels models; a failed poll keeps what the endpoint
// answered last time.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "datalayer/upstream_tls.h"

namespace sluice::datalayer {

inline constexpr std::size_t kMaxModels = 1000;

// One model of the catalogue: its id, and its entry as an engine answered it
// (a JSON object's text, kept byte for byte).
struct CatalogModel {
  std::string id;
  std::string entry;
};

// The merged list, sorted by id; immutable once made.
struct ModelCatalog {
  std::vector<CatalogModel> models;
  bool polled = false;  // at least one endpoint has answered
};

// The `data` entries of an OpenAI /v1/models answer (at most kMaxModels;
// entries without a string id are skipped); false if it is not one.
bool parse_models_answer(const std::string& body, std::vector<CatalogModel>& out);

class ModelCatalogPoller {
 public:
  using Publish = std::function<void(std::shared_ptr<const ModelCatalog>)>;
  ModelCatalogPoller(boost::asio::io_context& ioc, std::chrono::nanoseconds interval,
                     Publish publish);
  // The endpoints to ask (addresses "host:port"), on the data layer's thread.
  void set_endpoints(std::vector<std::string> addresses);
  // How they are reached: their TLS settings and credentials (the request
  // policy's; null: plain HTTP, no credential), on the data layer's thread.
  // The next poll uses them.
  void set_upstream(std::shared_ptr<const UpstreamTlsSet> tls,
                    std::shared_ptr<const config::UpstreamCredentials> credentials) {
    tls_ = std::move(tls);
    credentials_ = std::move(credentials);
  }
  void start();
  void stop();

 private:
  void poll();
  void merge_and_publish();

  boost::asio::io_context& ioc_;
  boost::asio::steady_timer timer_;
  std::chrono::nanoseconds interval_;
  Publish publish_;
  std::vector<std::string> addresses_;
  std::shared_ptr<const UpstreamTlsSet> tls_;
  std::shared_ptr<const config::UpstreamCredentials> credentials_;
  std::map<std::string, std::vector<CatalogModel>> answers_;  // by endpoint
  std::size_t pending_ = 0;
  bool stopped_ = false;
  bool polled_ = false;
};

}  // namespace sluice::datalayer
