"""The peer benchmark's rows, table, JSON and plot, from the raw results
that peer_bench.py collects. No third-party imports (tested with the
system python3 by tests/tools:peer_bench_report_test).

A row: {"section", "name", "unit", "better": "lower"|"higher", "devmesh",
"torch", "ratio": devmesh / torch, "ci95": half width of the ratio's 95%
interval or None, "note"}. Figures that a side does not have are None and
print as "n/a".
"""
import json
import os
import subprocess
import tempfile

import stats

SECTIONS = ("startup", "allreduce", "layout", "memory", "store")


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
    back): each side's median, and the paired ratio with its interval."""
    ratio, ci = stats.paired_ratio(dm, tv)
    return _row(section, name, unit, better, stats.median(dm),
                stats.median(tv), ratio, ci, note)


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


def allreduce_rows(allreduce):
    dm_rounds, tv_rounds = allreduce["devmesh"], allreduce["torch"]
    n = min(len(dm_rounds), len(tv_rounds))
    keys = [k for k in dm_rounds[0] if all(k in r for r in tv_rounds[:n])]
    keys.sort(key=lambda k: (int(k.split("/")[1]), k.split("/")[0]))
    rows = []
    for k in keys:
        dim, nbytes = k.split("/")
        dm = [r[k]["busbw"] for r in dm_rounds[:n]]
        tv = [r[k]["busbw"] for r in tv_rounds[:n]]
        wrong = sum(r[k]["wrong"] for r in dm_rounds[:n] + tv_rounds[:n])
        note = "%d rounds" % n + ("; %d WRONG elements" % wrong if wrong else "")
        row = _paired_rows("allreduce", "%s %s busbw" % (
            dim, _human_bytes(int(nbytes))), "GB/s", "higher", dm, tv, note)
        row["dim"], row["bytes"] = dim, int(nbytes)
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
        rows.append(_row("store", name, "ops/s" if rate else "s",
                         "higher" if rate else "lower", r.get(field),
                         t.get(field) if t else None))
    return rows


def build_rows(results):
    rows = []
    if results.get("startup"):
        rows += startup_rows(results["startup"])
    if results.get("allreduce"):
        rows += allreduce_rows(results["allreduce"])
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


def format_table(title, rows):
    head = ("section", "row", "unit", "devmesh", "PyTorch", "dm/PT", "+-95%",
            "better", "note")
    lines = [[r["section"], r["name"], r["unit"], _fmt(r["devmesh"]),
              _fmt(r["torch"]), _fmt(r["ratio"]),
              "" if r["ci95"] is None else _fmt(r["ci95"]), r["better"],
              r["note"]] for r in rows]
    widths = [max([len(h)] + [len(l[i]) for l in lines])
              for i, h in enumerate(head)]
    out = ["# " + title]
    for cells in [list(head)] + lines:
        text = "  ".join(
            c.ljust(w) if i in (0, 1, 2, 7, 8) else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths)))
        out.append(text.rstrip())
    return "\n".join(out) + "\n"


def write_plot(rows, png, title):
    """Three panels of devmesh/PyTorch: all-reduce busbw against size (per
    dim, with the 95% interval; above 1 is devmesh faster), layout
    operations' first-call time against world size (per operation; below 1
    is devmesh faster), start-up / memory rows and store rows as bars (log
    scale; "better" says which way)."""
    data = tempfile.mkdtemp()
    try:
        ar = [r for r in rows if r["section"] == "allreduce" and r["ratio"]]
        dims = sorted({r["dim"] for r in ar})
        for d in dims:
            with open(os.path.join(data, "ar_%s.dat" % d), "w") as f:
                for r in ar:
                    if r["dim"] == d:
                        f.write("%d %g %g\n" % (r["bytes"], r["ratio"],
                                                r["ci95"] or 0))
        lay = [r for r in rows if r["section"] == "layout" and r["ratio"]
               and r["kind"] == "first"]
        ops = sorted({r["op"] for r in lay})
        for op in ops:
            with open(os.path.join(data, "lay_%s.dat" % op), "w") as f:
                for r in lay:
                    if r["op"] == op:
                        f.write("%d %g\n" % (r["world"], r["ratio"]))
        def write_bars(name, sections):
            bars = [r for r in rows if r["section"] in sections and r["ratio"]]
            with open(os.path.join(data, name), "w") as f:
                for i, r in enumerate(bars):
                    f.write('%d "%s (%s)" %g\n' % (
                        i, r["name"].replace('"', "'"), r["better"],
                        r["ratio"]))
            return bars
        bars = write_bars("bars.dat", ("startup", "memory"))
        store_bars = write_bars("store.dat", ("store",))
        plots = []
        ar_plot = ", ".join(
            "'%s/ar_%s.dat' using 1:2:3 with yerrorlines title 'dim %s'"
            % (data, d, d) for d in dims) or "1 notitle"
        lay_plot = ", ".join(
            "'%s/lay_%s.dat' using 1:2 with linespoints title '%s'"
            % (data, op, op) for op in ops) or "1 notitle"
        bar_plot = ("'%s/bars.dat' using 1:3:xtic(2) with boxes notitle"
                    % data) if bars else "1 notitle"
        store_plot = ("'%s/store.dat' using 1:3:xtic(2) with boxes notitle"
                      % data) if store_bars else "1 notitle"
        script = """
set terminal pngcairo size 1100,2100 font ',9' noenhanced
set output '%(png)s'
set multiplot layout 4,1 title '%(title)s'
set grid
set format y '%%g'
set logscale y 10
set title 'per-dim all-reduce: devmesh busbw / PyTorch busbw (above 1: devmesh faster; bars: 95%% interval)'
set xlabel 'message size (bytes)'
set logscale x 2
set format x '%%.0b%%B'
set key top left
plot %(ar)s, 1 with lines dashtype 2 lc 'black' notitle
set title 'layout operations, first call: devmesh time / PyTorch time (below 1: devmesh faster)'
set xlabel 'world size (ranks)'
set format x '2^%%L'
plot %(lay)s, 1 with lines dashtype 2 lc 'black' notitle
unset logscale x
set format x '%%g'
set title 'start-up and memory: devmesh / PyTorch (which way is better is in each label)'
set xlabel ''
set xtics rotate by -35 left
set style fill solid 0.5
set boxwidth 0.7
set bmargin 14
set rmargin 14
plot %(bar)s, 1 with lines dashtype 2 lc 'black' notitle
set title 'store (//bench:store_ops against PyTorch TCPStore): devmesh / PyTorch'
set xtics rotate by -60 left font ',7'
plot %(store)s, 1 with lines dashtype 2 lc 'black' notitle
unset multiplot
""" % {"png": png, "title": title.replace("'", ""), "ar": ar_plot,
       "lay": lay_plot, "bar": bar_plot, "store": store_plot}
        subprocess.run(["gnuplot"], input=script, text=True, check=True,
                       timeout=60)
    finally:
        for name in os.listdir(data):
            os.remove(os.path.join(data, name))
        os.rmdir(data)


def write_json(path, meta, results, rows):
    with open(path, "w") as f:
        json.dump({"meta": meta, "rows": rows, "results": results}, f,
                  indent=1, sort_keys=True)
        f.write("\n")
