// devmesh/tests/comm/registry_static_init_test.cc
// The registry asked from a static initializer (this file's, which a static
// link runs before those of the libraries it links): every backend linked
// into the program is already known (comm/backend_registration.h), and so
// are the UCX settings devmesh puts in the environment before main.
#include <cstdlib>
#include <string>
#include <vector>

#include "comm/registry.h"
#include "gtest/gtest.h"

namespace devmesh {
namespace {

const std::vector<std::string>* const kKnownAtStaticInit =
    new std::vector<std::string>(KnownBackends());

TEST(RegistryStaticInitTest, EveryLinkedBackendIsKnownBeforeMain) {
  EXPECT_EQ(*kKnownAtStaticInit,
            (std::vector<std::string>{"gloo", "nccl", "shm", "ucx"}));
  EXPECT_EQ(KnownBackends(), *kKnownAtStaticInit);
}

TEST(RegistryStaticInitTest, UcxSettingsAreInTheEnvironmentAtMain) {
  // Set by //comm's static initializer where the test's environment leaves
  // them unset (bazel passes no UCX_* variable to tests).
  const char* tx = std::getenv("UCX_TCP_TX_SEG_SIZE");
  const char* retries = std::getenv("UCX_TCP_MAX_CONN_RETRIES");
  ASSERT_NE(tx, nullptr);
  ASSERT_NE(retries, nullptr);
  EXPECT_EQ(std::string(tx), "256K");
  EXPECT_EQ(std::string(retries), "254");
}

}  // namespace
}  // namespace devmesh
