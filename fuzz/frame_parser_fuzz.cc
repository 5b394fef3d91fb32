// libFuzzer target for the TCP store's wire format (store/wire_format.h)
// and the server's request handling (store/store_service.h).
//
// The input is cut into chunks (sizes from the input itself) and fed to a
// FrameParser as a byte stream would arrive. Each frame is decoded; a frame
// that decodes must re-encode to the same bytes and decode to the same
// request. Every frame also goes through a StoreService (as one of three
// clients chosen by the input), whose parked requests are expired now and
// then, so parking, waking and dropping are all exercised. Any crash, hang,
// sanitizer report or round-trip mismatch is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "store/store_service.h"
#include "store/wire_format.h"

namespace {

void CheckRoundTrip(absl::string_view payload) {
  absl::StatusOr<devmesh::Request> r = devmesh::DecodeRequest(payload);
  if (!r.ok()) return;
  std::string frame = devmesh::EncodeRequest(*r);
  if (absl::string_view(frame).substr(4) != payload) std::abort();
  absl::StatusOr<devmesh::Request> again =
      devmesh::DecodeRequest(absl::string_view(frame).substr(4));
  if (!again.ok() || again->op != r->op || again->keys != r->keys ||
      again->values != r->values || again->number != r->number) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view in(reinterpret_cast<const char*>(data), size);
  devmesh::FrameParser parser;
  devmesh::StoreService service("");
  uint64_t step = 0;
  while (!in.empty()) {
    const size_t chunk = 1 + static_cast<uint8_t>(in[0]) % 64;
    in.remove_prefix(1);
    parser.Feed(in.substr(0, chunk));
    in.remove_prefix(std::min(chunk, in.size()));
    while (true) {
      auto frame = parser.Next();
      if (!frame.ok() || !frame->has_value()) break;
      absl::string_view payload = **frame;
      CheckRoundTrip(payload);
      const devmesh::StoreService::ClientId client = 1 + step % 3;
      if (!service.IsParked(client)) {
        devmesh::StoreService::Outcome out = service.Handle(client, payload);
        if (out.close) service.Forget(client);
      }
      if (++step % 5 == 0) (void)service.Expire(1 + step % 3);
      (void)service.TakeCompleted();
    }
    if (!parser.Next().ok()) break;  // a bad length ends the stream
  }
  return 0;
}
