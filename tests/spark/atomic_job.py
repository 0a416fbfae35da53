"""A batch-atomic streaming query in a Spark driver of its own, for the driver-kill tests
(atomic_kills.py): it copies every input record's position (`partition:offset`, key and value) from
`--source` to `--out`, availableNow, and with `--kill-at POINT --kill-batch N` SIGKILLs its whole
driver when the commit of micro-batch N reaches POINT (a step of pipeline.atomic.commit_batch:
"taken over", "decided", "completed", "markers written", "gate ended").

The kill comes from the process that runs the driver-side commit (a Python worker of pyspark's
daemon, in a process group of its own): it kills the driver's process group (the driver and its
JVM: the session's leader group), then its own (the daemon and the workers), as a lost machine
would, after noting the point in `--kill-log`.

    python tests/spark/atomic_job.py --bootstrap HOST:PORT --checkpoint DIR --source T --out T2 \\
        --max-offsets-per-trigger 60 [--kill-at completed --kill-batch 3 --kill-log FILE]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql.datasource import DataSourceStreamWriter  # noqa: E402
from pyspark.sql.types import StructType  # noqa: E402

from pipeline import local_session  # noqa: E402
from pipeline.checkpoint import remove_incomplete_writes  # noqa: E402
from pipeline.datasource import KetchDataSource  # noqa: E402

NAME = "ketch-killing"


class KillingKetch(KetchDataSource):
    """`ketch`, whose stream writer kills the driver at the step its options name."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        writer = super().streamWriter(schema, overwrite)
        point, batch, record = (self.options.get(k) for k in ("testkillat", "testkillbatch", "testkilllog"))
        if point and batch is not None and record:
            writer._reached = _killer(point, int(batch), record)  # type: ignore[attr-defined]
        return writer


def _killer(at: str, at_batch: int, record: str) -> Any:
    def reached(point: str, batch_id: int) -> None:
        if (point, batch_id) != (at, at_batch):
            return
        with open(record, "a") as f:
            f.write(f"{point} {batch_id}\n")
        os.killpg(os.getsid(0), signal.SIGKILL)
        os.killpg(os.getpgrp(), signal.SIGKILL)
    return reached


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-offsets-per-trigger", type=int, required=True)
    ap.add_argument("--kill-at")
    ap.add_argument("--kill-batch", type=int)
    ap.add_argument("--kill-log")
    args = ap.parse_args(argv)
    remove_incomplete_writes(Path(args.checkpoint))
    spark = local_session("ketch-atomic-job")
    spark.dataSource.register(KillingKetch)
    rows = (spark.readStream.format("ketch").option("kafka.bootstrap.servers", args.bootstrap)
            .option("subscribe", args.source).option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger)).load())
    pos = F.concat_ws(":", F.col("partition").cast("string"), F.col("offset").cast("string"))
    w = (rows.select(pos.alias("key"), pos.alias("value")).writeStream.format(NAME)
         .option("kafka.bootstrap.servers", args.bootstrap).option("topic", args.out)
         .option("commitMode", "batch-atomic").option("checkpointLocation", args.checkpoint))
    if args.kill_at:
        w = (w.option("testKillAt", args.kill_at).option("testKillBatch", str(args.kill_batch))
             .option("testKillLog", args.kill_log))
    q = w.trigger(availableNow=True).start()
    print("atomic job running", flush=True)
    q.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
