"""The peer benchmark's rows, table, JSON and plot, from the raw results
that peer_bench.py collects. No third-party imports (tested with the
system python3 by tests/tools:peer_bench_report_test).

A row: {"section", "name", "unit", "better": "lower"|"higher", "devmesh",
"torch", "ratio": devmesh / torch, "ci95": half width of the ratio's 95%
interval or None, "paired": whether ratio comes from paired rounds, "note"}.
All-reduce rows add "mpi", "ratio_mpi", "ci95_mpi" (devmesh / Open MPI,
paired by round as devmesh / PyTorch is), "bound" (the busbw the measured
memory bandwidth allows, see bound_busbw) and "ratio_bound". Figures that a
side does not have are None and print as "n/a"; a paired ratio from fewer
than two rounds has no interval and prints "n/a" there.
"""
import json
import os
import subprocess
import tempfile

import stats

SECTIONS = ("startup", "allreduce", "collectives", "layout", "memory",
            "store")

# The bound model for the 2x2 per-dim all-reduce (both groups of a dim at
# once, so 4 members): whatever the algorithm, each member reads its input
# once and writes its output once, 2 x bytes of memory traffic per member
# (STREAM's accounting: bytes read + bytes written; what passes between the
# members through buffers small enough to stay in the caches costs no memory
# traffic), and the 4 members share the bandwidth measured on every core at
# once. A 2-member all-reduce's busbw is bytes / time, so bound busbw =
# bandwidth / (4 members x 2): the most any 2-member all-reduce could reach.
BOUND_MEMBERS = 4
BOUND_TRAFFIC_PER_BYTE = 2


def _ratio(d, t):
    return d / t if d is not None and t is not None and t > 0 else None


def _human_bytes(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return "%d %s" % (n // size, unit)
    return "%d B" % n


def _row(section, name, unit, better, d, t, ratio=None, ci95=None, note=""):
    return {"section": section, "name": name, "unit": unit, "better": better,
            "devmesh": d, "torch": t,
            "ratio": ratio if ratio is not None else _ratio(d, t),
            "ci95": ci95, "note": note}


def _paired_rows(section, name, unit, better, dm, tv, note=""):
    """A row from repeated, paired figures (dm[i] and tv[i] ran back to
    back): each side's median, and the paired ratio with its interval (None
    from fewer than two pairs)."""
    ratio, ci = stats.paired_ratio(dm, tv)
    row = _row(section, name, unit, better, stats.median(dm),
               stats.median(tv), ratio, ci if len(dm) >= 2 else None, note)
    row["paired"] = True
    return row


def startup_rows(startup):
    rows = []
    for shape, sides in startup.items():
        dm, tv = sides["devmesh"], sides["torch"]
        n = min(len(dm), len(tv))
        rows.append(_paired_rows(
            "startup", "%s launch to usable" % shape, "ms", "lower",
            [r["launch_ms"] for r in dm[:n]], [r["launch_ms"] for r in tv[:n]],
            "%d launches each" % n))
        rows.append(_paired_rows(
            "startup", "%s init to usable" % shape, "ms", "lower",
            [r["init_ms"] for r in dm[:n]], [r["init_ms"] for r in tv[:n]],
            "devmesh from main(), PyTorch after its imports"))
        rows.append(_row("startup", "%s communicators/rank" % shape, "count",
                         "lower", dm[0]["communicators"],
                         tv[0]["communicators"]))
        rows.append(_row("startup", "%s store round trips/rank" % shape,
                         "count", "lower", dm[0]["store_round_trips"],
                         tv[0]["store_round_trips"],
                         note="" if tv[0]["store_round_trips"] is not None else
                         "PyTorch's happen in C++, not counted"))
    return rows


def bound_busbw(bound):
    """The busbw (GB/s) that memory bandwidth allows the 2x2 per-dim
    all-reduce at any size (BOUND_MEMBERS, BOUND_TRAFFIC_PER_BYTE): the
    larger of copy and add on every core at once, so that it is an upper
    bound. None without a measurement. Below the cache sizes the buffers
    need not reach memory and the bound does not bind."""
    both = (bound or {}).get("all_cores")
    if not both:
        return None
    bw = max(both["copy_gbps"], both["add_gbps"])
    return bw / (BOUND_MEMBERS * BOUND_TRAFFIC_PER_BYTE)


def allreduce_rows(allreduce, bound=None):
    dm_rounds, tv_rounds = allreduce["devmesh"], allreduce["torch"]
    mpi_rounds = allreduce.get("mpi") or []
    n = min(len(dm_rounds), len(tv_rounds))
    keys = [k for k in dm_rounds[0] if all(k in r for r in tv_rounds[:n])]
    keys.sort(key=lambda k: (int(k.split("/")[1]), k.split("/")[0]))
    limit = bound_busbw(bound)
    rows = []
    for k in keys:
        dim, nbytes = k.split("/")
        dm = [r[k]["busbw"] for r in dm_rounds[:n]]
        tv = [r[k]["busbw"] for r in tv_rounds[:n]]
        have_mpi = len(mpi_rounds) >= n and all(k in r for r in mpi_rounds[:n])
        mp = [r[k]["busbw"] for r in mpi_rounds[:n]] if have_mpi else []
        wrong = sum(r[k]["wrong"] for r in dm_rounds[:n] + tv_rounds[:n] +
                    (mpi_rounds[:n] if have_mpi else []))
        backend = dm_rounds[0][k].get("backend")
        note = "%d rounds" % n + (", devmesh %s" % backend if backend else "")
        note += "; %d WRONG elements" % wrong if wrong else ""
        # The per-call check's cost, measured in the same devmesh runs:
        # the mesh group (checked) over a raw group without the check.
        check = [r[k].get("checked_over_unchecked") for r in dm_rounds[:n]]
        if check and all(c is not None for c in check):
            note += "; check on/off %.3f (%.3f-%.3f)" % (
                stats.median(check), min(check), max(check))
        row = _paired_rows("allreduce", "%s %s busbw" % (
            dim, _human_bytes(int(nbytes))), "GB/s", "higher", dm, tv, note)
        row["dim"], row["bytes"] = dim, int(nbytes)
        ratio, ci = stats.paired_ratio(dm, mp) if mp else (None, None)
        row["mpi"] = stats.median(mp) if mp else None
        row["ratio_mpi"] = ratio
        row["ci95_mpi"] = ci if len(mp) >= 2 else None
        row["bound"] = limit
        row["ratio_bound"] = _ratio(row["devmesh"], limit)
        rows.append(row)
    return rows


def collective_rows(collectives):
    """The collective rows' busbw (all-gather, reduce-scatter, reduce,
    gather, scatter, all-to-all-v), devmesh against PyTorch, paired by
    round."""
    dm_rounds, tv_rounds = collectives["devmesh"], collectives["torch"]
    n = min(len(dm_rounds), len(tv_rounds))
    if n == 0:
        return []
    keys = [k for k in dm_rounds[0] if all(k in r for r in tv_rounds[:n])]
    keys.sort(key=lambda k: (k.split("/")[0], int(k.split("/")[2]),
                             k.split("/")[1]))
    rows = []
    for k in keys:
        op, dim, nbytes = k.split("/")
        dm = [r[k]["busbw"] for r in dm_rounds[:n]]
        tv = [r[k]["busbw"] for r in tv_rounds[:n]]
        wrong = sum(r[k]["wrong"] for r in dm_rounds[:n] + tv_rounds[:n])
        backend = dm_rounds[0][k].get("backend")
        note = "%d rounds" % n + (", devmesh %s" % backend if backend else "")
        note += "; %d WRONG elements" % wrong if wrong else ""
        row = _paired_rows("collectives", "%s %s %s busbw" % (
            op, dim, _human_bytes(int(nbytes))), "GB/s", "higher", dm, tv,
            note)
        row["op"], row["dim"], row["bytes"] = op, dim, int(nbytes)
        rows.append(row)
    return rows


def layout_rows(layout):
    torch = {(r["op"], r["world"]): r for r in layout["torch"]}
    rows = []
    for kind in ("first", "repeat"):
        for r in layout["devmesh"]:
            t = torch.get((r["op"], r["world"]))
            row = _row("layout", "%s @%d %s" % (r["op"], r["world"], kind),
                       "ns", "lower", r[kind + "_ns"],
                       t[kind + "_ns"] if t else None)
            row["op"], row["world"], row["kind"] = r["op"], r["world"], kind
            rows.append(row)
    return rows


def memory_rows(memory):
    """The larger of heap growth (glibc mallinfo2; exact, but PyTorch's
    Python objects live in pymalloc arenas that it does not see) and RSS
    growth (sees everything, page-grained) from building one mesh, with the
    default allocators on both sides: an upper bound for each side."""
    def figure(m):
        return max(m["heap_bytes"], m["rss_bytes"]) if m else None
    dm, tv = memory.get("devmesh"), memory.get("torch")
    world = (dm or tv or {}).get("world", 0)
    note = "max(heap, RSS) growth; heap %s / %s, RSS %s / %s" % (
        dm and dm["heap_bytes"], tv and tv["heap_bytes"],
        dm and dm["rss_bytes"], tv and tv["rss_bytes"])
    return [_row("memory", "one mesh @%d" % world, "bytes", "lower",
                 figure(dm), figure(tv), note=note)]


def store_rows(store):
    if "rows" not in store:
        return [_row("store", "store_ops", "", "higher", None, None,
                     note=store.get("unavailable", "not run"))]
    torch = {(r["op"], r["clients"], r["value_bytes"]): r
             for r in store["rows"] if r["server"] == "torch"}
    rows = []
    for r in store["rows"]:
        if r["server"] != "devmesh":
            continue
        t = torch.get((r["op"], r["clients"], r["value_bytes"]))
        rate = r["op"] != "rendezvous"
        field = "ops_per_s" if rate else "seconds"
        name = "%s %d clients %s" % (r["op"], r["clients"],
                                    _human_bytes(r["value_bytes"]))
        if r.get("protocol", "devmesh") != "devmesh":
            name += " (%s protocol)" % r["protocol"]
        unit, better = ("ops/s", "higher") if rate else ("s", "lower")
        # store_ops runs each figure in rounds, one run per server each
        # round: pair them by round.
        dm_runs = r.get("runs") or []
        tv_runs = (t or {}).get("runs") or []
        pairs = [(d, v) for d, v in zip(dm_runs, tv_runs)
                 if d is not None and v is not None]
        if t and len(pairs) >= 2:
            rows.append(_paired_rows(
                "store", name, unit, better, [d for d, _ in pairs],
                [v for _, v in pairs], "%d rounds" % len(pairs)))
        else:
            rows.append(_row("store", name, unit, better, r.get(field),
                             t.get(field) if t else None))
    return rows


def build_rows(results):
    rows = []
    if results.get("startup"):
        rows += startup_rows(results["startup"])
    if results.get("allreduce"):
        rows += allreduce_rows(results["allreduce"], results.get("bound"))
    if results.get("collectives"):
        rows += collective_rows(results["collectives"])
    if results.get("layout"):
        rows += layout_rows(results["layout"])
    if results.get("memory"):
        rows += memory_rows(results["memory"])
    rows += store_rows(results.get("store", {}))
    return rows


def _fmt(x):
    if x is None:
        return "n/a"
    if isinstance(x, int):
        return str(x)
    if x == 0:
        return "0"
    if abs(x) >= 1e4 or abs(x) < 1e-3:
        return "%.3e" % x
    return "%.4g" % x


def notes(results, meta):
    """The lines under the table: what the MPI and bound columns are."""
    out = []
    ar = results.get("allreduce") or {}
    if meta.get("mpirun"):
        out.append("MPI: %s, %s, float32 sum, MPI_Comm_split per dim, "
                   "measured as allreduce_2d (tools/peer_bench/"
                   "mpi_allreduce.c); rank r on core r mod %d" % (
                       meta.get("mpi_version") or "Open MPI",
                       meta["mpirun"], meta.get("cpus", 2)))
    elif ar:
        out.append("MPI: " + ar.get("mpi_unavailable", "n/a"))
    bound = results.get("bound") or {}
    if bound.get("all_cores"):
        both, one = bound["all_cores"], bound.get("one_core") or {}
        out.append(
            "bound: memory bandwidth (tools/peer_bench/membw.c, STREAM "
            "accounting, best of %d passes over %d MiB arrays): copy %.3g / "
            "add %.3g GB/s with one process per core on %d cores at once, "
            "copy %s / add %s GB/s on one core" % (
                both["reps"], both["array_bytes"] >> 20, both["copy_gbps"],
                both["add_gbps"], both["procs"], _fmt(one.get("copy_gbps")),
                _fmt(one.get("add_gbps"))))
        out.append(
            "bound busbw = max(copy, add) on every core / (%d members x %d): "
            "both groups of a dim run at once (%d members share the "
            "bandwidth), any all-reduce reads each member's input and writes "
            "its output at least once (%d x bytes per member), and a 2-member "
            "all-reduce's busbw is bytes / time; the same at every size, "
            "binding only where buffers exceed the caches" % (
                BOUND_MEMBERS, BOUND_TRAFFIC_PER_BYTE, BOUND_MEMBERS,
                BOUND_TRAFFIC_PER_BYTE))
    elif bound:
        out.append("bound: " + bound.get("unavailable", "n/a"))
    if ar:
        out.append("+-95%: half width of the paired ratio's 95% bootstrap "
                   "interval over rounds (sides alternate first per round); "
                   "n/a with one round")
        out.append("check on/off: devmesh's busbw with the per-call check "
                   "(comm/call_check.h) over the same group kind's without "
                   "it (allreduce_2d --raw_call_check=false: the mesh group "
                   "against a raw one, run alternately in the same launch; "
                   "the mesh's guard is counted in it too), median (range) "
                   "over rounds; 1 = the check costs nothing")
    return out


def _fmt_ci(row, key):
    if row.get(key) is not None:
        return _fmt(row[key])
    return "n/a" if row.get("paired") else ""


def _fmt_opt(row, key):
    return _fmt(row[key]) if key in row else ""


def format_table(title, rows, note_lines=()):
    head = ("section", "row", "unit", "devmesh", "PyTorch", "dm/PT", "+-95%",
            "MPI", "dm/MPI", "+-95%", "bound", "dm/bd", "better", "note")
    left = (0, 1, 2, 12, 13)
    lines = [[r["section"], r["name"], r["unit"], _fmt(r["devmesh"]),
              _fmt(r["torch"]), _fmt(r["ratio"]), _fmt_ci(r, "ci95"),
              _fmt_opt(r, "mpi"), _fmt_opt(r, "ratio_mpi"),
              _fmt_ci(r, "ci95_mpi") if "mpi" in r else "",
              _fmt_opt(r, "bound"), _fmt_opt(r, "ratio_bound"), r["better"],
              r["note"]] for r in rows]
    widths = [max([len(h)] + [len(l[i]) for l in lines])
              for i, h in enumerate(head)]
    out = ["# " + title]
    for cells in [list(head)] + lines:
        text = "  ".join(
            c.ljust(w) if i in left else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths)))
        out.append(text.rstrip())
    out += ["# " + n for n in note_lines]
    return "\n".join(out) + "\n"


PANELS = ("allreduce", "layout", "bars", "store")


def _plot_data(rows):
    """The rows each panel draws, by panel name (PANELS); a panel whose list
    is empty was not measured (a --sections or --short run) and is left
    out of the plot."""
    return {
        "allreduce": [r for r in rows
                      if r["section"] == "allreduce" and r["ratio"]],
        "layout": [r for r in rows if r["section"] == "layout" and r["ratio"]
                   and r["kind"] == "first"],
        "bars": [r for r in rows if r["section"] in
                 ("startup", "memory", "collectives") and r["ratio"]],
        "store": [r for r in rows if r["section"] == "store" and r["ratio"]],
    }


def plot_panels(rows):
    """The panels write_plot draws for `rows`, in order: those with values."""
    data = _plot_data(rows)
    return [p for p in PANELS if data[p]]


def write_plot(rows, png, title):
    """Up to four panels, one per kind of figure that `rows` has values for
    (plot_panels): all-reduce busbw against size, devmesh/PyTorch and
    devmesh/Open MPI per dim (with the 95% intervals; above 1 is devmesh
    faster), devmesh/PyTorch of the layout
    operations' first-call time against world size (per operation; below 1
    is devmesh faster), start-up / memory / all-gather / reduce-scatter rows
    and store rows as bars (log scale; "better" says which way). Returns the
    panels drawn; with none, writes no PNG."""
    by_panel = _plot_data(rows)
    panels = plot_panels(rows)
    if not panels:
        return []
    data = tempfile.mkdtemp()
    try:
        ar = by_panel["allreduce"]
        dims = sorted({r["dim"] for r in ar})
        for d in dims:
            with open(os.path.join(data, "ar_%s.dat" % d), "w") as f:
                for r in ar:
                    if r["dim"] == d:
                        f.write("%d %g %g\n" % (r["bytes"], r["ratio"],
                                                r["ci95"] or 0))
            mpi = [r for r in ar if r["dim"] == d and r.get("ratio_mpi")]
            if mpi:
                with open(os.path.join(data, "mpi_%s.dat" % d), "w") as f:
                    for r in mpi:
                        f.write("%d %g %g\n" % (r["bytes"], r["ratio_mpi"],
                                                r["ci95_mpi"] or 0))
        lay = by_panel["layout"]
        ops = sorted({r["op"] for r in lay})
        for op in ops:
            with open(os.path.join(data, "lay_%s.dat" % op), "w") as f:
                for r in lay:
                    if r["op"] == op:
                        f.write("%d %g\n" % (r["world"], r["ratio"]))
        def write_bars(name, bars):
            with open(os.path.join(data, name), "w") as f:
                for i, r in enumerate(bars):
                    f.write('%d "%s (%s)" %g\n' % (
                        i, r["name"].replace('"', "'"), r["better"],
                        r["ratio"]))
        write_bars("bars.dat", by_panel["bars"])
        write_bars("store.dat", by_panel["store"])
        ar_plot = ", ".join(
            "'%s/ar_%s.dat' using 1:2:3 with yerrorlines title '%s / PyTorch'"
            % (data, d, d) for d in dims)
        mpi_plot = ", ".join(
            "'%s/mpi_%s.dat' using 1:2:3 with yerrorlines dashtype 3 "
            "title '%s / Open MPI'" % (data, d, d) for d in dims
            if os.path.exists(os.path.join(data, "mpi_%s.dat" % d)))
        ar_plot = ", ".join(p for p in (ar_plot, mpi_plot) if p)
        lay_plot = ", ".join(
            "'%s/lay_%s.dat' using 1:2 with linespoints title '%s'"
            % (data, op, op) for op in ops)
        one = ", 1 with lines dashtype 2 lc 'black' notitle"
        # Each panel sets everything it relies on, so that any subset of them
        # draws the same as in the full plot.
        script_of = {
            "allreduce": """
set title 'per-dim all-reduce: devmesh busbw / PyTorch and / Open MPI busbw (above 1: devmesh faster; bars: 95%% interval)'
set xlabel 'message size (bytes)'
set logscale x 2
set format x '%%.0b%%B'
set xtics norotate font ''
set bmargin
set rmargin
plot """ + ar_plot + one,
            "layout": """
set title 'layout operations, first call: devmesh time / PyTorch time (below 1: devmesh faster)'
set xlabel 'world size (ranks)'
set logscale x 2
set format x '2^%%L'
set xtics norotate font ''
set bmargin
set rmargin
plot """ + lay_plot + one,
            "bars": """
unset logscale x
set format x '%%g'
set title 'start-up, memory and collective busbw: devmesh / PyTorch (which way is better is in each label)'
set xlabel ''
set xtics rotate by -35 left font ''
set style fill solid 0.5
set boxwidth 0.7
set bmargin 14
set rmargin 14
plot '%(data)s/bars.dat' using 1:3:xtic(2) with boxes notitle""" + one,
            "store": """
unset logscale x
set format x '%%g'
set title 'store (//bench:store_ops against PyTorch TCPStore): devmesh / PyTorch'
set xlabel ''
set xtics rotate by -60 left font ',7'
set style fill solid 0.5
set boxwidth 0.7
set bmargin 14
set rmargin 14
plot '%(data)s/store.dat' using 1:3:xtic(2) with boxes notitle""" + one,
        }
        script = """
set terminal pngcairo size 1100,%(height)d font ',9' noenhanced
set output '%(png)s'
set multiplot layout %(n)d,1 title '%(title)s'
set grid
set format y '%%g'
set logscale y 10
set key top left
""" + "\n".join(script_of[p] for p in panels) + """
unset multiplot
"""
        script = script % {
            "png": png, "title": title.replace("'", ""), "data": data,
            "n": len(panels), "height": 100 + 500 * len(panels)}
        subprocess.run(["gnuplot"], input=script, text=True, check=True,
                       timeout=60)
    finally:
        for name in os.listdir(data):
            os.remove(os.path.join(data, name))
        os.rmdir(data)
    return panels


def write_json(path, meta, results, rows):
    with open(path, "w") as f:
        json.dump({"meta": meta, "rows": rows, "results": results}, f,
                  indent=1, sort_keys=True)
        f.write("\n")
