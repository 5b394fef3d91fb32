// devmesh/comm/shm/shm_segment.cc
#include "comm/shm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <new>

#include "absl/strings/str_cat.h"
#include "status/status_macros.h"

namespace devmesh {
namespace shm_internal {
namespace {

size_t ControlBytes(size_t size) {
  const size_t raw =
      sizeof(SegmentHeader) + sizeof(SyncLine) + size * sizeof(MemberLine);
  return (raw + kPageBytes - 1) / kPageBytes * kPageBytes;
}

std::string ErrnoText(int err) { return std::strerror(err); }

absl::Status CheckShape(size_t size, size_t slot_bytes) {
  if (size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("shm segment: size (", size, ") must be at least 1"));
  }
  if (slot_bytes == 0 || slot_bytes % kCacheLine != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shm segment: slot bytes (", slot_bytes,
        ") must be a positive multiple of ", kCacheLine));
  }
  if (SegmentBytes(size, slot_bytes) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shm segment: ", size, " members x 2 slots of ", slot_bytes,
        " bytes overflow"));
  }
  return absl::OkStatus();
}

}  // namespace

size_t SegmentBytes(size_t size, size_t slot_bytes) {
  const size_t max = std::numeric_limits<size_t>::max();
  if (size == 0 || slot_bytes == 0) return 0;
  if (size > max / 2 / slot_bytes) return 0;
  const size_t data = 2 * size * slot_bytes;
  const size_t control = ControlBytes(size);
  if (data > max - control) return 0;
  return control + data;
}

absl::StatusOr<std::unique_ptr<ShmSegment>> ShmSegment::Create(
    const std::string& name, size_t size, size_t slot_bytes, uint64_t nonce) {
  DEVMESH_RETURN_IF_ERROR(CheckShape(size, slot_bytes));
  const size_t bytes = SegmentBytes(size, slot_bytes);
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("shm_open(", name,
                                            ", O_CREAT): ", ErrnoText(errno)));
  }
  // posix_fallocate reserves the pages now: a tmpfs without room fails here
  // instead of raising SIGBUS on first touch inside a collective.
  const int err = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (err != 0) {
    close(fd);
    shm_unlink(name.c_str());
    if (err == ENOSPC || err == EFBIG) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "shm segment ", name, ": /dev/shm has not room for ", bytes,
          " bytes (", size, " members x 2 x ", slot_bytes, ")"));
    }
    return absl::InternalError(absl::StrCat(
        "posix_fallocate(", name, ", ", bytes, "): ", ErrnoText(err)));
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int map_errno = errno;
  close(fd);
  if (base == MAP_FAILED) {
    shm_unlink(name.c_str());
    return absl::InternalError(
        absl::StrCat("mmap(", name, "): ", ErrnoText(map_errno)));
  }
  auto* header = new (base) SegmentHeader();
  header->magic = kSegmentMagic;
  header->nonce = nonce;
  header->size = size;
  header->slot_bytes = slot_bytes;
  header->data_offset = ControlBytes(size);
  header->total_bytes = bytes;
  header->mapped.store(1);
  header->check_calls = 1;
  std::unique_ptr<ShmSegment> segment(
      new ShmSegment(base, bytes, size, slot_bytes, ControlBytes(size)));
  SyncLine* sync = new (segment->sync()) SyncLine();
  sync->arrivals.store(0);
  sync->bell.store(0);
  sync->sleepers.store(0);
  sync->aborted_by.store(0);
  sync->dead_member.store(0);
  for (size_t i = 0; i < size; ++i) {
    MemberLine* m = new (segment->member(i)) MemberLine();
    m->step.store(0);
    m->state.store(kMemberJoining);
    m->pid = 0;
    m->start_time = 0;
    m->nonce_echo = 0;
  }
  return segment;
}

absl::StatusOr<std::unique_ptr<ShmSegment>> ShmSegment::Open(
    const std::string& name, size_t size, size_t slot_bytes, uint64_t nonce) {
  DEVMESH_RETURN_IF_ERROR(CheckShape(size, slot_bytes));
  const size_t bytes = SegmentBytes(size, slot_bytes);
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) {
      return absl::NotFoundError(absl::StrCat(
          "no shared-memory segment ", name,
          " here (the member that made it uses another /dev/shm: another "
          "host or mount namespace)"));
    }
    return absl::InternalError(
        absl::StrCat("shm_open(", name, "): ", ErrnoText(err)));
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return absl::InternalError(
        absl::StrCat("fstat(", name, "): ", ErrnoText(err)));
  }
  if (static_cast<size_t>(st.st_size) != bytes) {
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat("shm segment ", name, " holds ", st.st_size,
                     " bytes, expected ", bytes));
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int map_errno = errno;
  close(fd);
  if (base == MAP_FAILED) {
    return absl::InternalError(
        absl::StrCat("mmap(", name, "): ", ErrnoText(map_errno)));
  }
  std::unique_ptr<ShmSegment> segment(
      new ShmSegment(base, bytes, size, slot_bytes, ControlBytes(size)));
  const SegmentHeader* h = segment->header();
  const char* mismatch = nullptr;
  if (h->magic != kSegmentMagic) {
    mismatch = "magic";
  } else if (h->nonce != nonce) {
    mismatch = "nonce";
  } else if (h->size != size) {
    mismatch = "member count";
  } else if (h->slot_bytes != slot_bytes) {
    mismatch = "slot bytes";
  } else if (h->data_offset != ControlBytes(size) || h->total_bytes != bytes) {
    mismatch = "layout";
  }
  if (mismatch != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("shm segment ", name, " is not the one offered: its ",
                     mismatch, " differs"));
  }
  return segment;
}

absl::Status ShmSegment::Unlink(const std::string& name) {
  if (shm_unlink(name.c_str()) != 0 && errno != ENOENT) {
    return absl::InternalError(
        absl::StrCat("shm_unlink(", name, "): ", ErrnoText(errno)));
  }
  return absl::OkStatus();
}

ShmSegment::~ShmSegment() { munmap(base_, bytes_); }

}  // namespace shm_internal
}  // namespace devmesh
