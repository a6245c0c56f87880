// proxy::TenantLoad: tenants[].maxConcurrency, counted across the I/O threads.
#include "proxy/tenant_load.h"

#include <gtest/gtest.h>

#include <utility>

namespace sluice::proxy {
namespace {

TEST(TenantLoad, LimitsAndForgets) {
  TenantLoad load;
  auto a = load.try_acquire("t", 2);
  auto b = load.try_acquire("t", 2);
  EXPECT_TRUE(a);
  EXPECT_TRUE(b);
  EXPECT_FALSE(load.try_acquire("t", 2));
  EXPECT_EQ(load.in_flight("t"), 2u);
  EXPECT_TRUE(load.try_acquire("u", 1));  // another tenant's count is its own
  a.reset();
  auto c = load.try_acquire("t", 2);
  EXPECT_TRUE(c);
  TenantLoad::Permit moved = std::move(c);
  EXPECT_FALSE(c);
  b.reset();
  moved.reset();
  EXPECT_EQ(load.in_flight("t"), 0u);
  EXPECT_EQ(load.tenants(), 0u);  // nothing kept for a tenant with nothing in flight
}

}  // namespace
}  // namespace sluice::proxy
