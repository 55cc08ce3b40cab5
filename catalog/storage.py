"""The object store under a repository: the one audited place the log's atomicity rests on.

An :class:`ObjectStore` reads, lists, deletes and — the one operation commits need —
creates an object only if it is absent. Each backend does that its own way:

- local files: write a temporary file, then ``os.link`` it into place (``link`` fails if
  the name exists, and readers never see a half-written commit);
- memory: a process-wide lock around check-and-write (fsspec's memory store is a dict);
- S3: ``pipe_file(..., mode="create")``, which s3fs sends as ``If-None-Match: *``.

A backend that cannot create-if-absent is refused unless the user declares a single writer.

Every failure of the store leaves this module as a :class:`StorageError` of one kind
(:func:`store_failures`): unreachable, connection broken, timed out, access refused, or
another failure — never as botocore's, aiohttp's or the operating system's own exception,
so the committer can settle a commit's outcome whatever the store raised. Absence is
an answer, not a failure: :class:`FileNotFoundError` (and :class:`FileExistsError` from
:meth:`ObjectStore.put_if_absent`) pass through.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import http.client
import os
import socket
import time
import threading
import uuid
from typing import Any, Callable, Iterator, TypeVar
from urllib.parse import urlsplit, urlunsplit

import fsspec
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem

from cdkds.formats.threads import LazyPool
from cdkds.catalog.errors import (
    CdkdsError, StorageAccessError, StorageConnectionError, StorageError, StorageTimeoutError, StorageUnreachableError,
)

_MEMORY_LOCK = threading.Lock()

# ---------------------------------------------------------------- store failures

_Result = TypeVar("_Result")
_ACCESS_CODES = frozenset({"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken",
                           "InvalidToken", "AllAccessDisabled"})


@contextlib.contextmanager
def store_failures(doing: str, unclassified: bool = True) -> Iterator[None]:
    """Run one operation on the store; a failure of the store leaves as the :class:`StorageError`
    kind :func:`store_failure` gives, its message naming what was being done (``doing``)."""
    try:
        yield
    except (FileNotFoundError, FileExistsError, CdkdsError):
        raise
    except Exception as e:  # noqa: BLE001 - sorted by store_failure; anything else passes unchanged
        failure = store_failure(e, doing, unclassified)
        if failure is None:
            raise
        raise failure from e


def store_failure(error: BaseException, doing: str, unclassified: bool = True) -> StorageError | None:
    """The :class:`StorageError` kind for a failure of the store while ``doing``; ``None``
    when ``error`` is not one (a bug, or an absent object, passes as it is). With
    ``unclassified=False`` only the kinds count (a reader of files whose damage shows as
    ``OSError`` tells a broken connection from a broken file)."""
    if isinstance(error, (StorageError, FileNotFoundError, FileExistsError)) or not isinstance(error, Exception):
        return None
    chain = _causes(error)
    for kind, types, what in _failure_kinds():
        if any(isinstance(e, types) for e in chain) or (kind is StorageAccessError and _access_refused(chain)):
            return kind(f"{doing}: {what} ({_summary(error)})")
    if unclassified and any(isinstance(e, _store_exceptions()) for e in chain):
        return StorageError(f"{doing}: the object store failed ({_summary(error)})")
    return None


def _causes(error: BaseException) -> list[BaseException]:
    """``error`` and the store errors it was raised from (botocore wraps aiohttp's, which wraps
    the socket's); a bug raised while handling a store error is not one."""
    chain, seen = [], set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen and len(chain) < 8:
        chain.append(e)
        seen.add(id(e))
        if not isinstance(e, _store_exceptions()):
            break
        e = e.__cause__ or e.__context__
    return chain


def _summary(error: BaseException) -> str:
    text = str(error).strip()
    line = text.splitlines()[0] if text else ""
    return f"{type(error).__name__}: {line[:300]}" if line else type(error).__name__


def _access_refused(chain: list[BaseException]) -> bool:
    for e in chain:
        response = getattr(e, "response", None)
        if isinstance(response, dict):
            code = response.get("Error", {}).get("Code")
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in _ACCESS_CODES or status == 403:
                return True
    return False


@functools.lru_cache(maxsize=1)
def _failure_kinds() -> tuple[tuple[type[StorageError], tuple[type, ...], str], ...]:
    """(kind, the exception types that are it, what it means), most specific first: a timeout
    before a connection error (botocore's connect timeout is both), a connection that broke
    before one that could not be made (botocore calls a reset while sending "could not
    connect": its cause tells)."""
    timeouts: list[type] = [TimeoutError, socket.timeout]
    broke: list[type] = [ConnectionResetError, ConnectionAbortedError, BrokenPipeError, http.client.IncompleteRead,
                         http.client.RemoteDisconnected]
    unreachable: list[type] = [ConnectionRefusedError, socket.gaierror]
    other: list[type] = [ConnectionError]
    access: list[type] = [PermissionError]
    try:
        from botocore import exceptions as bx
        timeouts += [bx.ConnectTimeoutError, bx.ReadTimeoutError]
        broke += [bx.ConnectionClosedError, bx.IncompleteReadError, bx.ResponseStreamingError]
        unreachable += [bx.EndpointConnectionError]
        other += [bx.HTTPClientError, bx.ConnectionError]
        access += [bx.NoCredentialsError, bx.PartialCredentialsError]
    except ImportError:  # no S3 support installed
        pass
    try:
        import aiohttp
        timeouts += [aiohttp.ServerTimeoutError]
        broke += [aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError]
        unreachable += [aiohttp.ClientConnectorError]
        other += [aiohttp.ClientConnectionError]
    except ImportError:
        pass
    may_be_done = "; the request may or may not have been carried out"
    return ((StorageTimeoutError, tuple(timeouts), f"the object store did not answer in time{may_be_done}"),
            (StorageConnectionError, tuple(broke), f"the connection to the object store broke{may_be_done}"),
            (StorageUnreachableError, tuple(unreachable), "the object store cannot be reached"),
            (StorageConnectionError, tuple(other), f"the connection to the object store failed{may_be_done}"),
            (StorageAccessError, tuple(access), "the object store refused access"))


@functools.lru_cache(maxsize=1)
def _store_exceptions() -> tuple[type, ...]:
    """Every other exception type that is a failure of a store (not a bug of ours)."""
    types: list[type] = [OSError]
    try:
        from botocore import exceptions as bx
        types += [bx.BotoCoreError, bx.ClientError]
    except ImportError:
        pass
    try:
        import aiohttp
        types += [aiohttp.ClientError]
    except ImportError:
        pass
    return tuple(types)


def _audited(doing: str) -> Callable[[Callable[..., _Result]], Callable[..., _Result]]:
    """Decorate an :class:`ObjectStore` method of a key: its store failures leave as :class:`StorageError`."""
    def decorate(method: Callable[..., _Result]) -> Callable[..., _Result]:
        @functools.wraps(method)
        def run(self: ObjectStore, key: str, *args: Any, **kwargs: Any) -> _Result:
            with store_failures(f"{doing} {self.display(key)}"):
                return method(self, key, *args, **kwargs)
        return run
    return decorate


def _local_host(url: str) -> str:
    """``url``, with ``file://localhost/p`` as ``file:///p``; :class:`StorageError` for a
    ``file:`` URL naming another host (fsspec would take the host for a folder under the
    working directory)."""
    parts = urlsplit(url)
    if parts.scheme != "file" or not parts.netloc:
        return url
    if parts.netloc.lower() != "localhost":
        raise StorageError(f"cannot open storage for {url!r}: a file URL names a path on this machine, not host "
                           f"{parts.netloc!r} (write file:///path)")
    return urlunsplit(parts._replace(netloc=""))


class ObjectStore:
    """Objects under one root of an fsspec filesystem, addressed by relative keys."""

    def __init__(self, fs: Any, root: str, url: str, single_writer: bool = False):
        self.fs = fs
        self.root = root.rstrip("/") if root not in ("/", "") else root
        self.url = url.rstrip("/")
        self.single_writer = single_writer

    @classmethod
    def open(cls, url: str, storage_options: dict | None = None, single_writer: bool = False) -> "ObjectStore":
        """The store for any fsspec URL (``file://``, ``memory://``, ``s3://``...) or local path."""
        if not isinstance(url, str) or not url.strip():
            raise StorageError(f"a repository URL must be a non-empty string, got {url!r}")
        url = _local_host(url)
        try:
            fs, root = fsspec.core.url_to_fs(url, **(storage_options or {}))
        except (ValueError, ImportError, TypeError) as e:
            raise StorageError(f"cannot open storage for {url!r}: {e}") from None
        if isinstance(fs, LocalFileSystem):
            root = os.path.abspath(root)
        return cls(fs, root, url, single_writer)

    def path(self, key: str) -> str:
        """The filesystem path of a key."""
        return f"{self.root}/{key}" if key else self.root

    def display(self, key: str) -> str:
        return f"{self.url}/{key}"

    @property
    def absolute_url(self) -> str:
        """The root as an absolute URL, the same however the store was opened (a relative or
        absolute local path, a ``file://`` URL): what metadata other engines read names files by."""
        if isinstance(self.fs, LocalFileSystem):
            return f"file://{self.root}"
        return self.url

    def child(self, key: str) -> "ObjectStore":
        """The store rooted at ``key`` below this one."""
        return ObjectStore(self.fs, self.path(key), self.display(key), self.single_writer)

    # ---------------------------------------------------------------- reads

    @_audited("reading")
    def read(self, key: str) -> bytes:
        """The object's bytes; :class:`FileNotFoundError` if it is absent."""
        if "s3" in _protocols(self.fs):
            # one GET: s3fs otherwise asks the size first (a HEAD, and a LIST when absent) to
            # split large objects into concurrent ranged GETs
            return self.fs.cat_file(self.path(key), max_concurrency=1)
        return self.fs.cat_file(self.path(key))

    @_audited("looking up")
    def exists(self, key: str) -> bool:
        return self.fs.exists(self.path(key))

    @_audited("looking up")
    def size(self, key: str) -> int:
        """The object's size in bytes; :class:`FileNotFoundError` if it is absent."""
        return int(self.fs.info(self.path(key)).get("size") or 0)

    @_audited("listing")
    def list(self, prefix: str) -> list[str]:
        """Names directly under the folder ``prefix`` (sorted; empty if there is none)."""
        try:
            entries = self.fs.ls(self.path(prefix), detail=False)
        except FileNotFoundError:
            return []
        base = self.path(prefix).rstrip("/")
        names = [e.rstrip("/").rsplit("/", 1)[-1] for e in entries]
        return sorted(n for n in names if n and f"{base}/{n}" != base)

    def walk_files(self, prefix: str) -> Iterator[tuple[str, dict]]:
        """``(key, info)`` of every file below ``prefix``."""
        base = self.path(prefix)
        try:
            with store_failures(f"listing {self.display(prefix)}"):
                found = self.fs.find(base, detail=True)
        except FileNotFoundError:
            return
        for path, info in found.items():
            if info.get("type") == "file":
                yield path[len(self.root) + 1:] if path.startswith(self.root + "/") else path, info

    # ---------------------------------------------------------------- writes

    @_audited("creating")
    def put_if_absent(self, key: str, data: bytes) -> None:
        """Create the object only if it does not exist; :class:`FileExistsError` otherwise."""
        path = self.path(key)
        if isinstance(self.fs, LocalFileSystem):
            _local_put_if_absent(path, data)
        elif isinstance(self.fs, MemoryFileSystem):
            with _MEMORY_LOCK:
                if self.fs.exists(path):
                    raise FileExistsError(path)
                self.fs.pipe_file(path, data)
        elif "s3" in _protocols(self.fs):
            _s3_put_if_absent(self.fs, path, data)
        elif self.single_writer:
            if self.fs.exists(path):
                raise FileExistsError(path)
            self.fs.pipe_file(path, data)
        else:
            raise StorageError(
                f"{self.url}: the {type(self.fs).__name__} backend cannot create objects atomically only if "
                f"absent, so concurrent writers could overwrite each other's commits; open the repository with "
                f"single_writer=True if only one process ever writes to it")

    @_audited("writing")
    def put(self, key: str, data: bytes) -> None:
        """Write (or overwrite) an object; readers see the old or the new bytes, never a mix."""
        path = self.path(key)
        if isinstance(self.fs, LocalFileSystem):
            temporary = _local_temporary(path, data)
            os.replace(temporary, path)
            _fsync_directory(os.path.dirname(path))
        else:
            self.fs.pipe_file(path, data)

    def put_all(self, objects: "dict[str, bytes]") -> None:
        """Write (or overwrite) several objects at once, each as :meth:`put` does, all durable
        when it returns: on local files each is written and synced on a thread of its own
        (the syncs overlap instead of queueing one after another) and each folder is
        synced once; on object stores they are uploaded concurrently. When one fails, none
        is left (those written are removed) and the failure is raised."""
        if not objects:
            return
        first = next(iter(objects))
        with store_failures(f"writing {len(objects)} objects such as {self.display(first)}"):
            if isinstance(self.fs, LocalFileSystem):
                paths = {self.path(k): data for k, data in objects.items()}
                pool = _SYNCS.get()
                futures = [(pool.submit(_local_temporary, path, data), path) for path, data in paths.items()]
                failures = [f.exception() for f, _ in futures if f.exception() is not None]
                if failures:  # none is put: the written ones are removed, not left for vacuum
                    for f, _ in futures:
                        if f.exception() is None:
                            os.unlink(f.result())
                    raise failures[0]
                for f, path in futures:
                    os.replace(f.result(), path)
                list(pool.map(_fsync_directory, sorted({os.path.dirname(p) for p in paths})))
            else:
                try:
                    self.fs.pipe({self.path(k): data for k, data in objects.items()})
                except BaseException:
                    for key in objects:  # the ones that landed: none is put
                        with contextlib.suppress(Exception):
                            self.fs.rm_file(self.path(key))
                    raise

    @_audited("preparing to write")
    def open_output(self, key: str) -> str:
        """The path to write a new object at (parents created where the backend needs it)."""
        path = self.path(key)
        if isinstance(self.fs, LocalFileSystem):
            os.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        return path

    @_audited("deleting")
    def delete(self, key: str) -> None:
        try:
            self.fs.rm_file(self.path(key))
        except FileNotFoundError:
            pass

    def move_tree(self, prefix: str, destination: str) -> None:
        """Move every object under ``prefix`` to the same name under ``destination``."""
        for key, _ in list(self.walk_files(prefix)):
            target = destination + key[len(prefix):]
            self.put(target, self.read(key))
            self.delete(key)

    @_audited("deleting")
    def delete_tree(self, prefix: str) -> None:
        try:
            self.fs.rm(self.path(prefix), recursive=True)
        except FileNotFoundError:
            pass

    @_audited("removing the folder")
    def remove_empty_folder(self, prefix: str) -> None:
        """Remove the folder ``prefix`` if it is empty, on backends that keep folders."""
        if isinstance(self.fs, (LocalFileSystem, MemoryFileSystem)):
            try:
                self.fs.rmdir(self.path(prefix))  # refuses a folder that is not empty
            except OSError:
                pass


def _protocols(fs: Any) -> tuple[str, ...]:
    protocol = fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


_SYNCS = LazyPool(16, "cdkds-sync")  # writes and syncs of put_all's objects, overlapping


def _local_put_if_absent(path: str, data: bytes) -> None:
    temporary = _local_temporary(path, data)
    try:
        os.link(temporary, path)
    finally:
        os.unlink(temporary)
    _fsync_directory(os.path.dirname(path))  # the new name survives a crash once acknowledged


def _local_temporary(path: str, data: bytes) -> str:
    """A synced temporary file beside ``path`` holding ``data`` (its folder created, and synced, if new)."""
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        _make_folders(folder)
    temporary = os.path.join(folder, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
    with open(temporary, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return temporary


def _make_folders(folder: str) -> None:
    """Create ``folder`` and its missing parents, each one's name synced in its parent (a
    file's name in a new folder is not durable until the folder's own name is)."""
    missing = []
    while folder and not os.path.isdir(folder):
        missing.append(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    if missing:
        os.makedirs(missing[0], exist_ok=True)
    for created in reversed(missing):
        _fsync_directory(os.path.dirname(created))


def _fsync_directory(folder: str) -> None:
    descriptor = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


# S3 answers a conditional create that lost with 412 PreconditionFailed (s3fs raises
# FileExistsError for it) or, while a concurrent conditional write is in flight, with
# 409 ConditionalRequestConflict (s3fs raises a plain OSError with the ClientError as cause).
_EXISTS_CODES = frozenset({"PreconditionFailed", "ConditionalRequestConflict"})
_EXISTS_STATUSES = frozenset({409, 412})


def _s3_put_if_absent(fs: Any, path: str, data: bytes) -> None:
    try:
        fs.pipe_file(path, data, mode="create")
    except FileExistsError:
        raise
    except OSError as e:
        if _s3_says_exists(e):
            raise FileExistsError(path) from e
        raise


def _s3_says_exists(error: BaseException) -> bool:
    """Whether an S3 error (or the botocore ``ClientError`` behind it) is a lost conditional create."""
    for e in (error, error.__cause__):
        response = getattr(e, "response", None)
        if isinstance(response, dict):
            code = response.get("Error", {}).get("Code")
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            return code in _EXISTS_CODES or status in _EXISTS_STATUSES
    return False


def modified(info: dict[str, Any]) -> float:
    """Modification time (epoch seconds) from an fsspec ``info`` dict of any backend."""
    for name in ("mtime", "LastModified", "last_modified", "created", "updated"):
        value = info.get(name)
        if value is None:
            continue
        if isinstance(value, dt.datetime):
            return (value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)).timestamp()
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    return time.time()  # unknown age: treat as new, so it is never collected by mistake
