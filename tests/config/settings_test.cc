// devmesh/tests/config/settings_test.cc
// The DEVMESH_* parser: every variable's form, unknown names, the canonical
// text of the settings that must agree, and the process's settings read once
// and replaced from code.
#include "config/settings.h"

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace devmesh {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

TEST(SettingsTest, EmptyEnvironmentLeavesEveryFieldUnset) {
  auto s = ParseSettings(Env{{"PATH", "/bin"}, {"HOME", "/root"}});
  ASSERT_TRUE(s.ok()) << s.status();
  for (const auto& [name, value] : AgreedSettingsText(*s)) {
    EXPECT_EQ(value, "unset") << name;
  }
  EXPECT_FALSE(s->shm_spin.has_value());
  EXPECT_FALSE(s->rendezvous_progress_s.has_value());
}

TEST(SettingsTest, EveryVariableParsesIntoItsField) {
  auto s = ParseSettings(Env{
      {"DEVMESH_SHM_SPIN", "64"},
      {"DEVMESH_SHM_YIELD_US", "0"},
      {"DEVMESH_SHM_SINGLE_COPY", "0"},
      {"DEVMESH_SHM_SLOT_BYTES", "64K"},
      {"DEVMESH_SHM_ONESHOT_MAX", "8192"},
      {"DEVMESH_SHM_SINGLE_COPY_MIN", "1M"},
      {"DEVMESH_GLOO_LAZY_MESH", "1"},
      {"DEVMESH_GLOO_LOOP_BATCH", "0"},
      {"DEVMESH_GLOO_SYNC_MAX_BYTES", "2G"},
      {"DEVMESH_GLOO_SYNC_ROUTE", "1"},
      {"DEVMESH_CROSS_HOST_BACKEND", "ucx"},
      {"DEVMESH_TWO_LEVEL", "0"},
      {"DEVMESH_FAILURE_WATCH", "0"},
      {"DEVMESH_LEASE_PERIOD_MS", "100"},
      {"DEVMESH_LEASE_SILENCE_MS", "900"},
      {"DEVMESH_RENDEZVOUS_PROGRESS_S", "0"},
      // Known, read elsewhere.
      {"DEVMESH_STORE_ADDR", "h:1"},
      {"DEVMESH_REQUIRE_TORCH", "1"},
      {"DEVMESH_SPARE", "1"},  // a restarted rank (device_mesh/spare_runtime.h)
  });
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->shm_spin, 64);
  EXPECT_EQ(s->shm_yield_us, 0);
  EXPECT_EQ(s->shm_single_copy, false);
  EXPECT_EQ(s->shm_slot_bytes, size_t{65536});
  EXPECT_EQ(s->shm_oneshot_max_bytes, size_t{8192});
  EXPECT_EQ(s->shm_single_copy_min_bytes, size_t{1} << 20);
  EXPECT_EQ(s->gloo_lazy_mesh, true);
  EXPECT_EQ(s->gloo_loop_batch, false);
  EXPECT_EQ(s->gloo_sync_max_bytes, size_t{2} << 30);
  EXPECT_EQ(s->gloo_sync_route, GlooSyncRoute::kEveryGroup);
  EXPECT_EQ(s->cross_host_backend, CrossHostBackend::kUcx);
  EXPECT_EQ(s->two_level, false);
  EXPECT_EQ(s->failure_watch, false);
  EXPECT_EQ(s->lease_period_ms, 100);
  EXPECT_EQ(s->lease_silence_ms, 900);
  EXPECT_EQ(s->rendezvous_progress_s, 0);
  EXPECT_EQ(AgreedSettingsText(*s),
            (Env{{"DEVMESH_SHM_SINGLE_COPY", "0"},
                 {"DEVMESH_SHM_SLOT_BYTES", "65536"},
                 {"DEVMESH_SHM_ONESHOT_MAX", "8192"},
                 {"DEVMESH_SHM_SINGLE_COPY_MIN", "1048576"},
                 {"DEVMESH_GLOO_LAZY_MESH", "1"},
                 {"DEVMESH_GLOO_SYNC_MAX_BYTES", "2147483648"},
                 {"DEVMESH_GLOO_SYNC_ROUTE", "1"},
                 {"DEVMESH_CROSS_HOST_BACKEND", "ucx"},
                 {"DEVMESH_TWO_LEVEL", "0"},
                 {"DEVMESH_FAILURE_WATCH", "0"},
                 {"DEVMESH_LEASE_PERIOD_MS", "100"},
                 {"DEVMESH_LEASE_SILENCE_MS", "900"}}));
}

TEST(SettingsTest, SwitchesTakeTheCommonWords) {
  for (const char* on : {"1", "true", "on", "yes"}) {
    auto s = ParseSettings(Env{{"DEVMESH_GLOO_LAZY_MESH", on}});
    ASSERT_TRUE(s.ok()) << on << ": " << s.status();
    EXPECT_EQ(s->gloo_lazy_mesh, true) << on;
  }
  for (const char* off : {"0", "false", "off", "no"}) {
    auto s = ParseSettings(Env{{"DEVMESH_GLOO_LAZY_MESH", off}});
    ASSERT_TRUE(s.ok()) << off << ": " << s.status();
    EXPECT_EQ(s->gloo_lazy_mesh, false) << off;
  }
}

TEST(SettingsTest, AutoIsTheRouteAcrossHosts) {
  auto s = ParseSettings(Env{{"DEVMESH_GLOO_SYNC_ROUTE", "auto"}});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->gloo_sync_route, GlooSyncRoute::kAcrossHosts);
  EXPECT_EQ(AgreedSettingsText(*s)[6],
            (Env::value_type{"DEVMESH_GLOO_SYNC_ROUTE", "auto"}));
}

TEST(SettingsTest, MalformedValuesAreInvalidArgumentNamingTheVariable) {
  const std::vector<std::pair<Env::value_type, std::string>> cases = {
      {{"DEVMESH_SHM_SLOT_BYTES", "64x"},
       "malformed setting DEVMESH_SHM_SLOT_BYTES='64x': want a positive byte "
       "count (digits, optionally followed by K, M or G)"},
      {{"DEVMESH_SHM_SLOT_BYTES", "0"},
       "malformed setting DEVMESH_SHM_SLOT_BYTES='0': want a positive byte "
       "count (digits, optionally followed by K, M or G)"},
      {{"DEVMESH_SHM_ONESHOT_MAX", ""},
       "malformed setting DEVMESH_SHM_ONESHOT_MAX='': want a byte count "
       "(digits, optionally followed by K, M or G)"},
      {{"DEVMESH_SHM_ONESHOT_MAX", "99999999999G"},
       "malformed setting DEVMESH_SHM_ONESHOT_MAX='99999999999G': want a "
       "byte count (digits, optionally followed by K, M or G)"},
      {{"DEVMESH_SHM_SPIN", "-1"},
       "malformed setting DEVMESH_SHM_SPIN='-1': want a count (decimal "
       "digits)"},
      {{"DEVMESH_SHM_SPIN", " 4"},
       "malformed setting DEVMESH_SHM_SPIN=' 4': want a count (decimal "
       "digits)"},
      {{"DEVMESH_LEASE_PERIOD_MS", "0"},
       "malformed setting DEVMESH_LEASE_PERIOD_MS='0': want a positive count "
       "(decimal digits)"},
      {{"DEVMESH_FAILURE_WATCH", "Off"},
       "malformed setting DEVMESH_FAILURE_WATCH='Off': want 0 or 1 (or "
       "false/true, off/on, no/yes)"},
      {{"DEVMESH_GLOO_SYNC_ROUTE", "2"},
       "malformed setting DEVMESH_GLOO_SYNC_ROUTE='2': want 0 (never), 1 "
       "(every power-of-two group) or auto (groups that cross hosts)"},
      {{"DEVMESH_CROSS_HOST_BACKEND", "mpi"},
       "malformed setting DEVMESH_CROSS_HOST_BACKEND='mpi': want gloo or "
       "ucx"},
  };
  for (const auto& [entry, want] : cases) {
    auto s = ParseSettings(Env{{"DEVMESH_SHM_SPIN", "1"}, entry});
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument)
        << entry.first << "=" << entry.second;
    EXPECT_EQ(s.status().message(), want);
  }
}

TEST(SettingsTest, UnknownNameIsInvalidArgumentListingTheKnownOnes) {
  auto s = ParseSettings(Env{{"DEVMESH_SHM_SLOTBYTES", "65536"}});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(
      s.status().message(),
      "unknown setting DEVMESH_SHM_SLOTBYTES='65536': devmesh reads no such "
      "variable (a typo? its settings are DEVMESH_SHM_SPIN, "))
      << s.status();
  EXPECT_TRUE(absl::EndsWith(s.status().message(),
                             "DEVMESH_RENDEZVOUS_PROGRESS_S; see "
                             "config/settings.h)"))
      << s.status();
  // Other prefixes are not devmesh's.
  EXPECT_TRUE(ParseSettings(Env{{"DEVMESHX", "1"}, {"NCCL_DEBUG", "x"}}).ok());
}

TEST(SettingsTest, ProcessSettingsAreReadOnceThenReplacedOnlyOnRequest) {
  ASSERT_EQ(setenv("DEVMESH_SHM_SPIN", "7", 1), 0);
  ASSERT_TRUE(ReloadProcessSettings().ok());
  const Settings& first = ProcessSettings();
  EXPECT_EQ(first.shm_spin, 7);
  // A later setenv changes nothing until the environment is read again.
  ASSERT_EQ(setenv("DEVMESH_SHM_SPIN", "9", 1), 0);
  EXPECT_EQ(ProcessSettings().shm_spin, 7);
  EXPECT_TRUE(ProcessSettingsStatus().ok());
  // A malformed value: the status says so and the settings are the
  // defaults; the earlier reference stays valid and unchanged.
  ASSERT_EQ(setenv("DEVMESH_SHM_SPIN", "nine", 1), 0);
  EXPECT_FALSE(ReloadProcessSettings().ok());
  EXPECT_EQ(ProcessSettingsStatus().message(),
            "malformed setting DEVMESH_SHM_SPIN='nine': want a count "
            "(decimal digits)");
  EXPECT_FALSE(ProcessSettings().shm_spin.has_value());
  EXPECT_EQ(first.shm_spin, 7);
  // From code: replaces them and clears the error.
  Settings mine;
  mine.shm_spin = 3;
  SetProcessSettings(mine);
  EXPECT_TRUE(ProcessSettingsStatus().ok());
  EXPECT_EQ(ProcessSettings().shm_spin, 3);
  unsetenv("DEVMESH_SHM_SPIN");
}

}  // namespace
}  // namespace devmesh
