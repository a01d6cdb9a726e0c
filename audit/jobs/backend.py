"""Where chunks run: joblib's local processes or a Dask cluster (``--backend dask --scheduler ADDRESS``).

The scheduler's address is checked, and reached, before Dask starts, so a
wrong address is one line, not a traceback; a cluster that fails mid-run
loses no finished chunk (they are stored as they finish).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import urllib.parse
from collections.abc import Iterator
from typing import TYPE_CHECKING

from dpaudit.core.errors import DPAuditError, ParameterError

if TYPE_CHECKING:
    from dpaudit.auditing.jobs.runner import RunOptions

__all__ = ["check_scheduler", "execution_backend"]

_CLUSTER_LOGGERS = ("distributed", "tornado", "bokeh", "asyncio")


@contextlib.contextmanager
def execution_backend(options: RunOptions) -> Iterator[int]:
    """Yield ``n_jobs`` inside the right joblib backend."""
    options.check()
    workers = options.workers
    if options.backend == "local":
        yield workers or -1
        return
    address = check_scheduler(options.scheduler)
    try:
        # Dask is an optional extra (dpaudit[distributed]), loaded for --backend dask only
        from dask.distributed import Client
    except ImportError:
        raise DPAuditError("backend 'dask' needs the distributed extra: pip install 'dpaudit[distributed]'") from None
    # joblib loads with the first parallel run, not with the runner
    import joblib

    if not options.verbose:  # distributed sets levels of its own loggers at import: quiet each one
        names = [name for name in logging.root.manager.loggerDict if name.split(".")[0] in _CLUSTER_LOGGERS]
        for name in {*names, *_CLUSTER_LOGGERS}:
            logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        client = Client(address, timeout=10)
    except (OSError, TimeoutError) as exc:
        raise DPAuditError(f"cannot reach the Dask scheduler at {address} ({type(exc).__name__})") from None
    try:
        with joblib.parallel_config(backend="dask"):
            yield workers or -1
    except DPAuditError:
        raise
    except Exception as exc:  # noqa: BLE001 - a cluster failure mid-run, in one line
        raise DPAuditError(f"the Dask cluster at {address} failed during the run ({type(exc).__name__}); finished "
                           f"chunks are stored: run again to resume") from None
    finally:
        with contextlib.suppress(Exception):
            client.close(timeout=5)


def check_scheduler(address: str, timeout: float = 3.0) -> str:
    """The scheduler's address, or a one-line error (checked before Dask starts): a ``tcp://`` address (or a bare
    ``host[:port]``) as ``tcp://host:port`` once it answers; Dask's other schemes (``inproc://``, ``ucx://``,
    ``ws://``, ``wss://``) as given, for Dask to reach."""
    try:
        parsed = urllib.parse.urlsplit(address if "://" in address else f"tcp://{address}")
    except ValueError:
        raise ParameterError(f"scheduler must be an address such as tcp://127.0.0.1:8786, got {address!r}") from None
    if parsed.scheme == "tls":
        raise ParameterError(f"scheduler {address!r}: tls:// needs certificates dpaudit does not take; use a "
                             "tcp:// address (e.g. through an SSH tunnel)")
    if parsed.scheme not in ("tcp", "inproc", "ucx", "ws", "wss") or not parsed.hostname:
        raise ParameterError(f"scheduler must be an address such as tcp://127.0.0.1:8786, got {address!r}")
    try:
        port = parsed.port or 8786
    except ValueError:
        raise ParameterError(f"scheduler {address!r} has an invalid port") from None
    if parsed.scheme != "tcp":  # Dask's own address, as it is (an inproc:// path has no port to add)
        return address
    try:
        socket.create_connection((parsed.hostname, port), timeout=timeout).close()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise DPAuditError(f"cannot reach the Dask scheduler at {parsed.hostname}:{port} ({reason})") from None
    return f"tcp://{parsed.hostname}:{port}"
