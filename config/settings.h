// devmesh/config/settings.h
// -----------------------------------------------------------------------------
// devmesh's DEVMESH_* environment variables, read by one parser into one
// typed struct.
//
// Every tuning knob the library has is a field of Settings, unset unless the
// environment (or code, SetProcessSettings) gives it; each layer applies its
// own default to an unset field (the defaults are documented where they act).
// The process's settings are parsed from the environment once, at the first
// ProcessSettings() call. A DEVMESH_* variable that is not in the table below,
// or a value that does not parse, is an error (ProcessSettingsStatus()):
// InitDeviceMesh and CreateCommunicator (so every group's creation) return
// it, as InvalidArgument naming the variable, and a malformed value is never
// replaced by a default silently.
//
//   variable                       field                     form     agree
//   DEVMESH_SHM_SPIN               shm_spin                  count    no
//   DEVMESH_SHM_YIELD_US           shm_yield_us              count    no
//   DEVMESH_SHM_SINGLE_COPY        shm_single_copy           0|1      yes
//   DEVMESH_SHM_SLOT_BYTES         shm_slot_bytes            bytes>0  yes
//   DEVMESH_SHM_ONESHOT_MAX        shm_oneshot_max_bytes     bytes    yes
//   DEVMESH_SHM_SINGLE_COPY_MIN    shm_single_copy_min_bytes bytes    yes
//   DEVMESH_GLOO_LAZY_MESH         gloo_lazy_mesh            0|1      yes
//   DEVMESH_GLOO_LOOP_BATCH        gloo_loop_batch           0|1      no
//   DEVMESH_GLOO_SYNC_MAX_BYTES    gloo_sync_max_bytes       bytes    yes
//   DEVMESH_GLOO_SYNC_ROUTE        gloo_sync_route           0|1|auto yes
//   DEVMESH_CROSS_HOST_BACKEND     cross_host_backend        gloo|ucx yes
//   DEVMESH_TWO_LEVEL              two_level                 0|1      yes
//   DEVMESH_FAILURE_WATCH          failure_watch             0|1      yes
//   DEVMESH_LEASE_PERIOD_MS        lease_period_ms           count>0  yes
//   DEVMESH_LEASE_SILENCE_MS       lease_silence_ms          count>0  yes
//   DEVMESH_RENDEZVOUS_PROGRESS_S  rendezvous_progress_s     count    no
//
// count: decimal digits. bytes: decimal digits, optionally followed by K, M
// or G (KiB, MiB, GiB). 0|1: off or on (also false|true, off|on, no|yes).
// gloo_sync_route: 0 never, 1 every power-of-two Gloo group, auto groups that
// cross hosts (comm/gloo/gloo_sync_allreduce.h). cross_host_backend: the
// backend of a "cpu" group (backend "auto", device_mesh/mesh_runtime.h)
// whose members are not all on one host name or cannot share memory, and of
// a shared-memory group's point-to-point pairs; ucx when unset; gloo needs
// @devmesh//comm:gloo linked (CrossHostBackendName). two_level:
// whether such a group whose hosts each hold the same number (> 1) of its
// members is two-level (comm/two_level/two_level_communicator.h); on when
// unset (kTwoLevelByDefault, comm/auto_group.h), 0 keeps the flat group of
// the cross-host backend. "agree": the value must be the
// same on every rank of a mesh (the algorithms' steps misalign otherwise);
// InitDeviceMesh compares the parsed values (AgreedSettingsText), so "1K" on
// one rank and "1024" on another agree.
//
// Also known, and not parsed here (their readers check them): the
// rendezvous's DEVMESH_STORE_ADDR, DEVMESH_STORE_TOKEN and
// DEVMESH_STORE_LISTEN_FD (bootstrap/rendezvous.h), DEVMESH_SPARE (a rank
// restarted as a spare, device_mesh/spare_runtime.h), and the variables that
// devmesh's own scripts and tests read (DEVMESH_TORCH_VENV,
// DEVMESH_TORCH_SPEC, DEVMESH_REQUIRE_TORCH, DEVMESH_TEST_HAS_NCCL,
// DEVMESH_WORLD_SIZES, DEVMESH_WITH_CUDA, DEVMESH_NOCOMPILE_CASE).
//
// Thread-safety: every function may be called from any thread. A Settings
// that ProcessSettings() returned stays valid and unchanged for the
// process's life; SetProcessSettings and ReloadProcessSettings affect reads
// made after them: a group reads the settings that must agree when it is
// made and keeps them, so a change reaches only later groups (and, through
// InitDeviceMesh's agreement, must be made alike on every rank).
#ifndef DEVMESH_CONFIG_SETTINGS_H_
#define DEVMESH_CONFIG_SETTINGS_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace devmesh {

enum class GlooSyncRoute { kNever = 0, kEveryGroup = 1, kAcrossHosts = 2 };
enum class CrossHostBackend { kGloo = 0, kUcx = 1 };

struct Settings {
  // Shared-memory backend (comm/shm): wait loop, slots, algorithm bounds.
  std::optional<int64_t> shm_spin;
  std::optional<int64_t> shm_yield_us;
  std::optional<bool> shm_single_copy;
  std::optional<size_t> shm_slot_bytes;
  std::optional<size_t> shm_oneshot_max_bytes;
  std::optional<size_t> shm_single_copy_min_bytes;
  // Gloo backend (comm/gloo).
  std::optional<bool> gloo_lazy_mesh;
  std::optional<bool> gloo_loop_batch;
  std::optional<size_t> gloo_sync_max_bytes;
  std::optional<GlooSyncRoute> gloo_sync_route;
  // The backend of "auto" CPU groups across hosts (device_mesh).
  std::optional<CrossHostBackend> cross_host_backend;
  // Two-level "cpu" groups across hosts (shm inside, the cross-host backend
  // between the hosts; device_mesh).
  std::optional<bool> two_level;
  // The failure watch (device_mesh/failure_watch.h).
  std::optional<bool> failure_watch;
  std::optional<int64_t> lease_period_ms;
  std::optional<int64_t> lease_silence_ms;
  // The rendezvous's progress lines (bootstrap); 0 turns them off.
  std::optional<int64_t> rendezvous_progress_s;
};

// Parses `environment` (name, value pairs, as environ holds them; other
// variables are skipped). Errors: InvalidArgument for a DEVMESH_* name that
// is not known (naming it and pointing to config/settings.h) or a value not
// of its form (naming the variable, the value and the form), the first one
// found in `environment`'s order.
absl::StatusOr<Settings> ParseSettings(
    absl::Span<const std::pair<std::string, std::string>> environment);

// This process's environment (environ), as pairs.
std::vector<std::pair<std::string, std::string>> CurrentEnvironment();

// The process's settings: ParseSettings(CurrentEnvironment()) at the first
// call, or what SetProcessSettings / ReloadProcessSettings set since. When
// the environment did not parse, every field is unset (the defaults) and
// ProcessSettingsStatus() says why.
const Settings& ProcessSettings();

// OK, or the error ParseSettings gave for the environment ProcessSettings
// read (cleared by SetProcessSettings).
absl::Status ProcessSettingsStatus();

// Replaces the process's settings from code; the environment is not read
// again.
void SetProcessSettings(const Settings& settings);

// Parses the environment again (after a setenv) and makes the result the
// process's settings, the error included. Returns what it parsed.
absl::StatusOr<Settings> ReloadProcessSettings();

// The settings that must agree across ranks, as (variable, value) in the
// table's order, the value canonical ("unset", the parsed number, or "auto"
// for gloo_sync_route's kAcrossHosts).
std::vector<std::pair<std::string, std::string>> AgreedSettingsText(
    const Settings& settings);

// The registry name of the backend for CPU groups whose members cannot share
// memory: settings.cross_host_backend's ("gloo" or "ucx"), "ucx" when unset.
// "gloo" is opt-in: a program has it only when it links @devmesh//comm:gloo
// (comm/registry.h).
const char* CrossHostBackendName(const Settings& settings);

}  // namespace devmesh

#endif  // DEVMESH_CONFIG_SETTINGS_H_
