"""JVM dependencies fetched by the project: one pom per bundle, one cache, one place for coordinates.

Rules:
- Each bundle is a small Maven pom beside this file (``poms/<bundle>.xml``); its ``<dependency>``
  elements are the only place the coordinates are written. ``coordinates(bundle)`` reads them (for
  Spark's ``--packages`` on clusters that resolve from Maven themselves).
- ``fetch(bundle)`` runs ``mvn dependency:copy-dependencies`` (runtime scope) into
  ``<cache>/deps/<bundle>-<digest>/`` and writes ``COMPLETE`` last, so a killed fetch is redone,
  never half used. The digest hashes the pom, so a changed pom fetches anew. Jars are never
  committed.
- ``jars(bundle)`` returns the cached jars without running anything (``None`` when absent).
- Every failure is a ``JvmDepsUnavailable`` with one line saying why (no ``mvn``, no network to
  Maven Central: the tail of Maven's own error), never a hang: Maven runs with a time limit.
- The cache is ``$OFFSETLAKE_JVM_CACHE`` or ``<XDG_CACHE_HOME or ~/.cache>/offsetlake/jvm``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

POMS = Path(__file__).resolve().parent / "poms"
_NS = {"m": "http://maven.apache.org/POM/4.0.0"}
#: the plugin that copies a pom's runtime classpath into a folder (pinned: Maven 3.8's default is old)
COPY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies"
FETCH_TIMEOUT_S = 900


class JvmDepsUnavailable(RuntimeError):
    """A bundle's jars cannot be had on this machine; the message is one line saying why."""


def bundles() -> list[str]:
    return sorted(p.stem for p in POMS.glob("*.xml"))


def pom(bundle: str) -> Path:
    path = POMS / f"{bundle}.xml"
    if not path.is_file():
        raise JvmDepsUnavailable(f"no JVM bundle named {bundle!r} (known: {', '.join(bundles())})")
    return path


def coordinates(bundle: str) -> list[str]:
    """``group:artifact:version`` of each dependency the bundle's pom names."""
    root = ET.parse(pom(bundle)).getroot()
    out = []
    for dep in root.iterfind("m:dependencies/m:dependency", _NS):
        parts = [
            dep.findtext(f"m:{k}", default="", namespaces=_NS).strip() for k in ("groupId", "artifactId", "version")
        ]
        out.append(":".join(parts))
    return out


def version(bundle: str) -> str:
    """The version of the bundle's first dependency (the one the bundle is named for)."""
    return coordinates(bundle)[0].rsplit(":", 1)[1]


def cache_root() -> Path:
    explicit = os.environ.get("OFFSETLAKE_JVM_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "offsetlake" / "jvm"


def bundle_dir(bundle: str) -> Path:
    digest = hashlib.sha256(pom(bundle).read_bytes()).hexdigest()[:12]
    return cache_root() / "deps" / f"{bundle}-{version(bundle)}-{digest}"


def jars(bundle: str) -> list[Path] | None:
    """The bundle's cached jars, or None when it was never fetched whole."""
    folder = bundle_dir(bundle)
    if not (folder / "COMPLETE").is_file():
        return None
    return sorted(folder.glob("*.jar"))


def mvn_missing_reason() -> str | None:
    """Why Maven cannot run here, or None when it can."""
    if shutil.which("mvn") is None:
        return "mvn (Apache Maven) is not on PATH"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "Java was not found (no java on PATH, no JAVA_HOME)"
    return None


def fetch(bundle: str, *, timeout_s: float = FETCH_TIMEOUT_S) -> list[Path]:
    """The bundle's jars, fetched with Maven into the cache the first time.

    Raises:
        JvmDepsUnavailable: Maven is missing, failed or timed out (one line, Maven's own reason).
    """
    have = jars(bundle)
    if have is not None:
        return have
    reason = mvn_missing_reason()
    if reason:
        raise JvmDepsUnavailable(f"cannot fetch the {bundle} jars: {reason}")
    folder = bundle_dir(bundle)
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        shutil.copyfile(pom(bundle), work / "pom.xml")
        cmd = ["mvn", "-q", "-B", "-f", str(work / "pom.xml"), COPY_PLUGIN, "-DincludeScope=runtime"]
        cmd.append(f"-DoutputDirectory={work / 'jars'}")
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired as exc:
            raise JvmDepsUnavailable(f"fetching the {bundle} jars with mvn took over {timeout_s:.0f} s") from exc
        if done.returncode != 0:
            raise JvmDepsUnavailable(
                f"mvn could not fetch the {bundle} jars: {_maven_reason(done.stdout + done.stderr)}"
            )
        got = work / "jars"
        (got / "COMPLETE").write_text("\n".join(coordinates(bundle)) + "\n")
        if folder.exists():  # another process finished first: keep its copy
            return jars(bundle) or []
        got.rename(folder)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return jars(bundle) or []


def classpath(bundle: str) -> str:
    """The bundle's jars as one Java classpath (fetched first when needed)."""
    return os.pathsep.join(str(p) for p in fetch(bundle))


def _maven_reason(output: str) -> str:
    errors = [line.removeprefix("[ERROR]").strip() for line in output.splitlines() if line.startswith("[ERROR]")]
    errors = [e for e in errors if e and not e.startswith(("->", "To see", "Re-run", "For more", "[Help"))]
    text = errors[0] if errors else (output.strip().splitlines() or ["no output"])[-1]
    return text if len(text) <= 300 else text[:297] + "..."


def main(argv: list[str] | None = None) -> int:
    """``python -m pipelines.runtime.jvm_deps fetch <bundle>...``: fetch bundles ahead (CI's first step).

    Exit 0 with one line per bundle (its jar count and folder), 2 with one line when a bundle
    cannot be had.
    """
    import sys

    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] != "fetch":
        print("usage: python -m pipelines.runtime.jvm_deps fetch <bundle>... (known: " + ", ".join(bundles()) + ")")
        return 2
    for bundle in args[1:] or bundles():
        try:
            got = fetch(bundle)
        except JvmDepsUnavailable as exc:
            print(f"jvm_deps: {exc}", file=sys.stderr)
            return 2
        print(f"{bundle}: {len(got)} jars in {bundle_dir(bundle)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
