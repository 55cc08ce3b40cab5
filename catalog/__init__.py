"""cdkds.catalog: repositories, datasets, descriptors, partitioning, expressions and the
transaction log. Plain Python: it never imports pyspark.
"""

from cdkds.catalog.dataset import Dataset, DatasetReader
from cdkds.catalog.descriptor import DatasetDescriptor, DatasetDescriptorBuilder
from cdkds.catalog.errors import (
    CdkdsError, CommitConflictError, ConversionError, CommitFailedError, CommitStateUnknownError, ConcurrentRewriteError, CorruptLogError,
    CorruptIndexError, CorruptLogWarning, DataFileError, InvalidKeyError, KeyExistsError, DatasetExistsError, DatasetNotFoundError,
    ExpressionError, IncompatibleDescriptorError, InvalidDatasetSchemaError, InvalidDescriptorError, InvalidNameError,
    InvalidPartitionStrategyError, InvalidRecordError, InvalidSchemaError, InvalidTimeTravelError,
    RefError, RefExistsError, RefNotFoundError, SchemaMismatchError, ServiceWarning, MirrorWarning, StorageAccessError, StorageConnectionError, StorageError, StorageTimeoutError,
    StorageUnreachableError,
)
from cdkds.catalog.expressions import Expression, field
from cdkds.catalog.partitioning import PartitionStrategy, PartitionStrategyBuilder
from cdkds.catalog.repository import DatasetRepository, LogMetadataProvider, MetadataProvider
from cdkds.catalog.write.writer import DatasetWriter

__all__ = [
    "CdkdsError", "CommitConflictError", "ConversionError", "CommitFailedError", "CommitStateUnknownError", "ConcurrentRewriteError",
    "CorruptLogError",
    "CorruptIndexError", "CorruptLogWarning", "DataFileError", "InvalidKeyError", "KeyExistsError", "Dataset", "DatasetDescriptor",
    "DatasetDescriptorBuilder", "DatasetExistsError", "DatasetNotFoundError", "DatasetReader", "DatasetRepository",
    "DatasetWriter", "Expression", "ExpressionError", "IncompatibleDescriptorError", "InvalidDatasetSchemaError",
    "InvalidDescriptorError",
    "InvalidNameError", "InvalidPartitionStrategyError", "InvalidRecordError", "InvalidSchemaError",
    "InvalidTimeTravelError", "LogMetadataProvider", "MetadataProvider", "PartitionStrategy",
    "PartitionStrategyBuilder", "RefError", "RefExistsError", "RefNotFoundError", "SchemaMismatchError", "ServiceWarning", "MirrorWarning", "StorageAccessError", "StorageConnectionError", "StorageError",
    "StorageTimeoutError", "StorageUnreachableError", "field",
]
