"""Secrets (issue 37, items 11 and 12): Azure account keys, SAS tokens, connection strings are
secrets (a literal is refused, ``config`` prints the reference), a credentials-provider class name
is not; Spark's redaction regex covers every secret key; and no secret setting reaches the JVM's
command line (a real Spark start, its ``/proc/<pid>/cmdline`` read)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SECRET = "hunter2-s3cr3t-value"
SAS = "sv=2022-11-02&ss=b&srt=co&sp=rl&se=2030-01-01T00:00:00Z&sig=abcDEF123%2Bxyz%3D"

SECRET_KEYS = [
    "spark.hadoop.fs.azure.account.key.myacct.dfs.core.windows.net",
    "spark.hadoop.fs.azure.account.key.myacct.blob.core.windows.net",
    "fs.azure.account.key",
    "spark.hadoop.fs.azure.sas.mycontainer.myacct.blob.core.windows.net",
    "spark.hadoop.fs.azure.sas.fixed.token.myacct.dfs.core.windows.net",
    "spark.hadoop.fs.azure.account.oauth2.client.secret.myacct.dfs.core.windows.net",
    "spark.hadoop.fs.s3a.secret.key",
    "spark.hadoop.fs.s3a.session.token",
    "spark.hadoop.fs.gs.auth.service.account.private.key",
    "spark.hadoop.azure.storage.connection.string",
    "spark.hadoop.fs.s3a.bucket.b.encryption.key",
    "spark.ssl.keyPassword",
]
NOT_SECRET = {
    "spark.hadoop.fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
    "spark.hadoop.fs.s3a.assumed.role.credentials.provider": ("com.amazonaws.auth.InstanceProfileCredentialsProvider"),
    "spark.hadoop.fs.azure.sas.token.provider.type": "org.example.MySASTokenProvider",
    "spark.hadoop.fs.azure.account.keyprovider.myacct.blob.core.windows.net": (
        "org.apache.hadoop.fs.azure.ShellDecryptionKeyProvider"
    ),
    "spark.hadoop.fs.azure.account.oauth.provider.type": (
        "org.apache.hadoop.fs.azurebfs.oauth2.ClientCredsTokenProvider"
    ),
    "spark.hadoop.fs.azure.account.auth.type": "SAS",
}


def _conf(tmp_path: Path, spark_conf: dict[str, str]) -> Path:
    conf = tmp_path / "test.yaml"
    lines = "".join(f"    {k}: '{v}'\n" for k, v in spark_conf.items())
    conf.write_text(f"paths:\n  root: {tmp_path / 'data'}\nspark:\n  conf:\n{lines}")
    return conf


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from pipelines.cli import main

    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize("key", SECRET_KEYS)
@pytest.mark.parametrize("value", [SECRET, SAS])
def test_a_literal_azure_key_sas_token_or_other_secret_is_refused_without_echoing_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, value: str
) -> None:
    rc, out, err = _cli(["config", "--conf", str(_conf(tmp_path, {key: value}))], capsys)
    assert rc == 2, out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and key in lines[0] and "${" in lines[0], err
    assert value not in out + err and "sig=" not in out + err


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_a_secret_given_as_a_reference_is_printed_as_the_reference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    monkeypatch.setenv("OFFSETLAKE_TEST_AZ", SAS)
    rc, out, err = _cli(["config", "--conf", str(_conf(tmp_path, {key: "${OFFSETLAKE_TEST_AZ}"}))], capsys)
    assert rc == 0, err
    assert "${OFFSETLAKE_TEST_AZ}" in out and SAS not in out + err and "sig=" not in out + err


def test_credentials_provider_class_names_are_settings_not_secrets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = _cli(["config", "--conf", str(_conf(tmp_path, NOT_SECRET))], capsys)
    assert rc == 0, err
    for value in NOT_SECRET.values():
        assert value in out


def test_sparks_redaction_regex_covers_every_secret_key_and_a_sas_token_value() -> None:
    from pipelines.runtime.spark_session import DEFAULT_CONF

    regex = DEFAULT_CONF["spark.redaction.regex"]
    assert regex.startswith("(?i)")  # Java's syntax; what follows reads the same in Python's re
    pattern = re.compile(regex[4:], re.IGNORECASE)
    for key in SECRET_KEYS:
        assert pattern.search(key), key
    assert pattern.search(SAS)  # a SAS token under a key Spark does not know (values are matched too)
    assert not pattern.search("spark.sql.shuffle.partitions")


# --------------------------------------------------------------------------------------------
# no secret on the JVM's command line


_START = """
import sys, time
from pipelines.config import load_config
from pipelines.runtime.spark_session import build_spark_from_config
spark = build_spark_from_config(load_config(sys.argv[1]))
conf = spark.sparkContext.getConf()
ok = all(conf.get(k) == v for k, v in [(sys.argv[2], sys.argv[3]), (sys.argv[4], sys.argv[5])])
print("ready", ok, spark.sparkContext._jsc.hadoopConfiguration().get(sys.argv[6]) == sys.argv[3], flush=True)
sys.stdin.read()
spark.stop()
"""


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


@pytest.mark.spark
def test_secret_spark_settings_never_reach_the_jvms_command_line(tmp_path: Path) -> None:
    s3_key, az_key = "spark.hadoop.fs.s3a.secret.key", "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net"
    conf = _conf(
        tmp_path,
        {
            s3_key: "${OFFSETLAKE_TEST_S3}",
            az_key: "${OFFSETLAKE_TEST_AZ}",
            "spark.hadoop.fs.s3a.aws.credentials.provider": NOT_SECRET["spark.hadoop.fs.s3a.aws.credentials.provider"],
        },
    )
    az_value = "azure=key/with spaces:and#signs!\\and\\backslash"
    env = dict(
        os.environ,
        OFFSETLAKE_TEST_S3=SECRET,
        OFFSETLAKE_TEST_AZ=az_value,
        PYTHONPATH=str(REPO),
        PYSPARK_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
    )
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    leftovers = set(Path(tempfile.gettempdir()).glob("offsetlake-spark-*.properties"))
    proc = subprocess.Popen(
        [sys.executable, "-c", _START, str(conf), s3_key, SECRET, az_key, az_value, "fs.s3a.secret.key"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.split() == ["ready", "True", "True"], (line, proc.stderr.read() if proc.poll() is not None else "")
        cmdlines = {}
        for pid in _descendants(proc.pid):
            try:
                cmdlines[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
        jvms = [c for c in cmdlines.values() if "org.apache.spark.deploy.SparkSubmit" in c]
        assert jvms, cmdlines
        for text in cmdlines.values():
            assert SECRET not in text and "azure=key" not in text, text
            assert s3_key not in text and "fs.azure.account.key" not in text, text
        assert any("fs.s3a.aws.credentials.provider" in c for c in jvms)  # the others stay --conf
        # the properties file is gone once the JVM has read it
        assert set(Path(tempfile.gettempdir()).glob("offsetlake-spark-*.properties")) <= leftovers
    finally:
        if proc.poll() is None:
            assert proc.stdin is not None
            proc.stdin.close()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
