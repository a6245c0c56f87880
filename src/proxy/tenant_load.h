// Requests of each tenant in flight (queued or running), across the I/O
// threads, for tenants[].maxConcurrency. A permit is taken at admission
// and given back when the request ends (RAII). Only tenants with a limit
// are counted; an entry exists only while the tenant has a request in
// flight, so the table never holds more entries than requests in flight.
// Here, not in auth/: it is a lock the I/O threads share, and auth is pure
// (docs/architecture.md, Layer rules).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace sluice::proxy {

class TenantLoad {
 public:
  class Permit {
   public:
    Permit() = default;
    Permit(Permit&& o) noexcept : load_(o.load_), tenant_(std::move(o.tenant_)) {
      o.load_ = nullptr;
    }
    Permit& operator=(Permit&& o) noexcept {
      if (this != &o) {
        reset();
        load_ = o.load_;
        tenant_ = std::move(o.tenant_);
        o.load_ = nullptr;
      }
      return *this;
    }
    Permit(const Permit&) = delete;
    Permit& operator=(const Permit&) = delete;
    ~Permit() { reset(); }
    void reset() {
      if (load_) load_->release(tenant_);
      load_ = nullptr;
    }
    explicit operator bool() const { return load_ != nullptr; }

   private:
    friend class TenantLoad;
    TenantLoad* load_ = nullptr;
    std::string tenant_;
  };

  // A permit if `tenant` has fewer than `limit` requests in flight; an
  // empty one (refused) otherwise. `limit` 0 is never called with.
  Permit try_acquire(std::string_view tenant, std::uint32_t limit) {
    std::lock_guard lock(mu_);
    auto [it, fresh] = in_flight_.try_emplace(std::string(tenant), 0);
    if (it->second >= limit) return {};
    it->second += 1;
    Permit p;
    p.load_ = this;
    p.tenant_ = it->first;
    return p;
  }
  std::uint32_t in_flight(std::string_view tenant) const {
    std::lock_guard lock(mu_);
    auto it = in_flight_.find(std::string(tenant));
    return it == in_flight_.end() ? 0 : it->second;
  }
  std::size_t tenants() const {
    std::lock_guard lock(mu_);
    return in_flight_.size();
  }

 private:
  void release(const std::string& tenant) {
    std::lock_guard lock(mu_);
    auto it = in_flight_.find(tenant);
    if (it == in_flight_.end()) return;
    if (--it->second == 0) in_flight_.erase(it);
  }

  mutable std::mutex mu_;
  std::unordered_map<std::string, std::uint32_t> in_flight_;
};

}  // namespace sluice::proxy
