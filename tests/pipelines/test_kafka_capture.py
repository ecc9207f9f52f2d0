"""``offsetlake capture`` and the end-offsets feed against a real Kafka protocol endpoint.

The endpoint is librdkafka's mock cluster (brokers on 127.0.0.1 inside this process); the
capture runs as a real ``offsetlake capture`` subprocess where process behaviour matters
(SIGKILL, exit codes, what reaches stderr).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

pytest.importorskip("confluent_kafka")

from pipelines.inputs.raw_files import RawRecord, read_raw_records
from pipelines.inputs.sample import sample_records
from pipelines.kafka.capture import STATE_FILE, CaptureState, capture, capture_files
from pipelines.kafka.client import KafkaSettings, KafkaUnavailableError
from pipelines.kafka.mock import MOCK_PARTITIONS, MockKafkaCluster

pytestmark = pytest.mark.kafka

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster() -> Iterator[MockKafkaCluster]:
    with MockKafkaCluster(num_brokers=3) as mc:
        yield mc


def _topic() -> str:
    return f"offsets-test-{uuid.uuid4().hex[:8]}"


def _produce(cluster: MockKafkaCluster, records: list[RawRecord], topic: str) -> None:
    positions = cluster.produce([(r.key, r.value, r.partition, r.timestamp_ms) for r in records], topic)
    # the generated log's offsets are contiguous per partition from 0: the broker assigns the same
    assert positions == [(r.partition, r.offset) for r in records]


def _synthetic(n: int, start_ms: int = 1_700_000_000_000) -> list[RawRecord]:
    """n records spread over the mock's partitions, every 7th a tombstone; offsets from 0."""
    nxt = [0] * MOCK_PARTITIONS
    out = []
    for i in range(n):
        p = i % MOCK_PARTITIONS
        value = None if i % 7 == 0 else b"\x00\x03value-%d" % i
        out.append(RawRecord(b"\x00\x01key-%d" % i, value, "t", p, nxt[p], start_ms + i))
        nxt[p] += 1
    return sorted(out, key=lambda r: (r.partition, r.offset))


def _identity(records: list[RawRecord]) -> list[tuple[object, ...]]:
    return sorted((r.partition, r.offset, r.key, r.value, r.timestamp_ms, r.timestamp_type) for r in records)


def _utc_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pipelines", *args], capture_output=True, text=True, timeout=timeout, cwd=REPO
    )


# ---------------------------------------------------------------------------------------------
def test_capture_lands_every_generated_record_once_with_identical_bytes_and_positions(
    cluster: MockKafkaCluster, tmp_path: Path
) -> None:
    records = sample_records(12, seed=11, num_partitions=MOCK_PARTITIONS)
    topic = _topic()
    _produce(cluster, records, topic)
    assert any(r.value is None for r in records)  # tombstones travel too

    out = tmp_path / "landing"
    res = _cli(
        "capture",
        "-b",
        cluster.bootstrap_servers,
        "--topic",
        topic,
        "--until-end",
        "--out",
        str(out),
        "--rows-per-file",
        "40",
        "--no-progress",
    )
    assert res.returncode == 0, res.stderr
    assert f"captured {len(records)} records" in res.stdout
    captured = list(read_raw_records(out))
    assert _identity(captured) == _identity(records)
    assert {r.topic for r in captured} == {topic}
    assert {r.timestamp_type for r in captured} == {0}  # CREATE_TIME, Kafka's id
    files = capture_files(out)
    assert len(files) == -(-len(records) // 40)
    # lexical file order is log order within every partition
    last: dict[int, int] = {}
    for f in files:
        for r in read_raw_records(f):
            assert r.offset > last.get(r.partition, -1)
            last[r.partition] = r.offset
    state = CaptureState.load(out / STATE_FILE, topic)
    assert state.next_offsets == {p: last[p] + 1 for p in last}
    assert state.last_file == files[-1].name


def test_second_capture_takes_only_records_produced_since_the_first(cluster: MockKafkaCluster, tmp_path: Path) -> None:
    topic = _topic()
    records = _synthetic(400)
    half = [r for r in records if r.offset < 50]
    rest = [r for r in records if r.offset >= 50]
    _produce(cluster, half, topic)
    settings = KafkaSettings(cluster.bootstrap_servers, topic)
    out = tmp_path / "landing"
    r1 = capture(settings, out, until_end=True, rows_per_file=1000)
    assert r1.records == len(half) and r1.total_lag == 0
    _produce(cluster, rest, topic)
    r2 = capture(settings, out, until_end=True, rows_per_file=1000)
    assert r2.records == len(rest)
    assert _identity([r._replace(topic="t") for r in read_raw_records(out)]) == _identity(records)
    r3 = capture(settings, out, until_end=True)
    assert r3.records == 0 and r3.files == []


def test_capture_from_latest_skips_what_is_already_in_the_log(cluster: MockKafkaCluster, tmp_path: Path) -> None:
    topic = _topic()
    records = _synthetic(80)
    _produce(cluster, records, topic)
    settings = KafkaSettings(cluster.bootstrap_servers, topic)
    res = capture(settings, tmp_path / "l", start="latest", until_end=True)
    assert res.records == 0
    assert res.next_offsets == {p: 20 for p in range(MOCK_PARTITIONS)}


def test_capture_of_chosen_partitions_reads_only_those(cluster: MockKafkaCluster, tmp_path: Path) -> None:
    topic = _topic()
    _produce(cluster, _synthetic(80), topic)
    out = tmp_path / "l"
    res = _cli(
        "capture",
        "-b",
        cluster.bootstrap_servers,
        "--topic",
        topic,
        "--until-end",
        "--partitions",
        "1,3",
        "--out",
        str(out),
        "--no-progress",
    )
    assert res.returncode == 0, res.stderr
    assert {r.partition for r in read_raw_records(out)} == {1, 3}
    assert sum(1 for _ in read_raw_records(out)) == 40


def test_capture_killed_mid_way_and_restarted_loses_and_duplicates_nothing(
    cluster: MockKafkaCluster, tmp_path: Path
) -> None:
    topic = _topic()
    records = _synthetic(3000)
    _produce(cluster, records, topic)
    out = tmp_path / "landing"
    cmd = [
        sys.executable,
        "-m",
        "pipelines",
        "capture",
        "-b",
        cluster.bootstrap_servers,
        "--topic",
        topic,
        "--until-end",
        "--out",
        str(out),
        "--rows-per-file",
        "50",
        "--max-rate",
        "1500",
        "--no-progress",
    ]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while len(capture_files(out)) < 8 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(capture_files(out)) >= 8, "capture made no progress"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    partial = list(read_raw_records(out))
    assert 0 < len(partial) < len(records)

    res = _cli(
        "capture",
        "-b",
        cluster.bootstrap_servers,
        "--topic",
        topic,
        "--until-end",
        "--out",
        str(out),
        "--rows-per-file",
        "500",
        "--no-progress",
    )
    assert res.returncode == 0, res.stderr
    captured = [r._replace(topic="t") for r in read_raw_records(out)]
    keys = [(r.partition, r.offset) for r in captured]
    assert len(keys) == len(set(keys)), "duplicates after restart"
    assert _identity(captured) == _identity(records)


def test_files_renamed_before_the_state_was_saved_are_not_captured_twice(
    cluster: MockKafkaCluster, tmp_path: Path
) -> None:
    """A crash between a file's rename and the state write: the restart folds the file in."""
    topic = _topic()
    records = _synthetic(200)
    _produce(cluster, records, topic)
    settings = KafkaSettings(cluster.bootstrap_servers, topic)
    out = tmp_path / "l"
    capture(settings, out, until_end=True, rows_per_file=30, max_records=90)
    stale = (out / STATE_FILE).read_text()
    capture(settings, out, until_end=True, rows_per_file=30, max_records=60)
    (out / STATE_FILE).write_text(stale)  # as if the process died before saving the state
    notes: list[str] = []
    res = capture(settings, out, until_end=True, rows_per_file=30, log=notes.append)
    assert res.recovered_files and any("recovered" in n for n in notes)
    assert res.records == 200 - 150
    captured = [r._replace(topic="t") for r in read_raw_records(out)]
    assert _identity(captured) == _identity(records)


def test_unreachable_broker_fails_fast_with_one_clear_line(tmp_path: Path) -> None:
    started = time.monotonic()
    res = _cli(
        "capture",
        "-b",
        "127.0.0.1:1",
        "--until-end",
        "--out",
        str(tmp_path / "x"),
        "--connect-timeout",
        "2",
        "--no-progress",
        timeout=60,
    )
    elapsed = time.monotonic() - started
    assert res.returncode != 0
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert "cannot reach Kafka at 127.0.0.1:1" in lines[0]
    assert elapsed < 20
    assert not capture_files(tmp_path / "x")


def test_unreachable_broker_in_the_library_raises_kafka_unavailable(tmp_path: Path) -> None:
    with pytest.raises(KafkaUnavailableError, match="cannot reach Kafka"):
        capture(KafkaSettings("127.0.0.1:1"), tmp_path / "x", connect_timeout_s=1.0)


def test_sasl_password_from_the_environment_is_never_printed(tmp_path: Path) -> None:
    secret = "s3cr3t-" + uuid.uuid4().hex
    env = dict(os.environ, OFFSETLAKE_KAFKA_SASL_PASSWORD=secret, OFFSETLAKE_KAFKA_SASL_USERNAME="alice")
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipelines",
            "capture",
            "-b",
            "127.0.0.1:1",
            "--until-end",
            "--out",
            str(tmp_path / "x"),
            "--connect-timeout",
            "2",
            "--no-progress",
            "--show-config",
            "-X",
            "security.protocol=SASL_PLAINTEXT",
            "-X",
            "sasl.mechanism=PLAIN",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env=env,
    )
    assert res.returncode != 0
    assert secret not in res.stdout + res.stderr
    assert "${OFFSETLAKE_KAFKA_SASL_PASSWORD}" in res.stderr


def test_a_secret_given_as_a_plain_property_is_refused(tmp_path: Path) -> None:
    res = _cli("capture", "-b", "127.0.0.1:1", "--out", str(tmp_path / "x"), "-X", "sasl.password=oops")
    assert res.returncode == 2
    assert "oops" not in res.stderr and "environment variable" in res.stderr


# ---------------------------------------------------------------------------------------------
# end offsets
def test_end_offsets_sample_partition_log_ends_and_group_lag_with_record_time(
    cluster: MockKafkaCluster, tmp_path: Path
) -> None:
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from pipelines.kafka.end_offsets import run_sampler, sample_end_offsets

    data_topic = _topic()
    # a consumed data topic: 10 records in partition 0, 4 in partition 2, timestamps 1000 + i
    _produce(
        cluster,
        [RawRecord(b"k", b"v", data_topic, 0, i, 1_000 + i) for i in range(10)]
        + [RawRecord(b"k", b"v", data_topic, 2, i, 5_000 + i) for i in range(4)],
        data_topic,
    )
    settings = KafkaSettings(cluster.bootstrap_servers)
    plain = sample_end_offsets(settings, topics=[data_topic], now_ms=42).to_pylist()
    ends = {r["partition"]: (r["log_start_offset"], r["log_end_offset"]) for r in plain}
    assert ends == {0: (0, 10), 1: (0, 0), 2: (0, 4), 3: (0, 0)}
    assert all(r["group_id"] is None for r in plain)

    current = tmp_path / "warehouse" / "offsets_current"
    write_deltalake(
        str(current),
        pa.table(
            {
                "group_id": ["g1", "g2", "g1"],
                "topic": [data_topic, data_topic, data_topic],
                "partition": pa.array([0, 0, 2], pa.int32()),
                "offset": pa.array([3, 7, 4], pa.int64()),
            }
        ),
    )
    table = tmp_path / "warehouse" / "partition_end_offsets"
    n = run_sampler(settings, str(table), groups_table=str(current), iterations=2)
    assert n == 6
    rows = DeltaTable(str(table)).to_pyarrow_table().to_pylist()
    assert len(rows) == 6
    last = {(r["group_id"], r["partition"]): r for r in rows}
    assert last[("g1", 0)]["lag_offsets"] == 7
    assert last[("g1", 0)]["committed_record_timestamp"] == _utc_ms(1_003)
    assert last[("g2", 0)]["committed_record_timestamp"] == _utc_ms(1_007)
    assert last[("g1", 2)]["lag_offsets"] == 0  # caught up: no record at the committed offset
    assert last[("g1", 2)]["committed_record_timestamp"] is None


def test_end_offsets_of_topics_missing_on_the_cluster_are_reported_not_skipped_silently(
    cluster: MockKafkaCluster, tmp_path: Path
) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    from pipelines.kafka.end_offsets import run_sampler

    data_topic, gone = _topic(), _topic()
    _produce(cluster, [RawRecord(b"k", b"v", data_topic, 0, i, 1_000 + i) for i in range(3)], data_topic)
    current = tmp_path / "offsets_current"
    write_deltalake(
        str(current),
        pa.table(
            {
                "group_id": ["g1", "g2", "g1"],
                "topic": [data_topic, gone, data_topic],
                "partition": pa.array([0, 1, 9], pa.int32()),  # data_topic has 4 partitions: 9 is gone too
                "offset": pa.array([1, 5, 2], pa.int64()),
            }
        ),
    )
    lines: list[str] = []
    n = run_sampler(
        KafkaSettings(cluster.bootstrap_servers),
        str(tmp_path / "partition_end_offsets"),
        groups_table=str(current),
        log=lines.append,
    )
    assert n == 1  # only data_topic-0 exists
    missing = [line for line in lines if "not on the cluster" in line]
    assert len(missing) == 1
    assert f"{data_topic}[9] (groups g1)" in missing[0] and f"{gone}[1] (groups g2)" in missing[0]


def test_capture_end_offsets_command_writes_the_table(cluster: MockKafkaCluster, tmp_path: Path) -> None:
    from deltalake import DeltaTable

    topic = _topic()
    _produce(cluster, _synthetic(8), topic)
    table = tmp_path / "peo"
    res = _cli(
        "capture-end-offsets",
        "-b",
        cluster.bootstrap_servers,
        "--topics",
        topic,
        "--table",
        str(table),
        "--iterations",
        "1",
    )
    assert res.returncode == 0, res.stderr
    rows = DeltaTable(str(table)).to_pyarrow_table().to_pylist()
    assert sorted((r["partition"], r["log_end_offset"]) for r in rows) == [(p, 2) for p in range(4)]


def test_bad_start_position_is_a_usage_error_naming_the_choices(tmp_path: Path) -> None:
    res = _cli("capture", "-b", "127.0.0.1:1", "--out", str(tmp_path / "x"), "--from", "yesterday")
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        "offsetlake capture: error: --from yesterday: expected earliest, latest or timestamp:<epoch ms>"
    ]


def test_rate_limit_splits_a_trigger_over_partitions_by_lag_and_never_exceeds_it() -> None:
    from pipelines.kafka.source import _rate_limit

    begin = {0: 0, 1: 100, 2: 50}
    end = {0: 1000, 1: 100, 2: 550}
    capped = _rate_limit(begin, end, 300)
    assert sum(capped[p] - begin[p] for p in end) == 300
    assert capped[1] == 100  # no lag, nothing taken
    assert capped[0] - begin[0] == 200 and capped[2] - begin[2] == 100  # 2:1 like their lags
    assert _rate_limit(begin, end, 10_000) == end


def test_following_capture_stops_cleanly_on_sigterm_and_keeps_what_it_read(
    cluster: MockKafkaCluster, tmp_path: Path
) -> None:
    topic = _topic()
    records = _synthetic(120)
    _produce(cluster, records, topic)
    out = tmp_path / "landing"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pipelines",
            "capture",
            "-b",
            cluster.bootstrap_servers,
            "--topic",
            topic,
            "--out",
            str(out),
            "--flush-interval",
            "0.2",
            "--no-progress",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while (sum(1 for _ in read_raw_records(out)) if capture_files(out) else 0) < len(records):
            assert time.monotonic() < deadline, "follower captured nothing"
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    assert f"captured {len(records)} records" in stdout
    state = CaptureState.load(out / STATE_FILE, topic)
    assert state.next_offsets == {p: 30 for p in range(MOCK_PARTITIONS)}


def test_until_end_writes_full_files_whatever_the_flush_interval(cluster: MockKafkaCluster, tmp_path: Path) -> None:
    # the flush interval is for followers; a bounded capture on a slow broker must not
    # scatter its records over partial files (an interval of 0 would flush every fetch)
    topic = _topic()
    records = _synthetic(250)
    _produce(cluster, records, topic)
    out = tmp_path / "landing"
    res = capture(
        KafkaSettings(cluster.bootstrap_servers, topic),
        out,
        until_end=True,
        rows_per_file=100,
        flush_interval_s=0.0,
        fetch_batch=30,
    )
    assert res.records == len(records)
    assert [sum(1 for _ in read_raw_records(f)) for f in capture_files(out)] == [100, 100, 50]


def test_capture_past_the_client_queue_threshold_is_not_held_up_by_fetch_backoff(
    cluster: MockKafkaCluster, tmp_path: Path
) -> None:
    # Once librdkafka's queue holds queued.min.messages records it stops fetching for
    # fetch.queue.backoff.ms (1000 ms by default): with one record per batch and a threshold of
    # one, every fetch would be followed by a second of idling (~30 s here).
    topic = _topic()
    records = _synthetic(120)
    for r in records:  # one produce request, so one batch, per record
        cluster.produce([(r.key, r.value, r.partition, r.timestamp_ms)], topic)
    settings = KafkaSettings(cluster.bootstrap_servers, topic, properties={"queued.min.messages": "1"})
    started = time.monotonic()
    res = capture(settings, tmp_path / "landing", until_end=True)
    took = time.monotonic() - started
    assert res.records == len(records)
    assert _identity([r._replace(topic="t") for r in read_raw_records(tmp_path / "landing")]) == _identity(records)
    assert took < 10, f"capture of {len(records)} records took {took:.1f}s"


def test_a_capture_process_does_not_import_pandas(cluster: MockKafkaCluster, tmp_path: Path) -> None:
    # pa.array over a Python list imports pandas (~0.4 s of every run's start-up) only to ask
    # whether the list is a pandas object; the batch builder builds its arrays from buffers.
    topic = _topic()
    records = _synthetic(50)  # with tombstones: the null path of the builder too
    _produce(cluster, records, topic)
    code = (
        "import sys; from pipelines.kafka.capture import capture; from pipelines.kafka.client import KafkaSettings; "
        f"r = capture(KafkaSettings({cluster.bootstrap_servers!r}, {topic!r}), {str(tmp_path / 'l')!r}); "
        "print(r.records, 'pandas' in sys.modules)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == [str(len(records)), "False"]
    assert _identity([r._replace(topic="t") for r in read_raw_records(tmp_path / "l")]) == _identity(records)
