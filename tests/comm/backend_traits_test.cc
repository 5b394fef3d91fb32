// devmesh/tests/comm/backend_traits_test.cc
// What a backend registers beside its codec (comm/backend_options.h's
// BackendTraits, fill_process_fields, typed_options) and the questions
// callers ask the registry and comm/auto_group.h instead of comparing
// backend names. This program does not link @devmesh//comm:gloo
// (backend_traits_gloo_test does).
#include <memory>
#include <string>
#include <typeindex>
#include <typeinfo>
#include <vector>

#include "absl/status/status.h"
#include "comm/auto_group.h"
#include "comm/backend_options.h"
#include "comm/registry.h"
#include "gtest/gtest.h"

namespace devmesh {
namespace {

TEST(BackendTraitsTest, BuiltinBackends) {
  const BackendTraits nccl = TraitsOf("nccl");
  EXPECT_EQ(nccl.default_for_device_types, std::vector<std::string>{"cuda"});
  EXPECT_FALSE(nccl.verify_calls_by_default);
  EXPECT_FALSE(nccl.checks_calls_in_band);
  EXPECT_TRUE(nccl.shrinks_in_place);
  const BackendTraits shm = TraitsOf("shm");
  EXPECT_TRUE(shm.default_for_device_types.empty());
  EXPECT_FALSE(shm.verify_calls_by_default);
  EXPECT_TRUE(shm.checks_calls_in_band);
  EXPECT_FALSE(shm.shrinks_in_place);
  const BackendTraits ucx = TraitsOf("ucx");
  EXPECT_TRUE(ucx.default_for_device_types.empty());
  EXPECT_FALSE(ucx.verify_calls_by_default);
  EXPECT_FALSE(ucx.checks_calls_in_band);
  EXPECT_FALSE(ucx.shrinks_in_place);
  EXPECT_TRUE(NeedsPreparedThread("nccl"));
  EXPECT_FALSE(NeedsPreparedThread("shm"));
  EXPECT_FALSE(NeedsPreparedThread("ucx"));
}

TEST(BackendTraitsTest, NamesNotRegisteredHaveNoTraits) {
  for (const char* name : {"auto", "two_level", "gloo", "nope", ""}) {
    const BackendTraits t = TraitsOf(name);
    EXPECT_TRUE(t.default_for_device_types.empty()) << name;
    EXPECT_FALSE(t.verify_calls_by_default) << name;
    EXPECT_FALSE(t.checks_calls_in_band) << name;
    EXPECT_FALSE(t.shrinks_in_place) << name;
    EXPECT_FALSE(NeedsPreparedThread(name)) << name;
  }
}

TEST(BackendTraitsTest, DefaultsPerDeviceType) {
  EXPECT_EQ(RegisteredDefaultBackendFor("cuda"), "nccl");
  EXPECT_EQ(RegisteredDefaultBackendFor("cpu"), "");
  EXPECT_EQ(RegisteredDefaultBackendFor("tpu"), "");
  EXPECT_EQ(DefaultGroupBackendFor("cpu"), "auto");
  EXPECT_EQ(DefaultGroupBackendFor("cuda"), "nccl");
  EXPECT_EQ(DefaultGroupBackendFor("gpu"), "");
  EXPECT_EQ(DefaultGroupBackendFor(""), "");
}

TEST(BackendTraitsTest, TypedOptionsFindTheirBackend) {
  EXPECT_EQ(BackendReadingOptions(std::type_index(typeid(NcclOptions))),
            "nccl");
  EXPECT_EQ(BackendReadingOptions(std::type_index(typeid(GlooOptions))), "");
  EXPECT_EQ(BackendReadingOptions(std::type_index(typeid(void))), "");
}

TEST(BackendTraitsTest, ProcessFieldsWithoutGloo) {
  LocalPlace place;
  place.store_route_address = "10.0.0.7";
  CommOptions options;
  FillProcessFields(place, &options);
  EXPECT_EQ(options.gloo.store_route_address, "");  // no backend reads it
}

TEST(BackendTraitsTest, AutoGroupQuestions) {
  // DEVMESH_CROSS_HOST_BACKEND is unset in tests: the cross-host backend is
  // "ucx".
  EXPECT_EQ(BackendKnownBeforeCreation("auto", true), "ucx");
  EXPECT_EQ(BackendKnownBeforeCreation("auto", false), "auto");
  EXPECT_EQ(BackendKnownBeforeCreation("shm", true), "shm");
  EXPECT_EQ(BackendKnownBeforeCreation("nccl", true), "nccl");
  EXPECT_EQ(CallCheckerBackend(true), "ucx");
  EXPECT_EQ(CallCheckerBackend(false), "auto");
  EXPECT_TRUE(CheckGroupBackendLinked("auto").ok());
  EXPECT_TRUE(CheckGroupBackendLinked("shm").ok());
  EXPECT_TRUE(CheckGroupBackendLinked("nccl").ok());
  EXPECT_EQ(CheckGroupBackendLinked("gloo"), CheckBackendLinked("gloo"));
  EXPECT_EQ(CheckGroupBackendLinked("gloo").code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(BackendChoicesText(),
            "\"nccl\", \"shm\", \"ucx\", or \"gloo\" with "
            "@devmesh//comm:gloo linked");
  EXPECT_EQ(GroupBackendChoicesText(),
            "\"auto\", \"nccl\", \"shm\", \"ucx\", or \"gloo\" with "
            "@devmesh//comm:gloo linked");
}

TEST(BackendTraitsTest, PluginRegistersItsTraits) {
  BackendTraits traits;
  traits.default_for_device_types = {"tpu", "npu"};
  traits.verify_calls_by_default = true;
  BackendOptionsCodec codec;
  codec.fill_process_fields = [](const LocalPlace& place,
                                 CommOptions* options) {
    options->label = "route " + place.store_route_address;
  };
  codec.typed_options = std::type_index(typeid(LocalPlace));
  ASSERT_TRUE(RegisterBackend(
                  "traited",
                  [](std::shared_ptr<Store>, int, int, const CommOptions&)
                      -> absl::StatusOr<std::unique_ptr<Communicator>> {
                    return absl::UnimplementedError("no groups");
                  },
                  codec, traits)
                  .ok());
  EXPECT_EQ(TraitsOf("traited").default_for_device_types,
            (std::vector<std::string>{"tpu", "npu"}));
  EXPECT_TRUE(TraitsOf("traited").verify_calls_by_default);
  EXPECT_EQ(RegisteredDefaultBackendFor("npu"), "traited");
  EXPECT_EQ(DefaultGroupBackendFor("tpu"), "traited");
  EXPECT_EQ(BackendReadingOptions(std::type_index(typeid(LocalPlace))),
            "traited");
  EXPECT_FALSE(NeedsPreparedThread("traited"));
  LocalPlace place;
  place.store_route_address = "10.0.0.7";
  CommOptions options;
  FillProcessFields(place, &options);
  EXPECT_EQ(options.label, "route 10.0.0.7");
  // A group of it across hosts is known verified before it is made.
  EXPECT_TRUE(TraitsOf(BackendKnownBeforeCreation("traited", true))
                  .verify_calls_by_default);
}

}  // namespace
}  // namespace devmesh
