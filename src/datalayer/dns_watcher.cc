#include "datalayer/dns_watcher.h"

#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <resolv.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <memory>
#include <new>
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
  // EDNS0: UDP answers up to glibc's 1200 bytes (about 70 A records)
  // instead of 512. A larger one comes back truncated (TC) and glibc asks
  // again over TCP, which RES_IGNTC would turn off.
  st->options |= RES_USE_EDNS0;
  st->options &= ~static_cast<decltype(st->options)>(RES_IGNTC);
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

// The largest DNS message: a TCP answer's length is 16 bits. Hundreds of
// records (a big headless Service) outgrow any smaller buffer.
constexpr std::size_t kMaxMessage = NS_MAXMSG;

std::uint16_t get16(const unsigned char* p) { return static_cast<std::uint16_t>(p[0] << 8 | p[1]); }

// The addresses of one record type; false: the query failed (not NXDOMAIN
// or no data, which are an answer with none). `buf` holds kMaxMessage bytes.
bool query(res_state st, const DnsName& name, int type, unsigned char* buf,
           std::set<std::string>& out, std::string& error) {
  // nsearch: a short name gets the search domains of resolv.conf (a pod's
  // namespace), as the system resolver would.
  const int n = res_nsearch(st, name.name.c_str(), ns_c_in, type, buf, kMaxMessage);
  if (n < 0) {
    if (st->res_h_errno == HOST_NOT_FOUND || st->res_h_errno == NO_DATA) return true;
    error = st->res_h_errno == TRY_AGAIN
                ? "no answer (timed out or SERVFAIL)"
                : "lookup failed (" + std::to_string(st->res_h_errno) + ")";
    return false;
  }
  // glibc returns the answer's full length when it had to cut it to fit the
  // buffer (TC set): only what is in the buffer is read.
  const std::size_t len = std::min<std::size_t>(static_cast<std::size_t>(n), kMaxMessage);
  if (!parse_dns_answer(buf, len, type, name.port, out)) {
    error = "malformed answer";
    return false;
  }
  return true;
}

// The first `max` of a type's addresses: enough for the first `max` of
// the union, and a bound on what a watcher keeps per type.
std::vector<std::string> first_addresses(const std::set<std::string>& found, std::size_t max) {
  std::vector<std::string> out;
  out.reserve(std::min(found.size(), max));
  for (auto it = found.begin(); it != found.end() && out.size() < max; ++it) out.push_back(*it);
  return out;
}

// Both sorted lists as one, sorted, the first `max`.
std::vector<std::string> union_of(const std::vector<std::string>& a,
                                  const std::vector<std::string>& b, std::size_t max) {
  std::vector<std::string> out;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  if (out.size() > max) out.resize(max);
  return out;
}

}  // namespace

bool parse_dns_answer(const unsigned char* msg, std::size_t len, int type, std::uint16_t port,
                      std::set<std::string>& out) {
  if (len < NS_HFIXEDSZ) return false;
  const unsigned char* const eom = msg + len;
  const unsigned char* p = msg + NS_HFIXEDSZ;
  for (unsigned q = get16(msg + 4); q > 0; --q) {
    const int skip = dn_skipname(p, eom);
    if (skip < 0 || eom - (p + skip) < NS_QFIXEDSZ) return false;
    p += skip + NS_QFIXEDSZ;
  }
  // A record that does not fit ends the section: those before it arrived whole.
  for (unsigned an = get16(msg + 6); an > 0; --an) {
    const int skip = dn_skipname(p, eom);
    if (skip < 0 || eom - (p + skip) < NS_RRFIXEDSZ) break;
    p += skip;
    const int rr_type = get16(p), rr_class = get16(p + 2), rdlen = get16(p + 8);
    p += NS_RRFIXEDSZ;
    if (eom - p < rdlen) break;
    // Only the type asked for (a CNAME chain's names are not addresses).
    char text[INET6_ADDRSTRLEN] = {};
    if (rr_class == ns_c_in && rr_type == type && type == ns_t_a && rdlen == 4) {
      inet_ntop(AF_INET, p, text, sizeof text);
      out.insert(std::string(text) + ":" + std::to_string(port));
    } else if (rr_class == ns_c_in && rr_type == type && type == ns_t_aaaa && rdlen == 16) {
      inet_ntop(AF_INET6, p, text, sizeof text);
      out.insert("[" + std::string(text) + "]:" + std::to_string(port));
    }
    p += rdlen;
  }
  return true;
}

DnsResult resolve_dns(const DnsName& name, const DnsOptions& options) {
  DnsResult r;
  struct __res_state st;
  if (!init_state(&st, options, r.error)) {
    r.a.error = r.aaaa.error = r.error;
    return r;
  }
  // On the heap: 64 KiB is too much for a stack (the watcher's thread's
  // included), and the allocation is one per lookup of a name. Zeroed:
  // after a timeout glibc's search reads the rcode of whatever the buffer
  // holds to decide whether to try the next search domain.
  std::unique_ptr<unsigned char[]> buf(new (std::nothrow) unsigned char[kMaxMessage]());
  if (!buf) {
    r.error = r.a.error = r.aaaa.error = "out of memory";
    res_nclose(&st);
    return r;
  }
  // Both types always: one that fails must not cost the other its answer.
  std::set<std::string> a, aaaa;
  r.a.ok = query(&st, name, ns_t_a, buf.get(), a, r.a.error);
  r.aaaa.ok = query(&st, name, ns_t_aaaa, buf.get(), aaaa, r.aaaa.error);
  res_nclose(&st);
  r.a.addresses = first_addresses(a, options.max_addresses);
  r.aaaa.addresses = first_addresses(aaaa, options.max_addresses);
  r.ok = r.a.ok || r.aaaa.ok;
  r.addresses = union_of(r.a.addresses, r.aaaa.addresses, options.max_addresses);
  if (!r.a.ok) r.error = "A: " + r.a.error;
  if (!r.aaaa.ok) r.error += (r.error.empty() ? "AAAA: " : "; AAAA: ") + r.aaaa.error;
  return r;
}

DnsWatcher::DnsWatcher(std::vector<DnsName> names, DnsOptions options, OnChange on_change,
                       OnError on_error)
    : names_(std::move(names)),
      options_(std::move(options)),
      on_change_(std::move(on_change)),
      on_error_(std::move(on_error)),
      kept_(names_.size()),
      current_(names_.size()) {}

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
      const DnsResult r = resolve_dns(names_[i], options_);
      Kept& k = kept_[i];
      // A type that answered replaces its last addresses; one that did not
      // keeps them, said once per outage of that type.
      std::string newly_failing, types;
      const auto keep = [&](const DnsAnswer& answer, const char* type,
                            std::vector<std::string>& last, bool& failing) {
        if (answer.ok) {
          last = answer.addresses;
          failing = false;
          return;
        }
        if (!failing) {
          newly_failing +=
              (newly_failing.empty() ? "" : "; ") + std::string(type) + ": " + answer.error;
          types += (types.empty() ? "" : " and ") + std::string(type);
        }
        failing = true;
      };
      keep(r.a, "A", k.a, k.a_failing);
      keep(r.aaaa, "AAAA", k.aaaa, k.aaaa_failing);
      if (!newly_failing.empty() && on_error_)
        on_error_("cannot resolve " + names_[i].name + " (" + newly_failing +
                  "); keeping its last " + types + " addresses");
      auto addresses = union_of(k.a, k.aaaa, options_.max_addresses);
      if (addresses != current_[i]) {
        current_[i] = std::move(addresses);
        changed = true;
      }
    }
    if (changed) on_change_(current_);
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, options_.interval, [this] { return stopping_; })) return;
  }
}

}  // namespace sluice::datalayer
