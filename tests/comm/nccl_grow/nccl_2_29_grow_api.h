// devmesh/tests/comm/nccl_grow/nccl_2_29_grow_api.h
// -----------------------------------------------------------------------------
// Test only: the two declarations NCCL 2.29 added for growing a
// communicator, as NCCL's own src/nccl.h.in declares them (NVIDIA/nccl,
// "Generate per-communicator unique ID for grow" and "Grow communicator by
// adding new ranks"; usage: the NCCL user guide's "Growing a communicator",
// docs.nvidia.com/deeplearning/nccl/user-guide/docs/usage/communicators.html).
// The NCCL here (2.28.9) has neither, so comm/nccl/nccl_grow.cc's 2.29
// branch is compiled against these (nccl_grow_2_29_compile_check in this
// package's BUILD). Declarations only: nothing here is linked or run.
#ifndef DEVMESH_TESTS_COMM_NCCL_GROW_NCCL_2_29_GROW_API_H_
#define DEVMESH_TESTS_COMM_NCCL_GROW_NCCL_2_29_GROW_API_H_

#include <nccl.h>

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 29, 0)
#error "this NCCL declares ncclCommGrow itself: build comm:nccl against it"
#endif

#ifdef __cplusplus
extern "C" {
#endif

ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks,
                          const ncclUniqueId* uniqueId, int rank,
                          ncclComm_t* newcomm, ncclConfig_t* config);

#ifdef __cplusplus
}
#endif

#endif  // DEVMESH_TESTS_COMM_NCCL_GROW_NCCL_2_29_GROW_API_H_
