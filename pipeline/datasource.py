"""`ketch`: the PySpark data source class Spark instantiates for `format("ketch")`.

It only parses options and hands out readers and writers; the work is in source.py and sink.py,
imported when a reader or writer is asked for: Spark's streaming source runner, a fresh process per
query, imports this module and needs only the reader (docs/pipeline.md, Performance).
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from .options import OptionError, sink_options, source_options


class KetchDataSource(DataSource):
    """Kafka-compatible source and exactly-once sink for Ketch (and any Kafka broker with
    transactions), built on Ketch's own client."""

    @classmethod
    def name(cls) -> str:
        return "ketch"

    def schema(self) -> StructType:
        from .schema import SOURCE_SCHEMA
        return SOURCE_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        from .source import KetchBatchReader
        return KetchBatchReader(source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from .source import KetchStreamReader
        return KetchStreamReader(source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from .sink import KetchBatchArrowWriter, KetchBatchWriter, prepare_sink
        if overwrite:
            raise OptionError("a topic is append-only: use mode('append')")
        sink = sink_options(self.options)
        prepare_sink(sink, schema)
        return KetchBatchArrowWriter(sink) if sink.use_arrow else KetchBatchWriter(sink)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from .sink import KetchStreamArrowWriter, KetchStreamWriter, prepare_stream_sink
        sink = sink_options(self.options)
        prepare_stream_sink(sink, schema)
        return KetchStreamArrowWriter(sink) if sink.use_arrow else KetchStreamWriter(sink)
