/* The per-dim all-reduce through Open MPI, the third column of
 * tools/peer_bench.sh: the peer of bench/allreduce_2d.cc's mesh groups and of
 * torch_allreduce.py, measured the same way.
 *
 *   mpicc -O2 -o mpi_allreduce mpi_allreduce.c
 *   mpirun -np 4 ... mpi_allreduce --shape 2x2 --names dp,tp \
 *       --sizes 1024,65536 --iters 20 --warmup 5
 *
 * The mesh is row-major over MPI_COMM_WORLD's ranks; the group of a rank
 * along dim d is MPI_Comm_split(world, color = the rank with coordinate d
 * set to 0, key = coordinate d). Every group first does --warmup all-reduces
 * of the largest size; then per size and dim: --warmup untimed all-reduces,
 * and --iters timed runs. A run is batch_size(bytes) back-to-back
 * MPI_Allreduce calls (float32 sum, out of place, allreduce_2d's BatchSize:
 * clamp(ceil(8 MiB / bytes), 1, 100)) started right after a barrier over a
 * communicator of its own (an MPI_Comm_dup of world, so the groups under test
 * are not warmed by it); its time is its slowest rank's (MPI_MAX over that
 * communicator). seconds: the median over runs of run time / batch. After
 * timing, a fresh pattern (allreduce_2d's: element i of global rank g holds
 * ((g % 5) + 1) * ((i % 3) + 1)) is reduced once and every element checked.
 * Rank 0 prints, per (dim, size), one line:
 *   PEER_BENCH_ALLREDUCE {"dim":..,"bytes":..,"group_size":..,"batch":..,
 *                         "iters":..,"seconds":..,"wrong":..}
 * Exit status 2 for bad arguments, 1 for an MPI error (MPI aborts the job).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define MAX_DIMS 8
#define MAX_SIZES 64

static int batch_size(long bytes) {
  const long batch_bytes = 8L << 20;
  long b = (batch_bytes + bytes - 1) / (bytes > 0 ? bytes : 1);
  return (int)(b < 1 ? 1 : b > 100 ? 100 : b);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* v, int n) {
  qsort(v, n, sizeof(double), cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* A host buffer as DeviceBuffer::Allocate makes one: 2 MiB-aligned and
 * advised to use huge pages from 1 MiB, touched once. */
static float* alloc_floats(long count) {
  size_t bytes = (size_t)(count > 0 ? count : 1) * sizeof(float);
  void* p = NULL;
  if (posix_memalign(&p, bytes >= (1u << 20) ? (2u << 20) : 4096, bytes)) {
    fprintf(stderr, "mpi_allreduce: cannot allocate %zu bytes\n", bytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (bytes >= (1u << 20)) madvise(p, bytes, MADV_HUGEPAGE);
  memset(p, 0, bytes);
  return p;
}

static void fill_pattern(float* buf, long count, int global_rank) {
  float factor = (float)(global_rank % 5 + 1);
  for (long i = 0; i < count; ++i) buf[i] = factor * (float)(i % 3 + 1);
}

static int parse_list(const char* text, char sep, long* out, int max) {
  int n = 0;
  const char* p = text;
  while (*p && n < max) {
    char* end;
    long v = strtol(p, &end, 10);
    if (end == p || v <= 0) return -1;
    out[n++] = v;
    if (*end == 0) break;
    if (*end != sep) return -1;
    p = end + 1;
  }
  return n;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, world;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const char *shape_text = "2x2", *names_text = "dp,tp", *sizes_text = NULL;
  int iters = 20, warmup = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--shape")) shape_text = argv[i + 1];
    else if (!strcmp(argv[i], "--names")) names_text = argv[i + 1];
    else if (!strcmp(argv[i], "--sizes")) sizes_text = argv[i + 1];
    else if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--warmup")) warmup = atoi(argv[i + 1]);
    else {
      if (rank == 0) fprintf(stderr, "mpi_allreduce: unknown flag %s\n", argv[i]);
      MPI_Finalize();
      return 2;
    }
  }
  long shape[MAX_DIMS], sizes[MAX_SIZES];
  int ndim = parse_list(shape_text, 'x', shape, MAX_DIMS);
  int nsizes = sizes_text ? parse_list(sizes_text, ',', sizes, MAX_SIZES) : -1;
  long product = 1;
  for (int d = 0; d < ndim; ++d) product *= shape[d];
  char names[MAX_DIMS][32];
  int nnames = 0;
  for (const char* p = names_text; *p && nnames < MAX_DIMS; ++nnames) {
    size_t len = strcspn(p, ",");
    snprintf(names[nnames], sizeof names[0], "%.*s", (int)len, p);
    p += len + (p[len] == ',');
  }
  if (ndim < 1 || nsizes < 1 || iters < 1 || warmup < 0 || product != world ||
      nnames != ndim) {
    if (rank == 0) {
      fprintf(stderr, "mpi_allreduce: need --sizes, --iters >= 1, --warmup >= 0, "
              "a --shape whose product (%ld) is the world size (%d) and one "
              "--names entry per dim\n", product, world);
    }
    MPI_Finalize();
    return 2;
  }
  MPI_Comm metrics;
  MPI_Comm_dup(MPI_COMM_WORLD, &metrics);
  /* Row-major coordinates of this rank; one group per dim. */
  long coord[MAX_DIMS], stride[MAX_DIMS];
  for (int d = ndim - 1, s = 1; d >= 0; s *= shape[d], --d) stride[d] = s;
  for (int d = 0; d < ndim; ++d) coord[d] = rank / stride[d] % shape[d];
  MPI_Comm groups[MAX_DIMS];
  long factor_sum[MAX_DIMS];
  for (int d = 0; d < ndim; ++d) {
    int color = rank - (int)(coord[d] * stride[d]);
    MPI_Comm_split(MPI_COMM_WORLD, color, (int)coord[d], &groups[d]);
    factor_sum[d] = 0;
    for (long c = 0; c < shape[d]; ++c) factor_sum[d] += (color + c * stride[d]) % 5 + 1;
  }
  long largest = 0;
  for (int s = 0; s < nsizes; ++s) largest = sizes[s] > largest ? sizes[s] : largest;
  float* send = alloc_floats(largest / 4);
  float* recv = alloc_floats(largest / 4);
  for (int d = 0; d < ndim; ++d) {
    for (int i = 0; i < warmup; ++i) {
      MPI_Allreduce(send, recv, (int)(largest / 4), MPI_FLOAT, MPI_SUM, groups[d]);
    }
  }
  double* times = malloc(sizeof(double) * iters);
  double* slowest = malloc(sizeof(double) * iters);
  for (int s = 0; s < nsizes; ++s) {
    const int count = (int)(sizes[s] / 4);
    const int batch = batch_size((long)count * 4);
    for (int d = 0; d < ndim; ++d) {
      fill_pattern(send, count, rank);
      for (int i = 0; i < warmup; ++i) {
        MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, groups[d]);
      }
      for (int it = 0; it < iters; ++it) {
        MPI_Barrier(metrics);
        /* One untimed all-reduce on the group lines its members up after
           the barrier (as allreduce_2d does). */
        MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, groups[d]);
        double t0 = now();
        for (int b = 0; b < batch; ++b) {
          MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, groups[d]);
        }
        times[it] = (now() - t0) / batch;
      }
      MPI_Reduce(times, slowest, iters, MPI_DOUBLE, MPI_MAX, 0, metrics);
      /* A fresh pattern, reduced once and checked element by element. */
      fill_pattern(send, count, rank);
      memset(recv, 0, (size_t)count * sizeof(float));
      MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, groups[d]);
      long wrong = 0, wrong_all = 0;
      for (long i = 0; i < count; ++i) {
        if (recv[i] != (float)((i % 3 + 1) * factor_sum[d])) ++wrong;
      }
      MPI_Reduce(&wrong, &wrong_all, 1, MPI_LONG, MPI_SUM, 0, metrics);
      if (rank == 0) {
        printf("PEER_BENCH_ALLREDUCE {\"dim\":\"%s\",\"bytes\":%ld,"
               "\"group_size\":%ld,\"batch\":%d,\"iters\":%d,"
               "\"seconds\":%.9g,\"wrong\":%ld}\n",
               names[d], (long)count * 4, shape[d], batch, iters,
               median(slowest, iters), wrong_all);
        fflush(stdout);
      }
    }
  }
  free(times);
  free(slowest);
  free(send);
  free(recv);
  for (int d = 0; d < ndim; ++d) MPI_Comm_free(&groups[d]);
  MPI_Comm_free(&metrics);
  MPI_Finalize();
  return 0;
}
