// devmesh/config/settings.cc
#include "config/settings.h"

#include <atomic>
#include <climits>
#include <functional>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "sync/annotated_mutex.h"

extern char** environ;

namespace devmesh {
namespace {

enum class Form {
  kCount,
  kPositiveCount,
  kBytes,
  kPositiveBytes,
  kSwitch,
  kRoute,
  kCrossHost
};

const char* FormText(Form form) {
  switch (form) {
    case Form::kCount:
      return "a count (decimal digits)";
    case Form::kPositiveCount:
      return "a positive count (decimal digits)";
    case Form::kBytes:
      return "a byte count (digits, optionally followed by K, M or G)";
    case Form::kPositiveBytes:
      return "a positive byte count (digits, optionally followed by K, M or G)";
    case Form::kSwitch:
      return "0 or 1 (or false/true, off/on, no/yes)";
    case Form::kRoute:
      return "0 (never), 1 (every power-of-two group) or auto (groups that "
             "cross hosts)";
    case Form::kCrossHost:
      return "gloo or ucx";
  }
  return "";
}

// Decimal digits only (no sign, no spaces), at most INT64_MAX.
bool Digits(absl::string_view text, uint64_t* out) {
  if (text.empty() || text.size() > 19) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return absl::SimpleAtoi(text, out) && *out <= uint64_t{INT64_MAX};
}

bool Bytes(absl::string_view text, uint64_t* out) {
  int shift = 0;
  if (!text.empty()) {
    switch (text.back()) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      default:
        break;
    }
    if (shift != 0) text.remove_suffix(1);
  }
  uint64_t v = 0;
  if (!Digits(text, &v) || v > (uint64_t{INT64_MAX} >> shift)) return false;
  *out = v << shift;
  return true;
}

// One parsed value: the number, or 0/1, or the route.
using Setter = std::function<void(Settings&, uint64_t)>;
using Reader = std::function<std::optional<uint64_t>(const Settings&)>;

struct Known {
  const char* name;
  Form form;
  bool agree;
  Setter set;
  Reader get;
};

template <typename T>
Known Entry(const char* name, Form form, bool agree,
            std::optional<T> Settings::*field) {
  return Known{
      name, form, agree,
      [field](Settings& s, uint64_t v) { s.*field = static_cast<T>(v); },
      [field](const Settings& s) -> std::optional<uint64_t> {
        if (!(s.*field).has_value()) return std::nullopt;
        return static_cast<uint64_t>(*(s.*field));
      }};
}

const std::vector<Known>& Table() {
  static const auto* table = new std::vector<Known>{
      Entry("DEVMESH_SHM_SPIN", Form::kCount, false, &Settings::shm_spin),
      Entry("DEVMESH_SHM_YIELD_US", Form::kCount, false,
            &Settings::shm_yield_us),
      Entry("DEVMESH_SHM_SINGLE_COPY", Form::kSwitch, true,
            &Settings::shm_single_copy),
      Entry("DEVMESH_SHM_SLOT_BYTES", Form::kPositiveBytes, true,
            &Settings::shm_slot_bytes),
      Entry("DEVMESH_SHM_ONESHOT_MAX", Form::kBytes, true,
            &Settings::shm_oneshot_max_bytes),
      Entry("DEVMESH_SHM_SINGLE_COPY_MIN", Form::kBytes, true,
            &Settings::shm_single_copy_min_bytes),
      Entry("DEVMESH_GLOO_LAZY_MESH", Form::kSwitch, true,
            &Settings::gloo_lazy_mesh),
      Entry("DEVMESH_GLOO_LOOP_BATCH", Form::kSwitch, false,
            &Settings::gloo_loop_batch),
      Entry("DEVMESH_GLOO_SYNC_MAX_BYTES", Form::kBytes, true,
            &Settings::gloo_sync_max_bytes),
      Entry("DEVMESH_GLOO_SYNC_ROUTE", Form::kRoute, true,
            &Settings::gloo_sync_route),
      Entry("DEVMESH_CROSS_HOST_BACKEND", Form::kCrossHost, true,
            &Settings::cross_host_backend),
      Entry("DEVMESH_TWO_LEVEL", Form::kSwitch, true, &Settings::two_level),
      Entry("DEVMESH_FAILURE_WATCH", Form::kSwitch, true,
            &Settings::failure_watch),
      Entry("DEVMESH_LEASE_PERIOD_MS", Form::kPositiveCount, true,
            &Settings::lease_period_ms),
      Entry("DEVMESH_LEASE_SILENCE_MS", Form::kPositiveCount, true,
            &Settings::lease_silence_ms),
      Entry("DEVMESH_RENDEZVOUS_PROGRESS_S", Form::kCount, false,
            &Settings::rendezvous_progress_s),
  };
  return *table;
}

// Known names whose values other readers check.
constexpr const char* kReadElsewhere[] = {
    "DEVMESH_STORE_ADDR",     "DEVMESH_STORE_TOKEN", "DEVMESH_STORE_LISTEN_FD",
    "DEVMESH_TORCH_VENV",     "DEVMESH_TORCH_SPEC",  "DEVMESH_REQUIRE_TORCH",
    "DEVMESH_TEST_HAS_NCCL",  "DEVMESH_WORLD_SIZES", "DEVMESH_WITH_CUDA",
    "DEVMESH_NOCOMPILE_CASE", "DEVMESH_SPARE",
};

bool Parse(Form form, absl::string_view text, uint64_t* out) {
  switch (form) {
    case Form::kCount:
      return Digits(text, out);
    case Form::kPositiveCount:
      return Digits(text, out) && *out > 0;
    case Form::kBytes:
      return Bytes(text, out);
    case Form::kPositiveBytes:
      return Bytes(text, out) && *out > 0;
    case Form::kSwitch:
      if (text == "1" || text == "true" || text == "on" || text == "yes") {
        *out = 1;
        return true;
      }
      if (text == "0" || text == "false" || text == "off" || text == "no") {
        *out = 0;
        return true;
      }
      return false;
    case Form::kRoute:
      if (text != "0" && text != "1" && text != "auto") return false;
      *out = static_cast<uint64_t>(
          text == "auto" ? GlooSyncRoute::kAcrossHosts
                         : static_cast<GlooSyncRoute>(text[0] - '0'));
      return true;
    case Form::kCrossHost:
      if (text != "gloo" && text != "ucx") return false;
      *out = static_cast<uint64_t>(text == "ucx" ? CrossHostBackend::kUcx
                                                 : CrossHostBackend::kGloo);
      return true;
  }
  return false;
}

struct State {
  sync_internal::Mutex mu;
  std::atomic<const Settings*> current{nullptr};
  absl::Status status ABSL_GUARDED_BY(mu);
  // Every Settings published, kept for the process's life: a reference
  // ProcessSettings() returned stays valid after a replacement.
  std::vector<std::unique_ptr<const Settings>> published ABSL_GUARDED_BY(mu);
};

State& GetState() {
  static State* state = new State();
  return *state;
}

// Publishes `settings` (kept: earlier readers may hold a reference).
void Publish(State& state, const Settings& settings, absl::Status status)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(state.mu) {
  state.status = std::move(status);
  state.published.push_back(std::make_unique<const Settings>(settings));
  state.current.store(state.published.back().get(),
                      std::memory_order_release);
}

}  // namespace

absl::StatusOr<Settings> ParseSettings(
    absl::Span<const std::pair<std::string, std::string>> environment) {
  Settings settings;
  for (const auto& [name, value] : environment) {
    if (!absl::StartsWith(name, "DEVMESH_")) continue;
    const Known* known = nullptr;
    for (const Known& k : Table()) {
      if (name == k.name) known = &k;
    }
    if (known == nullptr) {
      bool elsewhere = false;
      for (const char* other : kReadElsewhere) elsewhere |= name == other;
      if (elsewhere) continue;
      std::vector<std::string> names;
      for (const Known& k : Table()) names.push_back(k.name);
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown setting ", name, "='", value,
          "': devmesh reads no such variable (a typo? its settings are ",
          absl::StrJoin(names, ", "), "; see config/settings.h)"));
    }
    uint64_t v = 0;
    if (!Parse(known->form, value, &v)) {
      return absl::InvalidArgumentError(absl::StrCat("malformed setting ", name,
                                                     "='", value, "': want ",
                                                     FormText(known->form)));
    }
    known->set(settings, v);
  }
  return settings;
}

std::vector<std::pair<std::string, std::string>> CurrentEnvironment() {
  std::vector<std::pair<std::string, std::string>> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    absl::string_view entry = *e;
    const size_t eq = entry.find('=');
    if (eq == absl::string_view::npos) continue;
    out.emplace_back(std::string(entry.substr(0, eq)),
                     std::string(entry.substr(eq + 1)));
  }
  return out;
}

const Settings& ProcessSettings() {
  State& state = GetState();
  if (const Settings* s = state.current.load(std::memory_order_acquire)) {
    return *s;
  }
  sync_internal::MutexLock lock(&state.mu);
  if (const Settings* s = state.current.load(std::memory_order_acquire)) {
    return *s;
  }
  absl::StatusOr<Settings> parsed = ParseSettings(CurrentEnvironment());
  Publish(state, parsed.ok() ? *parsed : Settings(), parsed.status());
  return *state.current.load(std::memory_order_acquire);
}

absl::Status ProcessSettingsStatus() {
  (void)ProcessSettings();
  State& state = GetState();
  sync_internal::MutexLock lock(&state.mu);
  return state.status;
}

void SetProcessSettings(const Settings& settings) {
  State& state = GetState();
  sync_internal::MutexLock lock(&state.mu);
  Publish(state, settings, absl::OkStatus());
}

absl::StatusOr<Settings> ReloadProcessSettings() {
  absl::StatusOr<Settings> parsed = ParseSettings(CurrentEnvironment());
  State& state = GetState();
  sync_internal::MutexLock lock(&state.mu);
  Publish(state, parsed.ok() ? *parsed : Settings(), parsed.status());
  return parsed;
}

std::vector<std::pair<std::string, std::string>> AgreedSettingsText(
    const Settings& settings) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Known& k : Table()) {
    if (!k.agree) continue;
    const std::optional<uint64_t> v = k.get(settings);
    std::string text = v.has_value() ? absl::StrCat(*v) : "unset";
    if (k.form == Form::kRoute && v == uint64_t{2}) text = "auto";
    if (k.form == Form::kCrossHost && v.has_value()) {
      text = *v == static_cast<uint64_t>(CrossHostBackend::kUcx) ? "ucx"
                                                                 : "gloo";
    }
    out.emplace_back(k.name, std::move(text));
  }
  return out;
}

const char* CrossHostBackendName(const Settings& settings) {
  return settings.cross_host_backend.value_or(CrossHostBackend::kUcx) ==
                 CrossHostBackend::kGloo
             ? "gloo"
             : "ucx";
}

}  // namespace devmesh
