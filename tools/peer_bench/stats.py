"""Statistics of benchmark run times, as bench/run_stats.cc computes them.

median, interquartile_mean and bootstrap_half_width95 have the definitions of
devmesh's bench/run_stats.h (median; mean of the sorted values from index
n/4 to n - n/4 - 1; half the width of the 95% percentile-bootstrap interval
of the interquartile mean, 1000 resamples from a fixed seed). The resampling
generator is Python's (seeded), not C++'s mt19937_64, so a bootstrap width can
differ from the C++ one in its last digits; the statistic is the same.
Bandwidths follow nccl-tests (bench/allreduce_table.h): GB/s = 1e9 bytes/s.
No third-party imports: this file runs with any python3.
"""
import random


def median(values):
    v = sorted(values)
    n = len(v)
    if n == 0:
        return 0.0
    return float(v[n // 2]) if n % 2 == 1 else (v[n // 2 - 1] + v[n // 2]) / 2.0


def interquartile_mean(values):
    if len(values) < 4:
        return median(values)
    v = sorted(values)
    lo, hi = len(v) // 4, len(v) - len(v) // 4
    return sum(v[lo:hi]) / float(hi - lo)


def bootstrap_half_width95(values, resamples=1000, seed=0x5EED):
    if len(values) < 2:
        return 0.0
    rng = random.Random(seed)
    n = len(values)
    means = sorted(
        interquartile_mean([values[rng.randrange(n)] for _ in range(n)])
        for _ in range(resamples))
    lo = int(resamples * 0.025)
    hi = resamples - lo - 1
    return (means[hi] - means[lo]) / 2.0


def alg_bandwidth_gbps(nbytes, seconds):
    return nbytes / seconds / 1e9 if seconds > 0 else 0.0


def allreduce_bus_bandwidth_gbps(nbytes, nranks, seconds):
    return alg_bandwidth_gbps(nbytes, seconds) * 2.0 * (nranks - 1) / nranks


def collective_bus_bandwidth_gbps(nbytes, nranks, seconds):
    """All-gather and reduce-scatter (nccl-tests): nbytes is the full
    buffer, busbw = algbw * (n - 1) / n."""
    return alg_bandwidth_gbps(nbytes, seconds) * (nranks - 1) / nranks


MAX_BATCH = 100
BATCH_BYTES = 8 << 20


def batch_size(nbytes):
    """All-reduces timed together in one run (bench/allreduce_2d.cc's
    BatchSize): clamp(ceil(8 MiB / bytes), 1, 100), so 1 to 8 from 1 MiB,
    16 at 512 KiB, 100 from 64 KiB down."""
    return min(MAX_BATCH, max(1, -(-BATCH_BYTES // max(nbytes, 1))))


def paired_ratio(devmesh, torch):
    """devmesh/PyTorch from paired figures (one pair per round, both sides
    run back to back): the interquartile mean of the per-pair ratios and the
    half width of its 95% bootstrap interval, as allreduce_2d pairs its mesh
    and raw runs. Pairs where either figure is not positive are dropped."""
    ratios = [d / t for d, t in zip(devmesh, torch) if d > 0 and t > 0]
    if not ratios:
        return None, None
    return interquartile_mean(ratios), bootstrap_half_width95(ratios)
