"""cdkds.formats: data files (Parquet, Avro) as Arrow batches, schemas, typed values, statistics.

The lowest layer: it imports neither ``cdkds.catalog`` nor ``cdkds.connector``.
"""
