"""Catalog-level errors, in the one hierarchy rooted at :class:`CdkdsError`."""

from __future__ import annotations

from cdkds.formats.errors import CdkdsError, DataFileError, InvalidSchemaError, SchemaMismatchError

__all__ = [
    "CdkdsError",
    "CommitConflictError",
    "CommitFailedError",
    "CommitStateUnknownError",
    "ConcurrentRewriteError",
    "CorruptLogError",
    "CorruptLogWarning",
    "UnsupportedLogVersionError",
    "DataFileError",
    "DatasetExistsError",
    "DatasetNotFoundError",
    "ExpressionError",
    "IncompatibleDescriptorError",
    "InvalidDatasetSchemaError",
    "InvalidDescriptorError",
    "InvalidNameError",
    "InvalidPartitionStrategyError",
    "InvalidRecordError",
    "InvalidSchemaError",
    "InvalidTimeTravelError",
    "InvalidKeyError",
    "KeyExistsError",
    "RefError",
    "RefExistsError",
    "RefNotFoundError",
    "CorruptIndexError",
    "SchemaMismatchError",
    "ServiceWarning",
    "MirrorWarning",
    "StorageAccessError",
    "StorageConnectionError",
    "StorageError",
    "StorageTimeoutError",
    "StorageUnreachableError",
]


class InvalidNameError(CdkdsError, ValueError):
    """A dataset or namespace name that is not ``[A-Za-z0-9_]+`` per part."""


class DatasetNotFoundError(CdkdsError, LookupError):
    """No dataset of that name in the repository."""


class DatasetExistsError(CdkdsError):
    """A dataset of that name already exists."""


class InvalidDescriptorError(CdkdsError, ValueError):
    """A descriptor whose parts do not fit together (schema, strategy, key, format...)."""


class IncompatibleDescriptorError(InvalidDescriptorError):
    """A descriptor update that breaks the rules (fixed format or strategy, unreadable old data)."""


class InvalidPartitionStrategyError(InvalidDescriptorError):
    """A partition strategy that is malformed or does not fit the schema."""


class InvalidDatasetSchemaError(InvalidDescriptorError, InvalidSchemaError):
    """A descriptor's schema that no dataset can have (see :mod:`cdkds.formats.schema_rules`)."""


class ExpressionError(CdkdsError, ValueError):
    """A predicate that cannot be parsed, or does not fit the schema it is bound to."""


class ConversionError(CdkdsError, ValueError):
    """A folder cannot be converted into a dataset in place (``cdkds convert``): a file it
    cannot read, files whose schemas disagree, a path outside the source, a source outside
    the repository. Nothing was committed."""


class InvalidTimeTravelError(CdkdsError, ValueError):
    """A version or timestamp to read a dataset at that is malformed or out of range."""


class RefError(CdkdsError, ValueError):
    """A tag (or branch) that cannot be made, read or ended: a malformed name, a revision the
    log does not hold. Nothing was committed."""


class RefExistsError(RefError):
    """A tag (or branch) of that name exists already."""


class RefNotFoundError(RefError, LookupError):
    """No tag (or branch) of that name."""


class InvalidRecordError(SchemaMismatchError):
    """A record or batch that does not match its dataset's schema or partition strategy."""


class InvalidKeyError(InvalidRecordError):
    """A record key (or a delete's ordering value) that is missing, null, of the wrong type
    or arity, out of its type's range, or repeated in one write that has no ordering values
    to reconcile it by."""


class NoSuchFieldError(CdkdsError, LookupError):
    """A field a keyed table's specification does not have (CDAP's ``NoSuchFieldException``)."""


class InvalidFieldError(CdkdsError, ValueError):
    """A field of a keyed table given a value of the wrong type, a null or missing key part,
    or a range that skips a key column (CDAP's ``InvalidFieldException``)."""


class TableNotFoundError(CdkdsError, LookupError):
    """A keyed table that does not exist."""


class TableExistsError(CdkdsError):
    """A keyed table created twice."""


class TransactionConflictError(CdkdsError):
    """A keyed-table transaction that lost to concurrent ones on every attempt."""


class NestedTransactionError(CdkdsError):
    """A keyed-table transaction (or admin operation) started inside another on the same
    store and thread: it would commit apart from the outer one, or wait for it forever."""


class KeyExistsError(CdkdsError):
    """An insert of a key that is already live in a keyed dataset."""


class CorruptIndexError(CdkdsError):
    """A record-index or deletion-vector file that is missing or whose size or checksum does
    not match the log; ``Dataset.rebuild_index()`` rebuilds the index from the data files."""


class CommitFailedError(CdkdsError):
    """A commit known not to have landed: nothing of it is in the log, so the data files
    written for it may be deleted."""


class CommitConflictError(CommitFailedError):
    """A commit lost a race to a concurrent commit it cannot be rebased onto."""


class ConcurrentRewriteError(CommitConflictError):
    """A commit lost a race to a compaction (a table service's, say): it rewrote files this
    commit was planned on without changing any row, so planning the same write again on
    the latest revision commits it. Every write of cdkds does that itself."""


class CommitStateUnknownError(CdkdsError):
    """A commit that may or may not have landed (as Iceberg's ``CommitStateUnknownException``):
    the store failed before the outcome could be read back. Its data files must stay;
    re-read the log to learn the outcome (vacuum collects them if it did not land)."""

    def __init__(self, dataset: str, revision: int, commit_uuid: str, cause: BaseException | str):
        super().__init__(f"dataset {dataset!r}: the commit {commit_uuid} tried at revision {revision} may or may not "
                         f"have landed: {cause}; its data files were kept — re-read the dataset to see whether it is "
                         f"there before writing it again")
        self.dataset = dataset
        self.revision = revision
        self.commit_uuid = commit_uuid
        self._cause = str(cause)

    def __reduce__(self):  # exceptions cross process boundaries (Spark) pickled
        return type(self), (self.dataset, self.revision, self.commit_uuid, self._cause)


class CorruptLogError(CdkdsError):
    """A transaction log object that is missing, truncated or breaks the commit chain."""


class UnsupportedLogVersionError(CdkdsError):
    """A log written with a protocol newer than this cdkds reads (``docs/FORMAT.md``)."""


class MirrorError(CdkdsError):
    """A mirror (Delta Lake or Iceberg metadata) cannot describe a revision as cdkds reads it;
    the message names the dataset, the revision and why."""


class ServiceWarning(UserWarning):
    """A table service gave up or failed; the write that ran it stands (see :mod:`cdkds.catalog.services`)."""


class MirrorWarning(UserWarning):
    """A mirror (Delta Lake or Iceberg metadata) could not be brought up to a commit; the
    commit stands (see :mod:`cdkds.catalog.mirror`)."""


class CorruptLogWarning(UserWarning):
    """A damaged log object that cdkds could read around (a checkpoint, the checkpoint hint)."""


class StorageError(CdkdsError):
    """The object store refused or failed an operation cdkds relies on. Every failure of the
    store (botocore's, aiohttp's, the operating system's) leaves ``catalog/storage.py`` as
    this or one of its kinds; an absent object is not a failure (``FileNotFoundError``)."""


class StorageUnreachableError(StorageError):
    """No connection to the object store could be made (refused, unresolvable, no route):
    this request was not carried out (an earlier attempt of it may have been)."""


class StorageConnectionError(StorageError):
    """The connection to the object store broke during a request (reset, closed before the
    answer): the store may or may not have carried the request out."""


class StorageTimeoutError(StorageError):
    """The object store did not connect or answer in time: the request may or may not
    have been carried out."""


class StorageAccessError(StorageError):
    """The object store refused the credentials or the permission for an operation."""
