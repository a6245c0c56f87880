#include "datalayer/dns_watcher.h"

#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <resolv.h>

#include <algorithm>
#include <cstring>
#include <set>

namespace sluice::datalayer {

namespace {

// A resolver state of our own (never the global _res): its servers, one
// try each, the timeout in whole seconds (the resolver's unit, at least 1).
bool init_state(res_state st, const DnsOptions& o, std::string& error) {
  std::memset(st, 0, sizeof *st);
  if (res_ninit(st) != 0) {
    error = "cannot initialize the resolver";
    return false;
  }
  st->retrans = static_cast<int>(std::max<long long>(1, (o.timeout.count() + 999) / 1000));
  st->retry = 1;
  if (!o.servers.empty()) {
    int n = 0;
    for (const auto& s : o.servers) {
      if (n >= MAXNS) break;
      const auto colon = s.rfind(':');
      if (colon == std::string::npos) continue;
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(static_cast<std::uint16_t>(std::atoi(s.c_str() + colon + 1)));
      if (inet_pton(AF_INET, s.substr(0, colon).c_str(), &a.sin_addr) != 1) continue;
      st->nsaddr_list[n++] = a;
    }
    st->nscount = n;
  }
  return true;
}

// The addresses of one record type; false: the query failed (not NXDOMAIN
// or no data, which are an answer with none).
bool query(res_state st, const DnsName& name, int type, std::set<std::string>& out,
           std::string& error) {
  unsigned char buf[8192];
  // nsearch: a short name gets the search domains of resolv.conf (a pod's
  // namespace), as the system resolver would.
  const int n = res_nsearch(st, name.name.c_str(), ns_c_in, type, buf, sizeof buf);
  if (n < 0) {
    if (st->res_h_errno == HOST_NOT_FOUND || st->res_h_errno == NO_DATA) return true;
    error = st->res_h_errno == TRY_AGAIN
                ? "no answer (timed out or SERVFAIL)"
                : "lookup failed (" + std::to_string(st->res_h_errno) + ")";
    return false;
  }
  ns_msg msg;
  if (ns_initparse(buf, n, &msg) != 0) {
    error = "malformed answer";
    return false;
  }
  const int count = ns_msg_count(msg, ns_s_an);
  for (int i = 0; i < count; ++i) {
    ns_rr rr;
    if (ns_parserr(&msg, ns_s_an, i, &rr) != 0) break;
    char text[INET6_ADDRSTRLEN] = {};
    if (ns_rr_type(rr) == ns_t_a && ns_rr_rdlen(rr) == 4) {
      inet_ntop(AF_INET, ns_rr_rdata(rr), text, sizeof text);
      out.insert(std::string(text) + ":" + std::to_string(name.port));
    } else if (ns_rr_type(rr) == ns_t_aaaa && ns_rr_rdlen(rr) == 16) {
      inet_ntop(AF_INET6, ns_rr_rdata(rr), text, sizeof text);
      out.insert("[" + std::string(text) + "]:" + std::to_string(name.port));
    }
  }
  return true;
}

}  // namespace

DnsResult resolve_dns(const DnsName& name, const DnsOptions& options) {
  DnsResult r;
  struct __res_state st;
  if (!init_state(&st, options, r.error)) return r;
  std::set<std::string> found;
  const bool a = query(&st, name, ns_t_a, found, r.error);
  const bool aaaa = a && query(&st, name, ns_t_aaaa, found, r.error);
  res_nclose(&st);
  if (!a || !aaaa) return r;
  r.ok = true;
  r.addresses.assign(found.begin(), found.end());
  if (r.addresses.size() > options.max_addresses) r.addresses.resize(options.max_addresses);
  return r;
}

DnsWatcher::DnsWatcher(std::vector<DnsName> names, DnsOptions options, OnChange on_change,
                       OnError on_error)
    : names_(std::move(names)),
      options_(std::move(options)),
      on_change_(std::move(on_change)),
      on_error_(std::move(on_error)),
      current_(names_.size()),
      failing_(names_.size(), false) {}

DnsWatcher::~DnsWatcher() { stop(); }

void DnsWatcher::start() {
  if (!thread_.joinable())
    thread_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "sluice-dns");
      run();
    });
}

void DnsWatcher::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void DnsWatcher::run() {
  while (true) {
    bool changed = first_;
    first_ = false;
    for (std::size_t i = 0; i < names_.size(); ++i) {
      DnsResult r = resolve_dns(names_[i], options_);
      if (!r.ok) {
        // Said once per outage of this name; its addresses stay.
        if (!failing_[i] && on_error_)
          on_error_("cannot resolve " + names_[i].name + " (" + r.error +
                    "); keeping its last addresses");
        failing_[i] = true;
        continue;
      }
      failing_[i] = false;
      if (r.addresses != current_[i]) {
        current_[i] = std::move(r.addresses);
        changed = true;
      }
    }
    if (changed) on_change_(current_);
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, options_.interval, [this] { return stopping_; })) return;
  }
}

}  // namespace sluice::datalayer
