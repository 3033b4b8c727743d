from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class AdapterChunk(_message.Message):
    __slots__ = ("run_id", "version", "sha256", "total_bytes", "offset", "data")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    version: int
    sha256: str
    total_bytes: int
    offset: int
    data: bytes
    def __init__(self, run_id: _Optional[str] = ..., version: _Optional[int] = ..., sha256: _Optional[str] = ..., total_bytes: _Optional[int] = ..., offset: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class PushAck(_message.Message):
    __slots__ = ("accepted", "reason", "version", "sha256", "load_seconds")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    LOAD_SECONDS_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    reason: str
    version: int
    sha256: str
    load_seconds: float
    def __init__(self, accepted: bool = ..., reason: _Optional[str] = ..., version: _Optional[int] = ..., sha256: _Optional[str] = ..., load_seconds: _Optional[float] = ...) -> None: ...
