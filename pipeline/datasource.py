"""`ketch`: the PySpark data source class Spark instantiates for `format("ketch")`.

It only parses options and hands out readers and writers; the work is in source.py and sink.py.
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
from .schema import SOURCE_SCHEMA
from .sink import (
    KetchBatchArrowWriter,
    KetchBatchWriter,
    KetchStreamArrowWriter,
    KetchStreamWriter,
    prepare_sink,
    prepare_stream_sink,
)
from .source import KetchBatchReader, KetchStreamReader


class KetchDataSource(DataSource):
    """Kafka-compatible source and exactly-once sink for Ketch (and any Kafka broker with
    transactions), built on Ketch's own client."""

    @classmethod
    def name(cls) -> str:
        return "ketch"

    def schema(self) -> StructType:
        return SOURCE_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return KetchBatchReader(source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KetchStreamReader(source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise OptionError("a topic is append-only: use mode('append')")
        sink = sink_options(self.options)
        prepare_sink(sink, schema)
        return KetchBatchArrowWriter(sink) if sink.use_arrow else KetchBatchWriter(sink)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        sink = sink_options(self.options)
        prepare_stream_sink(sink, schema)
        return KetchStreamArrowWriter(sink) if sink.use_arrow else KetchStreamWriter(sink)
