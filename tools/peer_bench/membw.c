/* Memory bandwidth of this machine, STREAM-style, for tools/peer_bench.sh's
 * bound rows.
 *
 *   cc -O2 -o membw membw.c
 *   membw [--procs N] [--array_mib M] [--reps R]
 *
 * Starts N processes at once (default: one per CPU this process may use),
 * process k bound to the k-th of those CPUs, each with three float arrays of
 * M MiB (default: the larger of 64 MiB and half the last-level cache, so
 * that the 3 x N arrays together exceed it twice over). Two kernels,
 * STREAM's accounting (bytes read + bytes written, no write-allocate):
 *   copy  b = a      (memcpy)  2 x M MiB per pass
 *   add   c = a + b            3 x M MiB per pass
 * Each pass of a kernel starts in every process together (a process-shared
 * barrier); its bandwidth is the bytes of every process over the slowest
 * process's time. Prints the best pass of R (as STREAM does), one line:
 *   PEER_BENCH_MEMBW {"procs":..,"array_bytes":..,"reps":..,
 *                     "copy_gbps":..,"add_gbps":..}
 * GB/s = 1e9 bytes/s. Exit status 2 for bad arguments, 1 on failure.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_PROCS 64
#define MAX_REPS 100

struct shared {
  pthread_barrier_t barrier;
  double seconds[2][MAX_REPS][MAX_PROCS]; /* kernel, pass, process */
};

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void run(struct shared* sh, int k, size_t count, int reps) {
  float* a = aligned_alloc(2u << 20, count * sizeof(float));
  float* b = aligned_alloc(2u << 20, count * sizeof(float));
  float* c = aligned_alloc(2u << 20, count * sizeof(float));
  if (!a || !b || !c) _exit(1);
  for (size_t i = 0; i < count; ++i) a[i] = 1.0f, b[i] = 2.0f, c[i] = 0.0f;
  for (int kernel = 0; kernel < 2; ++kernel) {
    for (int r = 0; r < reps; ++r) {
      pthread_barrier_wait(&sh->barrier);
      double t0 = now();
      if (kernel == 0) {
        memcpy(b, a, count * sizeof(float));
      } else {
        for (size_t i = 0; i < count; ++i) c[i] = a[i] + b[i];
      }
      sh->seconds[kernel][r][k] = now() - t0;
    }
  }
  /* Keep the results observable so the compiler keeps the loops. */
  if (c[count / 2] != 2.0f || b[count / 3] != 1.0f) _exit(1);
  _exit(0);
}

int main(int argc, char** argv) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed)) return 1;
  int cpus[MAX_PROCS], ncpus = 0;
  for (int c = 0; c < CPU_SETSIZE && ncpus < MAX_PROCS; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus[ncpus++] = c;
  }
  int procs = ncpus, reps = 10;
  long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (llc <= 0) llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
  long mib = llc > 0 ? (llc / 2 + (1 << 20) - 1) >> 20 : 0;
  if (mib < 64) mib = 64;
  if (mib > 1024) mib = 1024;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--procs")) procs = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--array_mib")) mib = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    else {
      fprintf(stderr, "membw: unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  if (procs < 1 || procs > MAX_PROCS || reps < 1 || reps > MAX_REPS ||
      mib < 1 || mib > 4096) {
    fprintf(stderr, "membw: --procs in [1, %d], --reps in [1, %d], "
            "--array_mib in [1, 4096]\n", MAX_PROCS, MAX_REPS);
    return 2;
  }
  struct shared* sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                           MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) return 1;
  pthread_barrierattr_t attr;
  pthread_barrierattr_init(&attr);
  pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_barrier_init(&sh->barrier, &attr, procs);
  const size_t count = ((size_t)mib << 20) / sizeof(float);
  pid_t pids[MAX_PROCS];
  for (int k = 0; k < procs; ++k) {
    pids[k] = fork();
    if (pids[k] < 0) return 1;
    if (pids[k] == 0) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpus[k % ncpus], &one);
      sched_setaffinity(0, sizeof one, &one);
      run(sh, k, count, reps);
    }
  }
  int failed = 0;
  for (int k = 0; k < procs; ++k) {
    int status;
    if (waitpid(pids[k], &status, 0) < 0 || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
      failed = 1;
    }
  }
  if (failed) {
    fprintf(stderr, "membw: a process failed (out of memory?)\n");
    return 1;
  }
  double best[2] = {0, 0};
  const double per_pass[2] = {2.0, 3.0}; /* arrays moved per pass */
  for (int kernel = 0; kernel < 2; ++kernel) {
    for (int r = 0; r < reps; ++r) {
      double slowest = 0;
      for (int k = 0; k < procs; ++k) {
        if (sh->seconds[kernel][r][k] > slowest) slowest = sh->seconds[kernel][r][k];
      }
      double gbps = per_pass[kernel] * procs * (double)(count * sizeof(float)) /
                    slowest / 1e9;
      if (slowest > 0 && gbps > best[kernel]) best[kernel] = gbps;
    }
  }
  printf("PEER_BENCH_MEMBW {\"procs\":%d,\"array_bytes\":%zu,\"reps\":%d,"
         "\"copy_gbps\":%.4g,\"add_gbps\":%.4g}\n",
         procs, count * sizeof(float), reps, best[0], best[1]);
  return 0;
}
