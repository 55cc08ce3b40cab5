"""Spark's ``s3a://`` file system (hadoop-aws): whether a session has it, and fsspec's S3
storage options as its per-read options."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class NoS3aEquivalent(ValueError):
    """A storage option s3a has no equivalent for."""


def has_s3a(spark: SparkSession) -> bool:
    """Whether the session's JVM can load ``S3AFileSystem`` (a Spark Connect session has no JVM here)."""
    try:
        jvm = spark._jvm  # type: ignore[attr-defined]
        if jvm is None:
            return False
        jvm.java.lang.Thread.currentThread().getContextClassLoader().loadClass(
            "org.apache.hadoop.fs.s3a.S3AFileSystem")
        return True
    except Exception:  # noqa: BLE001 - py4j's error for a missing class
        return False


_IGNORED_STORAGE = {"use_listings_cache", "skip_instance_cache", "listings_expiry_time", "default_block_size",
                    "default_fill_cache", "default_cache_type"}  # fsspec's own caching


def s3a_options(storage: Mapping[str, Any]) -> dict[str, str]:
    """fsspec's S3 storage options as Spark reader options for ``s3a://`` (:class:`NoS3aEquivalent`
    when one has none)."""
    out: dict[str, str] = {}
    client = dict(storage.get("client_kwargs") or {})
    endpoint = client.pop("endpoint_url", None) or storage.get("endpoint_url")
    if endpoint:
        out["fs.s3a.endpoint"] = endpoint
        out["fs.s3a.path.style.access"] = "true"
        out["fs.s3a.connection.ssl.enabled"] = str(endpoint.startswith("https")).lower()
    if "region_name" in client:
        out["fs.s3a.endpoint.region"] = client.pop("region_name")
    for name, key in (("key", "fs.s3a.access.key"), ("secret", "fs.s3a.secret.key"),
                      ("token", "fs.s3a.session.token")):
        if storage.get(name):
            out[key] = str(storage[name])
    if storage.get("token"):
        out["fs.s3a.aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
    if storage.get("anon"):
        out["fs.s3a.aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider"
    unknown = sorted(set(storage) - _IGNORED_STORAGE - {"client_kwargs", "endpoint_url", "key", "secret", "token",
                                                        "anon"}) + sorted(client)
    if unknown:
        raise NoS3aEquivalent(f"storage option {unknown[0]!r} has no s3a equivalent")
    return out
