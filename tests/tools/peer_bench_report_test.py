"""tools/peer_bench's statistics (the definitions of bench/run_stats.h, the
same expected values as tests/bench/run_stats_test.cc) and its rows, table
and plot, from fixed raw results."""
import os
import shutil
import tempfile
import unittest

import report
import stats


class StatsTest(unittest.TestCase):

    def test_median(self):
        self.assertEqual(stats.median([]), 0.0)
        self.assertEqual(stats.median([7.0]), 7.0)
        self.assertEqual(stats.median([3.0, 1.0, 2.0]), 2.0)
        self.assertEqual(stats.median([4.0, 1.0, 3.0, 2.0]), 2.5)

    def test_interquartile_mean(self):
        self.assertEqual(stats.interquartile_mean(
            [100.0, 7.0, 1.0, 2.0, 6.0, 5.0, 4.0, 3.0]), 4.5)
        # 9 values: indices 2..6 of the sorted values, 0.2 2 3 4 5.
        self.assertAlmostEqual(stats.interquartile_mean(
            [0.1, 50, 2, 3, 4, 5, 6, -40, 0.2]), (0.2 + 2 + 3 + 4 + 5) / 5)
        self.assertEqual(stats.interquartile_mean([5.0, 1.0, 9.0]), 5.0)
        self.assertEqual(stats.interquartile_mean([]), 0.0)

    def test_bootstrap(self):
        self.assertEqual(stats.bootstrap_half_width95([]), 0.0)
        self.assertEqual(stats.bootstrap_half_width95([1.0]), 0.0)
        self.assertEqual(stats.bootstrap_half_width95([1.0] * 40), 0.0)
        v = [1.0 + 0.001 * i for i in range(40)]
        w = stats.bootstrap_half_width95(v)
        self.assertEqual(stats.bootstrap_half_width95(v), w)  # fixed seed
        self.assertGreater(w, 0.0)
        self.assertLess(w, 0.02)
        # Scaling the spread by 10 scales the width by 10 (same resamples).
        wide = [1.0 + 0.01 * i for i in range(40)]
        self.assertAlmostEqual(stats.bootstrap_half_width95(wide), 10 * w)

    def test_bandwidth_and_batch(self):
        self.assertEqual(stats.alg_bandwidth_gbps(2_000_000_000, 2.0), 1.0)
        self.assertEqual(stats.alg_bandwidth_gbps(100, 0.0), 0.0)
        # busbw = algbw * 2 (n - 1) / n: 4 ranks, 1.5 x.
        self.assertEqual(
            stats.allreduce_bus_bandwidth_gbps(2_000_000_000, 4, 2.0), 1.5)
        # clamp(ceil(8 MiB / bytes), 1, 100), as allreduce_2d's BatchSize.
        self.assertEqual(stats.batch_size(1), 100)
        self.assertEqual(stats.batch_size(1024), 100)
        self.assertEqual(stats.batch_size(64 << 10), 100)
        self.assertEqual(stats.batch_size(128 << 10), 64)
        self.assertEqual(stats.batch_size(512 << 10), 16)
        self.assertEqual(stats.batch_size((1 << 20) - 1), 9)
        self.assertEqual(stats.batch_size(1 << 20), 8)
        self.assertEqual(stats.batch_size(3 << 20), 3)
        self.assertEqual(stats.batch_size(64 << 20), 1)

    def test_collective_bandwidth(self):
        # busbw = algbw * (n - 1) / n: 2 ranks, half of 1 GB/s.
        self.assertEqual(
            stats.collective_bus_bandwidth_gbps(2_000_000_000, 2, 2.0), 0.5)

    def test_paired_ratio(self):
        ratio, ci = stats.paired_ratio([2.0, 4.0, 6.0], [1.0, 2.0, 3.0])
        self.assertEqual(ratio, 2.0)
        self.assertEqual(ci, 0.0)
        self.assertEqual(stats.paired_ratio([1.0], [0.0]), (None, None))


def fixture():
    return {
        "startup": {"4x2": {
            "devmesh": [{"launch_ms": 200.0, "init_ms": 150.0,
                         "communicators": 3, "store_round_trips": 39},
                        {"launch_ms": 300.0, "init_ms": 160.0,
                         "communicators": 3, "store_round_trips": 39}],
            "torch": [{"launch_ms": 8000.0, "init_ms": 750.0,
                       "communicators": 3, "store_round_trips": None},
                      {"launch_ms": 6000.0, "init_ms": 800.0,
                       "communicators": 3, "store_round_trips": None}]}},
        "allreduce": {
            "devmesh": [{"dp/1024": {"busbw": 0.5, "wrong": 0},
                         "dp/1048576": {"busbw": 1.0, "wrong": 0}},
                        {"dp/1024": {"busbw": 0.25, "wrong": 0},
                         "dp/1048576": {"busbw": 2.0, "wrong": 0}}],
            "torch": [{"dp/1024": {"busbw": 1.0, "wrong": 0},
                       "dp/1048576": {"busbw": 1.0, "wrong": 3}},
                      {"dp/1024": {"busbw": 1.0, "wrong": 0},
                       "dp/1048576": {"busbw": 1.0, "wrong": 0}}],
            "mpi": [{"dp/1024": {"busbw": 0.25, "wrong": 0},
                     "dp/1048576": {"busbw": 4.0, "wrong": 0}},
                    {"dp/1024": {"busbw": 0.5, "wrong": 0},
                     "dp/1048576": {"busbw": 2.0, "wrong": 1}}]},
        "bound": {"one_core": {"procs": 1, "array_bytes": 64 << 20,
                               "reps": 10, "copy_gbps": 15.0,
                               "add_gbps": 12.0},
                  "all_cores": {"procs": 2, "array_bytes": 64 << 20,
                                "reps": 10, "copy_gbps": 24.0,
                                "add_gbps": 32.0}},
        "collectives": {
            "devmesh": [{"all_gather/tp/1048576": {"busbw": 3.0, "wrong": 0,
                                                   "backend": "shm"}},
                        {"all_gather/tp/1048576": {"busbw": 6.0, "wrong": 0,
                                                   "backend": "shm"}}],
            "torch": [{"all_gather/tp/1048576": {"busbw": 1.0, "wrong": 0}},
                      {"all_gather/tp/1048576": {"busbw": 2.0, "wrong": 0}}]},
        "layout": {
            "devmesh": [{"op": "slice", "world": 8, "first_ns": 200.0,
                         "repeat_ns": 100.0}],
            "torch": [{"op": "slice", "world": 8, "first_ns": 100000.0,
                       "repeat_ns": 50000.0}]},
        "memory": {"devmesh": {"world": 1048576, "heap_bytes": 1200,
                               "rss_bytes": 4096},
                   "torch": {"world": 1048576, "heap_bytes": 12000000,
                             "rss_bytes": 44000000}},
        "store": {"rows": [
            {"op": "set", "clients": 4, "value_bytes": 64, "server": "devmesh",
             "protocol": "devmesh", "ops_per_s": 30000.0, "seconds": None},
            {"op": "set", "clients": 4, "value_bytes": 64, "server": "torch",
             "protocol": "c10d", "ops_per_s": 20000.0, "seconds": None},
            {"op": "rendezvous", "clients": 256, "value_bytes": 0,
             "server": "devmesh", "protocol": "devmesh", "ops_per_s": None,
             "seconds": 0.5},
            {"op": "rendezvous", "clients": 256, "value_bytes": 0,
             "server": "torch", "protocol": "c10d", "ops_per_s": None,
             "seconds": 2.0}]},
    }


def by_name(rows):
    return {r["name"]: r for r in rows}


class ReportTest(unittest.TestCase):

    def test_startup_rows(self):
        rows = by_name(report.build_rows(fixture()))
        launch = rows["4x2 launch to usable"]
        self.assertEqual(launch["devmesh"], 250.0)   # median of 200, 300
        self.assertEqual(launch["torch"], 7000.0)
        # Paired: 200/8000 = 0.025 and 300/6000 = 0.05; mean of two.
        self.assertAlmostEqual(launch["ratio"], 0.0375)
        self.assertEqual(launch["better"], "lower")
        self.assertEqual(rows["4x2 communicators/rank"]["ratio"], 1.0)
        trips = rows["4x2 store round trips/rank"]
        self.assertEqual((trips["devmesh"], trips["torch"], trips["ratio"]),
                         (39, None, None))

    def test_allreduce_rows_pair_by_round(self):
        rows = [r for r in report.build_rows(fixture())
                if r["section"] == "allreduce"]
        self.assertEqual([r["name"] for r in rows],
                         ["dp 1 KiB busbw", "dp 1 MiB busbw"])
        small, large = rows
        self.assertEqual(small["devmesh"], 0.375)
        self.assertEqual(small["torch"], 1.0)
        self.assertEqual(small["ratio"], 0.375)  # mean of 0.5, 0.25
        self.assertEqual(large["ratio"], 1.5)    # mean of 1.0, 2.0
        self.assertEqual(large["note"], "2 rounds; 4 WRONG elements")
        self.assertEqual(small["note"], "2 rounds")

    def test_allreduce_rows_note_the_checks_cost(self):
        results = fixture()
        for rnd, ratio in zip(results["allreduce"]["devmesh"], (0.96, 0.99)):
            rnd["dp/1024"]["checked_over_unchecked"] = ratio
        # One round without it: no note for that row.
        results["allreduce"]["devmesh"][0]["dp/1048576"][
            "checked_over_unchecked"] = 1.0
        small, large = [r for r in report.build_rows(results)
                        if r["section"] == "allreduce"]
        self.assertEqual(small["note"],
                         "2 rounds; check on/off 0.975 (0.960-0.990)")
        self.assertEqual(large["note"], "2 rounds; 4 WRONG elements")
        self.assertTrue(any(line.startswith("check on/off: ")
                            for line in report.notes(results, {})))
        # devmesh / Open MPI, paired by round: 0.5/0.25, 0.25/0.5.
        self.assertEqual(small["mpi"], 0.375)
        self.assertEqual(small["ratio_mpi"], 1.25)
        self.assertEqual(large["ratio_mpi"], 0.625)  # mean of 0.25, 1.0
        self.assertIsNotNone(large["ci95_mpi"])
        # bound: max(24, 32) GB/s / (4 members x 2) = 4 GB/s at every size.
        self.assertEqual(small["bound"], 4.0)
        self.assertEqual(large["bound"], 4.0)
        self.assertEqual(large["ratio_bound"], 0.375)  # median 1.5 / 4

    def test_allreduce_without_mpi_or_bound(self):
        results = fixture()
        del results["allreduce"]["mpi"], results["bound"]
        rows = [r for r in report.build_rows(results)
                if r["section"] == "allreduce"]
        self.assertEqual([(r["mpi"], r["ratio_mpi"], r["bound"])
                          for r in rows], [(None, None, None)] * 2)

    def test_one_round_interval_is_na(self):
        results = fixture()
        for side in ("devmesh", "torch", "mpi"):
            results["allreduce"][side] = results["allreduce"][side][:1]
        results = {"allreduce": results["allreduce"],
                   "bound": results["bound"]}
        rows = report.build_rows(results)
        small = rows[0]
        self.assertEqual((small["ci95"], small["ci95_mpi"]), (None, None))
        table = report.format_table("t", rows[:1])
        self.assertEqual(
            table.splitlines()[2].split(),
            ["allreduce", "dp", "1", "KiB", "busbw", "GB/s", "0.5", "1",
             "0.5", "n/a", "0.25", "2", "n/a", "4", "0.125", "higher", "1",
             "rounds"])

    def test_collective_rows(self):
        rows = [r for r in report.build_rows(fixture())
                if r["section"] == "collectives"]
        self.assertEqual(len(rows), 1)
        r = rows[0]
        self.assertEqual(r["name"], "all_gather tp 1 MiB busbw")
        self.assertEqual((r["devmesh"], r["torch"], r["ratio"]),
                         (4.5, 1.5, 3.0))
        self.assertEqual(r["note"], "2 rounds, devmesh shm")
        self.assertNotIn("mpi", r)

    def test_notes(self):
        meta = {"mpirun": "mpirun -np 4 --mca btl self,vader",
                "mpi_version": "mpirun (Open MPI) 4.1.4", "cpus": 2}
        lines = report.notes(fixture(), meta)
        self.assertTrue(lines[0].startswith(
            "MPI: mpirun (Open MPI) 4.1.4, mpirun -np 4 --mca btl self,vader"))
        self.assertIn("copy 24 / add 32 GB/s", lines[1])
        self.assertIn("(4 members x 2)", lines[2])
        self.assertIn("n/a with one round", lines[3])
        unavailable = fixture()
        unavailable["allreduce"]["mpi_unavailable"] = "n/a (no mpicc build)"
        unavailable["bound"] = {"unavailable": "n/a (no membw build)"}
        self.assertEqual(report.notes(unavailable, {})[:2],
                         ["MPI: n/a (no mpicc build)",
                          "bound: n/a (no membw build)"])

    def test_layout_memory_store_rows(self):
        rows = by_name(report.build_rows(fixture()))
        self.assertEqual(rows["slice @8 first"]["ratio"], 0.002)
        self.assertEqual(rows["slice @8 repeat"]["ratio"], 0.002)
        mem = rows["one mesh @1048576"]
        self.assertEqual((mem["devmesh"], mem["torch"]), (4096, 44000000))
        s = rows["set 4 clients 64 B"]
        self.assertEqual((s["unit"], s["better"], s["ratio"]),
                         ("ops/s", "higher", 1.5))
        r = rows["rendezvous 256 clients 0 B"]
        self.assertEqual((r["unit"], r["better"], r["ratio"]),
                         ("s", "lower", 0.25))

    def test_store_unavailable(self):
        rows = report.build_rows(
            {"store": {"unavailable": "n/a (store_ops --json_out not available)"}})
        self.assertEqual(len(rows), 1)
        self.assertEqual(rows[0]["devmesh"], None)
        self.assertEqual(rows[0]["note"],
                         "n/a (store_ops --json_out not available)")

    def test_table(self):
        results = fixture()
        for k in ("startup", "allreduce", "memory", "collectives", "bound"):
            del results[k]
        results["store"] = {"unavailable": "n/a"}
        blank = " " * 43  # the +-95%, MPI, dm/MPI, +-95%, bound, dm/bd columns
        self.assertEqual(
            report.format_table("t", report.build_rows(results), ["a note"]),
            "# t\n"
            "section  row              unit  devmesh    PyTorch  dm/PT  +-95%"
            "  MPI  dm/MPI  +-95%  bound  dm/bd  better  note\n"
            "layout   slice @8 first   ns        200  1.000e+05  0.002"
            + blank + "lower\n"
            "layout   slice @8 repeat  ns        100  5.000e+04  0.002"
            + blank + "lower\n"
            "store    store_ops                  n/a        n/a    n/a"
            + blank + "higher  n/a\n"
            "# a note\n")

    @unittest.skipUnless(shutil.which("gnuplot"), "gnuplot not installed "
                         "(tools/install.sh installs it)")
    def test_plot_is_a_png(self):
        d = tempfile.mkdtemp()
        try:
            png = os.path.join(d, "p.png")
            report.write_plot(report.build_rows(fixture()), png, "test")
            with open(png, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        finally:
            shutil.rmtree(d)

    def test_plot_panels_only_what_was_measured(self):
        rows = report.build_rows(fixture())
        self.assertEqual(report.plot_panels(rows),
                         ["allreduce", "layout", "bars", "store"])
        # --sections=bound,allreduce,collectives (or --short without layout
        # and store): no layout or store panel, so no gnuplot "empty y range".
        measured = [r for r in rows
                    if r["section"] in ("allreduce", "collectives")]
        self.assertEqual(report.plot_panels(measured), ["allreduce", "bars"])
        # Rows without values (a section that did not run) draw nothing.
        not_run = [r for r in rows if r["section"] == "store"]
        for r in not_run:
            r["ratio"] = None
        self.assertEqual(report.plot_panels(measured + not_run),
                         ["allreduce", "bars"])
        self.assertEqual(report.plot_panels(not_run), [])

    @unittest.skipUnless(shutil.which("gnuplot"), "gnuplot not installed "
                         "(tools/install.sh installs it)")
    def test_plot_of_some_sections_has_no_empty_panel(self):
        rows = [r for r in report.build_rows(fixture())
                if r["section"] in ("allreduce", "collectives")]
        d = tempfile.mkdtemp()
        try:
            png = os.path.join(d, "p.png")
            err = os.path.join(d, "err")
            # gnuplot's warnings go to the stderr of this process.
            saved = os.dup(2)
            with open(err, "w") as f:
                os.dup2(f.fileno(), 2)
                try:
                    panels = report.write_plot(rows, png, "test")
                finally:
                    os.dup2(saved, 2)
                    os.close(saved)
            self.assertEqual(panels, ["allreduce", "bars"])
            with open(png, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
            with open(err) as f:
                self.assertNotIn("empty y range", f.read())
            # Nothing measured: no PNG.
            os.remove(png)
            self.assertEqual(report.write_plot([], png, "test"), [])
            self.assertFalse(os.path.exists(png))
        finally:
            shutil.rmtree(d)


if __name__ == "__main__":
    unittest.main()
