"""Decoder benchmark: the vectorised decoder (``pipelines.records.decode``) vs. the core codec.

Same run, same records, one process, CPU time (``time.process_time``); the contenders run in
interleaved rounds (the machine is shared: 2 cores, other engineers' jobs) and the best and the
median round are reported:

- core codec ``decode_record`` on the offset commits / on the group-metadata records / on all
  records (all = the commits' round time + the group metadata's round time);
- ``decode_offset_commits_arrow`` on the same offset commits, in Arrow batches of
  ``--batch-rows`` rows (Spark's ``spark.sql.execution.arrow.maxRecordsPerBatch`` default,
  10,000: what ``mapInArrow`` hands the decoder) and as one batch;
- ``decode_batch`` (fast path + core fallback + union batch) on the group-metadata records and
  on all records, same batches;
- with ``--before REV``: the same vectorised contenders from ``pipelines/records/decode.py`` at git
  revision REV (loaded from ``git show``), so before/after ratios come from one run.

With ``--spark``: on the same file, Spark local[2] (one SparkSession,
``pipelines.runtime.spark_session.build_spark``), wall time of a ``noop`` write of (a) an identity
``mapInArrow`` over the decoder's input columns, (b) a ``mapInArrow`` emitting union-shaped
batches without decoding (kind + positions, the other 29 columns null: the cost of handing the
union schema to the JVM), (c) ``decode_union`` and (d) the ``--before`` ``decode_union``,
interleaved rounds after one warm-up each; decode cost = decode pass - identity pass.

The input is raw records in Spark's Kafka source schema (default: the 1M-record file of
``bench/batch.py``); it is only read.

Usage:
    .venv/bin/python bench/decoder.py [--path FILE] [--rows N] [--rounds 5] [--batch-rows 10000]
        [--before REV] [--spark] [--spark-rounds 3] [--write-results]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.proc import tree_cpu_seconds  # noqa: E402

DEFAULT_PATH = Path("/tmp/offsetlake-bench/raw-1000000/part-00000000.parquet")
SCRATCH = Path("/tmp/offsetlake-bench-decoder")
SECTION = "## decoder (vectorised vs core codec)"
COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp"]


def load_before(rev: str) -> ModuleType:
    """``pipelines/records/decode.py`` at git revision ``rev`` as module ``offsetlake_decode_before``
    (written under SCRATCH, which is put on PYTHONPATH so Spark's Python workers import it)."""
    src = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{rev}:pipelines/records/decode.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    SCRATCH.mkdir(parents=True, exist_ok=True)
    path = SCRATCH / "offsetlake_decode_before.py"
    path.write_text(src)
    sys.path.insert(0, str(SCRATCH))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(SCRATCH), os.environ.get("PYTHONPATH")) if p)
    spec = importlib.util.spec_from_file_location("offsetlake_decode_before", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["offsetlake_decode_before"] = mod
    spec.loader.exec_module(mod)
    return mod


def cpu(fn: Callable[[], Any]) -> float:
    t = time.process_time()
    fn()
    return time.process_time() - t


def single_process(
    path: Path, rows: int | None, rounds: int, batch_rows: int, before: ModuleType | None
) -> dict[str, Any]:
    from coordinator_core import decode_record
    from pipelines.records import decode as after

    table = pq.read_table(path, columns=COLUMNS)
    if rows is not None:
        table = table.slice(0, rows)
    table = table.combine_chunks()
    rtype = pc.binary_slice(table.column("key"), 0, 2)
    is_gm = pc.equal(rtype, b"\x00\x02").fill_null(False)
    commits_t = table.filter(pc.invert(is_gm))
    gm_t = table.filter(is_gm)
    commit_pairs = list(zip(commits_t.column("key").to_pylist(), commits_t.column("value").to_pylist()))
    gm_pairs = list(zip(gm_t.column("key").to_pylist(), gm_t.column("value").to_pylist()))
    commits_kv = commits_t.select(["key", "value"]).combine_chunks()
    commit_batches = commits_kv.to_batches(max_chunksize=batch_rows)
    commit_one = commits_kv.to_batches()[0]
    gm_batches = gm_t.to_batches(max_chunksize=batch_rows)
    all_batches = table.to_batches(max_chunksize=batch_rows)
    n_all, n_c, n_g = table.num_rows, commits_t.num_rows, gm_t.num_rows

    def core(pairs: list[tuple[bytes, bytes | None]]) -> Callable[[], None]:
        def run() -> None:
            for k, v in pairs:
                decode_record(k, v)

        return run

    def fast(mod: ModuleType, batches: list[pa.RecordBatch]) -> Callable[[], None]:
        def run() -> None:
            for b in batches:
                mod.decode_offset_commits_arrow(b)

        return run

    def full(mod: ModuleType, batches: list[pa.RecordBatch]) -> Callable[[], None]:
        def run() -> None:
            for b in batches:
                mod.decode_batch(b)

        return run

    # every contender must agree on what it decodes (same rows, same result)
    for mod in [after] + ([before] if before else []):
        ok = mod.decode_offset_commits_arrow(commit_one)[1]
        assert int(ok.sum()) == n_c, "a well-formed commit left the fast path"
    ref = pa.Table.from_batches([x for b in all_batches for x in after.decode_batch(b)])
    if before is not None:
        old = pa.Table.from_batches([x for b in all_batches for x in before.decode_batch(b)])
        assert old.num_rows == ref.num_rows == n_all
        order = [("coordinator_partition", "ascending"), ("log_offset", "ascending")]
        assert old.sort_by(order).equals(ref.sort_by(order)), "before/after disagree"

    contenders: dict[str, tuple[int, Callable[[], None]]] = {
        "core_commits": (n_c, core(commit_pairs)),
        "core_gm": (n_g, core(gm_pairs)),
        "fast_batches": (n_c, fast(after, commit_batches)),
        "fast_one": (n_c, fast(after, [commit_one])),
        "full_gm": (n_g, full(after, gm_batches)),
        "full_all": (n_all, full(after, all_batches)),
    }
    if before is not None:
        contenders.update(
            {
                "before_fast_batches": (n_c, fast(before, commit_batches)),
                "before_fast_one": (n_c, fast(before, [commit_one])),
                "before_full_gm": (n_g, full(before, gm_batches)),
                "before_full_all": (n_all, full(before, all_batches)),
            }
        )
    times: dict[str, list[float]] = {name: [] for name in contenders}
    names = list(contenders)
    load = [os.getloadavg()[0]]
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            times[name].append(cpu(contenders[name][1]))
        load.append(os.getloadavg()[0])
        print(f"  round {r + 1}/{rounds} done (load {load[-1]:.1f})", flush=True)
    times["core_all"] = [a + b for a, b in zip(times["core_commits"], times["core_gm"])]
    counts = {name: contenders[name][0] for name in contenders} | {"core_all": n_all}
    return {
        "records": n_all,
        "commits": n_c,
        "group_metadata": n_g,
        "batch_rows": batch_rows,
        "rounds": rounds,
        "loadavg": (min(load), max(load)),
        "rps": {
            name: {"best": counts[name] / min(ts), "median": counts[name] / statistics.median(ts)}
            for name, ts in times.items()
        },
    }


def spark_passes(path: Path, rounds: int, before: ModuleType | None) -> dict[str, Any]:
    from pipelines.records.decode import INPUT_COLUMNS
    from pipelines.runtime.spark_session import build_spark
    from pipelines.stream.decode import decode_union, union_spark_schema

    spark = build_spark("bench-decoder", master="local[2]")
    raw = spark.read.parquet(str(path))
    cols = [c for c in INPUT_COLUMNS if c in raw.columns]
    inp = raw.select(*cols)

    def identity(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield from batches

    def union_floor(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Union-shaped output without decoding: kind + positions, every other column null."""
        import numpy as np

        from pipelines.records.decode import UNION_SCHEMA, _nulls, _position_arrays

        for b in batches:
            cols = {"kind": pa.array(np.zeros(b.num_rows, np.int8)), **_position_arrays(b, None)}
            yield pa.RecordBatch.from_arrays(
                [cols[f.name] if f.name in cols else _nulls(b.num_rows, f.type) for f in UNION_SCHEMA],
                schema=UNION_SCHEMA,
            )

    frames = {
        "identity": inp.mapInArrow(identity, inp.schema),
        "union_floor": inp.mapInArrow(union_floor, union_spark_schema()),
        "decode_union": decode_union(raw),
    }
    if before is not None:
        frames["before_decode_union"] = before.decode_union(raw)

    jvm_pid = spark.sparkContext._gateway.proc.pid  # type: ignore[attr-defined]

    def run(df: Any) -> tuple[float, float]:
        c = tree_cpu_seconds(jvm_pid)
        t = time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        return time.perf_counter() - t, tree_cpu_seconds(jvm_pid) - c

    for df in frames.values():  # warm-up: JIT, Python workers, file listing
        run(df)
    times: dict[str, list[float]] = {name: [] for name in frames}
    cpus: dict[str, list[float]] = {name: [] for name in frames}
    load = [os.getloadavg()[0]]
    names = list(frames)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            wall, cpu_s = run(frames[name])
            times[name].append(wall)
            cpus[name].append(cpu_s)
        load.append(os.getloadavg()[0])
        print(f"  spark round {r + 1}/{rounds} done (load {load[-1]:.1f})", flush=True)
    n = raw.count()
    spark.stop()
    return {
        "records": n,
        "rounds": rounds,
        "loadavg": (min(load), max(load)),
        "seconds": {name: {"best": min(ts), "median": statistics.median(ts)} for name, ts in times.items()},
        "cpu": {name: {"best": min(ts), "median": statistics.median(ts)} for name, ts in cpus.items()},
    }


def render(res: dict[str, Any], spark: dict[str, Any] | None, command: str, path: Path) -> str:
    rps = res["rps"]
    base_c, base_g, base_a = (rps[k]["best"] for k in ("core_commits", "core_gm", "core_all"))
    have_before = "before_fast_batches" in rps
    out = [
        SECTION,
        "",
        f"Command: `{command}`. Input: `{path}` ({res['records']:,} records: {res['commits']:,} offset commits, "
        f"{res['group_metadata']:,} group metadata), read only.",
        f"Machine: 2 cores shared with other engineers' jobs, Python {platform.python_version()}, "
        f"pyarrow {pa.__version__}; load average {res['loadavg'][0]:.1f}-{res['loadavg'][1]:.1f} during the "
        "single-process rounds.",
        "",
        f"Single process, CPU time, same records, {res['rounds']} interleaved rounds; ratio = best vs the core "
        f"codec's best on the same records. Batches of {res['batch_rows']:,} rows = what Spark's mapInArrow "
        "hands the decoder.",
        "",
        "| measurement | records | best rec/s | median rec/s | ratio (best) |",
        "|---|---:|---:|---:|---:|",
    ]

    def row(label: str, key: str, base: float, n: int) -> None:
        r = rps[key]
        out.append(f"| {label} | {n:,} | {r['best']:,.0f} | {r['median']:,.0f} | {r['best'] / base:.1f}× |")

    nc, ng, na = res["commits"], res["group_metadata"], res["records"]
    row("core codec `decode_record`, offset commits", "core_commits", base_c, nc)
    row(
        f"**`decode_offset_commits_arrow`**, same commits, {res['batch_rows']:,}-row batches",
        "fast_batches",
        base_c,
        nc,
    )
    row("`decode_offset_commits_arrow`, same commits, one batch", "fast_one", base_c, nc)
    if have_before:
        row(
            f"before: `decode_offset_commits_arrow`, {res['batch_rows']:,}-row batches",
            "before_fast_batches",
            base_c,
            nc,
        )
        row("before: `decode_offset_commits_arrow`, one batch", "before_fast_one", base_c, nc)
    row("core codec `decode_record`, group metadata", "core_gm", base_g, ng)
    row("`decode_batch`, same group metadata", "full_gm", base_g, ng)
    if have_before:
        row("before: `decode_batch`, same group metadata", "before_full_gm", base_g, ng)
    row("core codec `decode_record`, all records", "core_all", base_a, na)
    row("**`decode_batch`** (fast path + group metadata + union batch), all records", "full_all", base_a, na)
    if have_before:
        row("before: `decode_batch`, all records", "before_full_all", base_a, na)
    if spark is not None:
        out += spark_lines(spark)
    return "\n".join(out) + "\n"


def spark_lines(spark: dict[str, Any]) -> list[str]:
    """The Spark table of the section."""
    out: list[str] = []
    s, c = spark["seconds"], spark["cpu"]
    ident = s["identity"]["best"]
    out += [
        "",
        f"Spark local[2] (one SparkSession), {spark['records']:,} records, a `noop` write of each pass, "
        f"{spark['rounds']} interleaved rounds after a warm-up; wall time, and CPU time of the whole process "
        "tree (JVM + Python workers, from /proc: less sensitive to the other jobs than wall time); load "
        f"average {spark['loadavg'][0]:.1f}-{spark['loadavg'][1]:.1f}:",
        "",
        "| pass | wall best s | wall median s | wall best - identity s | CPU best s | CPU median s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    labels = {
        "identity": "identity `mapInArrow` (decoder's input columns)",
        "union_floor": "union-shaped output, nothing decoded (kind + positions, other columns null)",
        "decode_union": "**`decode_union`**",
        "before_decode_union": "before: `decode_union`",
    }
    for name, lab in labels.items():
        if name in s:
            out.append(
                f"| {lab} | {s[name]['best']:.2f} | {s[name]['median']:.2f} | {s[name]['best'] - ident:+.2f} "
                f"| {c[name]['best']:.2f} | {c[name]['median']:.2f} |"
            )
    return out


def render_spark(spark: dict[str, Any], command: str) -> str:
    return "\n".join([f"Command: `{command}`.", *spark_lines(spark)]) + "\n"


def write_section(text: str) -> None:
    path = REPO / "bench" / "RESULTS.md"
    doc = path.read_text() if path.exists() else "# Benchmark results\n"
    start = doc.find(SECTION)
    if start >= 0:
        nxt = doc.find("\n## ", start + len(SECTION))
        doc = doc[:start] + text + (doc[nxt + 1 :] if nxt >= 0 else "")
    else:
        doc = doc.rstrip("\n") + "\n\n" + text
    path.write_text(doc)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--path", type=Path, default=DEFAULT_PATH, help="raw-record Parquet file (read only)")
    ap.add_argument("--rows", type=int, default=None, help="only the first N records")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch-rows", type=int, default=10_000)
    ap.add_argument("--before", default=None, help="git revision of pipelines/records/decode.py to compare with")
    ap.add_argument("--spark", action="store_true", help="also time the Spark decode_union pass")
    ap.add_argument("--spark-rounds", type=int, default=3)
    ap.add_argument("--spark-only", action="store_true", help="only the Spark passes (prints them)")
    ap.add_argument("--write-results", action="store_true", help=f"write '{SECTION}' into bench/RESULTS.md")
    args = ap.parse_args()
    command = ".venv/bin/python bench/decoder.py " + " ".join(sys.argv[1:])
    before = load_before(args.before) if args.before else None
    if args.spark_only:
        spark_res = spark_passes(args.path, args.spark_rounds, before)
        print(render_spark(spark_res, command.strip()))
        return 0
    print("single process ...", flush=True)
    res = single_process(args.path, args.rows, args.rounds, args.batch_rows, before)
    spark = None
    if args.spark:
        print("spark ...", flush=True)
        spark = spark_passes(args.path, args.spark_rounds, before)
    text = render(res, spark, command.strip(), args.path)
    print(text)
    if args.write_results:
        write_section(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
