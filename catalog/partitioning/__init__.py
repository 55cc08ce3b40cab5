"""Partition functions, strategies, and the path layout of partitions."""

from cdkds.catalog.partitioning.functions import PartitionFunction
from cdkds.catalog.partitioning.hashing import java_hash
from cdkds.catalog.partitioning.layout import partition_path
from cdkds.catalog.partitioning.strategy import PartitionStrategy, PartitionStrategyBuilder, make_function

__all__ = ["PartitionFunction", "PartitionStrategy", "PartitionStrategyBuilder", "java_hash", "make_function",
           "partition_path"]
