"""``offsetlake doctor``: which engines and connectors this machine can run, and why not.

Rules:
- One line per check: ``ok`` or ``--`` (missing), what it is, and the reason or the version.
  Nothing is started (no JVM, no Spark session): Java is asked for ``-version``, Python
  packages for their installed version, the JVM bundles for their cache (``jvm_deps.jars``).
- Exit 0 whatever is missing (a report, not a gate). ``--fetch`` fetches the missing JVM bundles
  with Maven first (a failed fetch is its one line, still exit 0).
"""

from __future__ import annotations

import argparse
import shutil
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as dist_version
from typing import Any

from pipelines.errors import JavaNotFoundError

#: Python packages: (distribution, what it enables)
PYTHON_PACKAGES = (
    ("pyspark", "Spark (batch and stream jobs)"),
    ("deltalake", "delta.engine: rust (delta-rs)"),
    ("delta-spark", "delta.engine: spark (Delta's Python API; needs the delta-spark jars)"),
    ("confluent-kafka", "kafka.engine: python, capture, end offsets"),
    ("duckdb", "offsetlake sql without a JVM"),
    ("apache-airflow", "the Airflow DAGs"),
    ("great-expectations", "offsetlake dq"),
)
#: JVM bundles: what each enables
BUNDLES = {
    "delta-spark": "delta.engine: spark",
    "spark-sql-kafka": "kafka.engine: jvm (Spark's Kafka source)",
    "kafka-3.9": "a real Kafka 3.9 broker on loopback (tests)",
    "kafka-4": "a real Kafka 4 broker on loopback (tests)",
}

#: each engine or connector: the checks above it needs
ENGINES = {
    "delta.engine: rust": ("java", "pyspark", "deltalake"),
    "delta.engine: spark": ("java", "pyspark", "delta-spark", "jars delta-spark"),
    "kafka.engine: python": ("java", "pyspark", "confluent-kafka"),
    "kafka.engine: jvm": ("java", "pyspark", "jars spark-sql-kafka"),
    "offsetlake sql (duckdb)": ("duckdb", "deltalake"),
}


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "doctor",
        help="say which engines and connectors this machine can run, and why not",
        description=(
            "Check Java, Maven, the Python packages and the JVM bundles (jars fetched by the project) "
            "behind each engine and connector. Always exits 0.\n"
            "examples:\n"
            "  offsetlake doctor\n"
            "  offsetlake doctor --fetch      fetch the missing JVM bundles with mvn first"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--fetch", action="store_true", help="fetch the missing JVM bundles with Maven first")
    p.set_defaults(func=run)


def _line(ok: bool, what: str, detail: str) -> None:
    print(f"{'ok' if ok else '--'}  {what:<24} {detail}")


def _java() -> tuple[bool, str]:
    from pipelines.runtime.spark_session import check_java

    try:
        return True, check_java()
    except JavaNotFoundError as exc:
        return False, str(exc)


def _python_package(dist: str) -> tuple[bool, str]:
    try:
        return True, dist_version(dist)
    except PackageNotFoundError:
        return False, f"not installed (pip install {dist})"


def _bundle(bundle: str, fetch: bool) -> tuple[bool, str]:
    from pipelines.runtime import jvm_deps

    coords = ", ".join(jvm_deps.coordinates(bundle))
    if jvm_deps.jars(bundle) is None and fetch:
        try:
            jvm_deps.fetch(bundle)
        except jvm_deps.JvmDepsUnavailable as exc:
            return False, f"{coords}: {exc}"
    have = jvm_deps.jars(bundle)
    if have is not None:
        return True, f"{coords}: cached ({len(have)} jars in {jvm_deps.bundle_dir(bundle)})"
    why = jvm_deps.mvn_missing_reason()
    return False, f"{coords}: not cached; " + (
        f"cannot fetch: {why}" if why else "fetchable with mvn (offsetlake doctor --fetch)"
    )


def run(args: argparse.Namespace) -> int:
    java_ok, java = _java()
    _line(java_ok, "java", java)
    mvn = shutil.which("mvn")
    _line(mvn is not None, "mvn", mvn or "not on PATH: the JVM bundles cannot be fetched (apt-get install maven)")
    have: dict[str, bool] = {"java": java_ok}
    for dist, enables in PYTHON_PACKAGES:
        ok, detail = _python_package(dist)
        have[dist] = ok
        _line(ok, dist, f"{detail} — {enables}")
    for bundle, enables in BUNDLES.items():
        ok, detail = _bundle(bundle, args.fetch)
        have[f"jars {bundle}"] = ok
        _line(ok, f"jars {bundle}", f"{detail} — {enables}")
    print()
    for engine, needs in ENGINES.items():
        lacking = [n for n in needs if not have.get(n)]
        print(f"{engine:<24} {'available' if not lacking else 'unavailable: needs ' + ', '.join(lacking)}")
    return 0
