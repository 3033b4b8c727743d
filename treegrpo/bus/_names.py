"""The names of the stream, the dead-letter stream and the object buckets every service shares."""

STREAM = "TREEGRPO"
DLQ_STREAM = "TREEGRPO_DLQ"
DLQ_ROOT = "tgdlq"
SUBMISSIONS = "tg-submissions"
ADAPTERS = "tg-adapters"
CHUNK = 1024 * 1024  # 1 MiB object chunks read far faster than the 128 KiB default
DUPLICATE_WINDOW_S = 24 * 3600  # a republish within a day of the original is dropped by the server
