// libFuzzer target for the c10d side of devmesh's store server: the c10d
// decoder (store/c10d_wire_format.h) and the per-connection session that
// translates to the store service (store/c10d_session.h).
//
// The input is cut into chunks (sizes from the input itself) that start with
// a valid VALIDATE greeting, and fed to a C10dSession as a byte stream would
// arrive. Every request the decoder returns must re-encode to exactly the
// bytes it came from, and the resumable scan must agree with a decode from
// scratch at every prefix. Each step goes to a StoreService as the server's loop
// would (forward, translate the reply, park, cancel), and parked requests
// are expired now and then. Every query type 0..18 (the queue ops and
// BARRIER included) reaches the service; a service reply must always find
// the request it answers (an Internal error from the session aborts). Any crash, hang, sanitizer report or round-trip
// mismatch is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "store/c10d_session.h"
#include "store/c10d_wire_format.h"
#include "store/store_service.h"

namespace {

void CheckRoundTrip(absl::string_view bytes) {
  absl::StatusOr<devmesh::C10dDecoded> d = devmesh::DecodeC10dRequest(bytes);
  if (!d.ok() || !d->request) return;
  const std::string again = devmesh::EncodeC10dRequest(*d->request);
  if (again != bytes.substr(0, d->consumed)) std::abort();
}

// The resumable scan the server's session uses (C10dScan) must agree with a
// decode from scratch at every prefix of the bytes, fed in growing order.
void CheckScanAgrees(absl::string_view bytes) {
  if (bytes.size() > 512) bytes = bytes.substr(0, 512);  // quadratic check
  devmesh::C10dScan scan;
  for (size_t cut = 0; cut <= bytes.size(); ++cut) {
    absl::StatusOr<devmesh::C10dDecoded> plain =
        devmesh::DecodeC10dRequest(bytes.substr(0, cut));
    absl::StatusOr<devmesh::C10dDecoded> scanned =
        devmesh::DecodeC10dRequest(bytes.substr(0, cut), &scan);
    if (plain.ok() != scanned.ok()) std::abort();
    if (!plain.ok()) return;
    if (plain->request.has_value() != scanned->request.has_value() ||
        plain->need_bytes != scanned->need_bytes ||
        plain->consumed != scanned->consumed) {
      std::abort();
    }
    if (plain->request) return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view in(reinterpret_cast<const char*>(data), size);
  devmesh::StoreService service("");
  devmesh::C10dSession session("");
  const devmesh::StoreService::ClientId client = 1;
  std::string stream;
  devmesh::AppendC10dU8(stream, 0);
  devmesh::AppendC10dU32(stream, devmesh::kC10dMagic);
  session.Feed(stream);
  uint64_t step = 0;
  bool closed = false;
  while (!in.empty() && !closed) {
    const size_t chunk = 1 + static_cast<uint8_t>(in[0]) % 64;
    in.remove_prefix(1);
    absl::string_view bytes = in.substr(0, chunk);
    in.remove_prefix(std::min(chunk, in.size()));
    stream.append(bytes.data(), bytes.size());
    session.Feed(bytes);
    CheckRoundTrip(bytes);
    while (!closed) {
      devmesh::C10dSession::Step s = session.Next(service.IsParked(client));
      if (s.kind == devmesh::C10dSession::Step::kNeedMore) break;
      if (s.kind == devmesh::C10dSession::Step::kClose) closed = true;
      if (s.kind == devmesh::C10dSession::Step::kCancelWait &&
          !service.Expire(client).empty()) {
        session.DropParked();
      }
      if (s.kind == devmesh::C10dSession::Step::kForward) {
        devmesh::StoreService::Outcome out = service.Handle(client, s.bytes);
        if (out.reply) {
          if (!session.TranslateReply(*out.reply).ok()) closed = true;
        } else {
          // No reply: the service parked it (a WAIT or BARRIER).
          if (!service.IsParked(client)) std::abort();
          session.MarkParked();
        }
        if (out.close) closed = true;
      }
      if (++step % 7 == 0) {
        std::string expired = service.Expire(client);
        if (!expired.empty() && !session.TranslateParkedReply(expired).ok()) {
          closed = true;
        }
      }
      for (auto& [id, reply] : service.TakeCompleted()) {
        // A completion is for the parked request, which must exist.
        absl::StatusOr<std::string> r = session.TranslateParkedReply(reply);
        if (!r.ok() && r.status().code() == absl::StatusCode::kInternal) {
          std::abort();
        }
        if (!r.ok()) closed = true;
      }
    }
  }
  CheckRoundTrip(stream.substr(5));
  CheckScanAgrees(stream.substr(5));
  return 0;
}
