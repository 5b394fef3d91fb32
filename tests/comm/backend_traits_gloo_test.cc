// devmesh/tests/comm/backend_traits_gloo_test.cc
// Backend "gloo"'s registration, in a program that links
// @devmesh//comm:gloo: verified by default, and the store route carried by
// every group's options (comm/backend_options.h's fill_process_fields).
#include <string>

#include "comm/auto_group.h"
#include "comm/backend_options.h"
#include "comm/registry.h"
#include "gtest/gtest.h"

namespace devmesh {
namespace {

TEST(BackendTraitsGlooTest, GlooRegistersItsTraits) {
  const BackendTraits gloo = TraitsOf("gloo");
  EXPECT_TRUE(gloo.default_for_device_types.empty());
  EXPECT_TRUE(gloo.verify_calls_by_default);
  EXPECT_FALSE(gloo.checks_calls_in_band);
  EXPECT_FALSE(gloo.shrinks_in_place);
  EXPECT_FALSE(NeedsPreparedThread("gloo"));
  EXPECT_TRUE(CheckGroupBackendLinked("gloo").ok());
  EXPECT_EQ(BackendChoicesText(), "\"gloo\", \"nccl\", \"shm\", or \"ucx\"");
}

TEST(BackendTraitsGlooTest, StoreRouteReachesEveryGroupsOptions) {
  LocalPlace place;
  place.store_route_address = "10.0.0.7";
  CommOptions options;
  FillProcessFields(place, &options);
  EXPECT_EQ(options.gloo.store_route_address, "10.0.0.7");
  // An empty route leaves it empty (the Gloo device then picks its own).
  CommOptions unset;
  FillProcessFields(LocalPlace(), &unset);
  EXPECT_EQ(unset.gloo.store_route_address, "");
}

}  // namespace
}  // namespace devmesh
