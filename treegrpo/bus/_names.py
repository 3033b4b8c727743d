"""The names of the stream, the dead-letter stream and the object buckets every service shares."""

STREAM = "TREEGRPO"
DLQ_STREAM = "TREEGRPO_DLQ"
DLQ_ROOT = "tgdlq"
SUBMISSIONS = "tg-submissions"
ADAPTERS = "tg-adapters"
