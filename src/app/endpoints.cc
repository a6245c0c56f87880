// The endpoint pool at runtime: the config's endpoints, the endpoints
// file's and DNS discovery's, reconciled on the data-layer thread and
// published to the dispatcher.
#include <boost/asio/post.hpp>
#include <map>
#include <set>

#include "app/gateway.h"
#include "config/units.h"
#include "observe/log.h"
#include "scheduling/plugins/topology.h"

namespace sluice::app {

namespace net = boost::asio;

void Gateway::apply_endpoints_file(const std::vector<config::EndpointConfig>& file) {
  file_endpoints_ = file;
  reconcile_endpoints();
}

void Gateway::reconcile_endpoints() {
  // Wanted: the config's endpoints, then the file's (first one wins).
  auto wanted = [this] {
    std::vector<const config::EndpointConfig*> out;
    std::set<std::string> addresses;
    for (const auto* list : {&static_endpoints_, &file_endpoints_, &dns_endpoints_})
      for (const auto& c : *list)
        if (addresses.insert(c.address).second) out.push_back(&c);
    return out;
  };
  auto in_pool = [this](const std::string& address) {
    const int slot = ctx_.endpoints.find(address);
    return slot >= 0 && !ctx_.endpoints.at(static_cast<std::size_t>(slot)).removed.load();
  };
  std::vector<config::EndpointConfig> missing;
  for (const auto* c : wanted())
    if (!in_pool(c->address)) missing.push_back(*c);
  // Host names are looked up off this thread, so the scrapes go on; the pool
  // changes once all lookups are done (no IP literal waits: then at once),
  // against what is wanted by then: a change that came in meanwhile is not
  // undone by this one (its own lookups add what it added).
  datalayer::resolve_endpoints(
      scraper_->context(), std::move(missing), datalayer::kResolveTimeout,
      [this, wanted, in_pool](std::vector<datalayer::Resolution> resolved) {
        // Once shutting down, the scraper may have stopped its targets: one
        // added now would keep its thread from ending.
        if (ctx_.shutting_down.load()) return;
        std::map<std::string, const datalayer::Resolution*> by_address;
        for (const auto& r : resolved) by_address[r.config.address] = &r;
        std::set<std::string> addresses;
        for (const auto* c : wanted()) {
          addresses.insert(c->address);
          const auto it = by_address.find(c->address);
          if (it == by_address.end() || in_pool(c->address)) continue;
          const auto& r = *it->second;
          if (!r.endpoint) {
            // Not added; the next change of the file or config tries again.
            SLUICE_LOG(kWarn, "endpoints",
                       "cannot resolve " << c->address << " (" << r.error << "); not added");
            continue;
          }
          const int slot = ctx_.endpoints.add(*c, *r.endpoint);
          if (slot < 0) {
            SLUICE_LOG(kWarn, "endpoints", "pool full; " << c->address << " not added");
            continue;
          }
          scraper_->add(static_cast<std::size_t>(slot),
                        scrape_target(static_cast<std::size_t>(slot)));
          SLUICE_LOG(kInfo, "endpoints", "added " << c->address << " (slot " << slot << ")");
        }
        for (std::size_t i = 0; i < ctx_.endpoints.size(); ++i) {
          auto& ep = ctx_.endpoints.at(i);
          if (ep.removed.load() || addresses.count(ep.config.address)) continue;
          ctx_.endpoints.remove(i);
          scraper_->remove(i);
          SLUICE_LOG(kInfo, "endpoints",
                     "removed " << ep.config.address << "; requests in flight on it finish");
        }
        publish_endpoints();
      });
}

void Gateway::publish_endpoints() {
  std::vector<flowcontrol::EndpointIdentity> ids;
  std::vector<std::string> serving;
  for (std::size_t i = 0; i < ctx_.endpoints.size(); ++i) {
    const auto& ep = ctx_.endpoints.at(i);
    ids.push_back({ep.config.address, ep.config.engine,
                   scheduling::Labels(ep.config.labels.begin(), ep.config.labels.end()),
                   ep.removed.load()});
    if (!ep.removed.load()) serving.push_back(ep.config.address);
  }
  if (catalog_) catalog_->set_endpoints(std::move(serving));
  // A topology-affinity plugin over a pool without topology labels does
  // nothing: say so, each time the pool changes and it still holds.
  std::vector<const scheduling::Labels*> labels;
  for (const auto& id : ids)
    if (!id.removed) labels.push_back(&id.labels);
  if (auto w = scheduling::topology_warning(ctx_.config, labels); !w.empty())
    SLUICE_LOG(kWarn, "scheduling", w);
  ctx_.flow_control->reconfigure(
      *data_producer_,
      [ids = std::move(ids)](flowcontrol::Controller& c) { c.set_endpoints(ids); });
}

void Gateway::start_dns() {
  if (ctx_.config.dns_endpoints.empty()) return;
  // DNS discovery: lookups on the watcher's thread; the pool changes on
  // the data layer's, like an endpoints-file change.
  std::vector<datalayer::DnsName> names;
  for (const auto& e : ctx_.config.dns_endpoints) names.push_back({e.host, e.port});
  datalayer::DnsOptions o;
  o.interval = std::chrono::duration_cast<std::chrono::milliseconds>(
      ctx_.config.server.dns_refresh_interval);
  o.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(ctx_.config.server.dns_timeout);
  o.servers = ctx_.config.server.dns_servers;
  dns_ = std::make_unique<datalayer::DnsWatcher>(
      std::move(names), o,
      [this](const std::vector<std::vector<std::string>>& found) {
        std::vector<config::EndpointConfig> eps;
        for (std::size_t i = 0; i < found.size(); ++i)
          for (const auto& address : found[i]) {
            config::EndpointConfig e = ctx_.config.dns_endpoints[i];
            const auto hp = config::parse_host_port(address);
            if (!hp) continue;
            e.address = address;
            e.host = std::string(hp->host);
            e.port = hp->port;
            eps.push_back(std::move(e));
          }
        net::post(scraper_->context(), [this, eps = std::move(eps)]() mutable {
          dns_endpoints_ = std::move(eps);
          reconcile_endpoints();
        });
      },
      [](const std::string& message) { SLUICE_LOG(kWarn, "endpoints", message); });
  dns_->start();
}

}  // namespace sluice::app
