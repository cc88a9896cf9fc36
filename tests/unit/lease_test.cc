// The lease table (policy/lease.h): opaque ids, a lease taken once, ended
// leases dropped, and at most `capacity` held.
#include "policy/lease.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace sluice::policy {
namespace {

using namespace std::chrono_literals;
using Outcome = LeaseTable::Outcome;

constexpr Nanos kT0 = std::chrono::seconds(1'700'000'000);

Lease lease_of(std::string key, Nanos charged_at, Nanos lease = 1h) {
  return Lease{"exports", "policy:exports|" + key, 1, charged_at, 42, charged_at + lease};
}

TEST(LeaseTable, AnIdIsOpaqueAndItsLeaseIsTakenOnce) {
  LeaseTable table(10, "secret");
  const std::string id = table.issue(lease_of("user-7", kT0), kT0);
  EXPECT_EQ(id.size(), 64u);
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
  EXPECT_NE(table.issue(lease_of("user-7", kT0), kT0), id);  // random: two leases, two ids
  EXPECT_EQ(table.size(), 2u);

  const LeaseTable::Taken taken = table.take(id, kT0 + 1s);
  ASSERT_EQ(taken.outcome, Outcome::kTaken);
  EXPECT_EQ(taken.lease.store_key, "policy:exports|user-7");
  EXPECT_EQ(taken.lease.charged_at, kT0);
  EXPECT_EQ(taken.lease.fingerprint, 42u);
  EXPECT_EQ(table.take(id, kT0 + 1s).outcome, Outcome::kNotHeld);
  EXPECT_EQ(table.size(), 1u);
}

TEST(LeaseTable, IdsNotIssuedHereAreUnknown) {
  LeaseTable table(10, "secret");
  const std::string id = table.issue(lease_of("u", kT0), kT0);
  std::string altered = id;
  altered[3] = altered[3] == '0' ? '1' : '0';
  EXPECT_EQ(table.take(altered, kT0).outcome, Outcome::kUnknown);
  EXPECT_EQ(table.take(id.substr(0, 62), kT0).outcome, Outcome::kUnknown);
  EXPECT_EQ(table.take(std::string(64, 'Z'), kT0).outcome, Outcome::kUnknown);
  EXPECT_EQ(table.take("", kT0).outcome, Outcome::kUnknown);
  // Another process (another secret) issued it.
  LeaseTable other(10, "another secret");
  EXPECT_EQ(other.take(id, kT0).outcome, Outcome::kUnknown);
  EXPECT_EQ(table.take(id, kT0).outcome, Outcome::kTaken);
}

TEST(LeaseTable, AnEndedLeaseIsNotHeldAndIsDroppedByTheNextIssue) {
  LeaseTable table(10, "secret");
  const std::string a = table.issue(lease_of("a", kT0, 10s), kT0);
  const std::string b = table.issue(lease_of("b", kT0, 10s), kT0);
  // Its slot has left the store by itself: nothing to give back.
  EXPECT_EQ(table.take(a, kT0 + 10s).outcome, Outcome::kNotHeld);
  EXPECT_EQ(table.size(), 1u);
  table.issue(lease_of("c", kT0 + 10s), kT0 + 10s);
  EXPECT_EQ(table.size(), 1u);  // b ended: dropped
  EXPECT_EQ(table.take(b, kT0 + 5s).outcome, Outcome::kNotHeld);
}

TEST(LeaseTable, AtCapacityTheLeaseThatEndsFirstIsDropped) {
  LeaseTable table(3, "secret");
  const std::string long1 = table.issue(lease_of("a", kT0, 1h), kT0);
  const std::string soon = table.issue(lease_of("b", kT0, 1min), kT0);
  const std::string long2 = table.issue(lease_of("c", kT0, 2h), kT0);
  const std::string newest = table.issue(lease_of("d", kT0, 30min), kT0);
  EXPECT_EQ(table.size(), 3u);
  EXPECT_EQ(table.take(soon, kT0).outcome, Outcome::kNotHeld);
  EXPECT_EQ(table.take(long1, kT0).outcome, Outcome::kTaken);
  EXPECT_EQ(table.take(long2, kT0).outcome, Outcome::kTaken);
  EXPECT_EQ(table.take(newest, kT0).outcome, Outcome::kTaken);
  EXPECT_EQ(table.size(), 0u);
}

}  // namespace
}  // namespace sluice::policy
