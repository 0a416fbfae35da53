"""Structured logging: JSON lines when not on a terminal (production), readable otherwise."""

from __future__ import annotations

import logging
import sys

import structlog


def configure(fmt: str = "auto", level: str = "info") -> None:
    lvl = getattr(logging, level.upper(), logging.INFO)
    if fmt == "auto":
        fmt = "console" if sys.stderr.isatty() else "json"
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if fmt == "json" else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
