from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Envelope(_message.Message):
    __slots__ = ("event_id", "run_id", "time", "producer", "schema_version")
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    event_id: str
    run_id: str
    time: float
    producer: str
    schema_version: int
    def __init__(self, event_id: _Optional[str] = ..., run_id: _Optional[str] = ..., time: _Optional[float] = ..., producer: _Optional[str] = ..., schema_version: _Optional[int] = ...) -> None: ...

class ChatMessage(_message.Message):
    __slots__ = ("role", "content")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    role: str
    content: str
    def __init__(self, role: _Optional[str] = ..., content: _Optional[str] = ...) -> None: ...

class Resources(_message.Message):
    __slots__ = ("cpu", "mem", "ephemeral", "gpu")
    CPU_FIELD_NUMBER: _ClassVar[int]
    MEM_FIELD_NUMBER: _ClassVar[int]
    EPHEMERAL_FIELD_NUMBER: _ClassVar[int]
    GPU_FIELD_NUMBER: _ClassVar[int]
    cpu: float
    mem: float
    ephemeral: float
    gpu: float
    def __init__(self, cpu: _Optional[float] = ..., mem: _Optional[float] = ..., ephemeral: _Optional[float] = ..., gpu: _Optional[float] = ...) -> None: ...

class ExecTimings(_message.Message):
    __slots__ = ("pending", "stage", "exec", "retrieve")
    PENDING_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    EXEC_FIELD_NUMBER: _ClassVar[int]
    RETRIEVE_FIELD_NUMBER: _ClassVar[int]
    pending: float
    stage: float
    exec: float
    retrieve: float
    def __init__(self, pending: _Optional[float] = ..., stage: _Optional[float] = ..., exec: _Optional[float] = ..., retrieve: _Optional[float] = ...) -> None: ...

class RunStarted(_message.Message):
    __slots__ = ("run_spec_json", "tasks", "rounds", "train", "max_staleness", "resource_gate")
    RUN_SPEC_JSON_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    TRAIN_FIELD_NUMBER: _ClassVar[int]
    MAX_STALENESS_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_GATE_FIELD_NUMBER: _ClassVar[int]
    run_spec_json: str
    tasks: _containers.RepeatedScalarFieldContainer[str]
    rounds: int
    train: bool
    max_staleness: int
    resource_gate: bool
    def __init__(self, run_spec_json: _Optional[str] = ..., tasks: _Optional[_Iterable[str]] = ..., rounds: _Optional[int] = ..., train: bool = ..., max_staleness: _Optional[int] = ..., resource_gate: bool = ...) -> None: ...

class RunCompleted(_message.Message):
    __slots__ = ("outcome", "reason")
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    outcome: str
    reason: str
    def __init__(self, outcome: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class RunEnded(_message.Message):
    __slots__ = ("outcome", "reason", "attempt")
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    outcome: str
    reason: str
    attempt: int
    def __init__(self, outcome: _Optional[str] = ..., reason: _Optional[str] = ..., attempt: _Optional[int] = ...) -> None: ...

class RunResumed(_message.Message):
    __slots__ = ("attempt",)
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    def __init__(self, attempt: _Optional[int] = ...) -> None: ...

class RoundStarted(_message.Message):
    __slots__ = ("task", "round", "policy_version", "model", "adapter_path", "started_unix", "expansions", "group_size")
    TASK_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    ADAPTER_PATH_FIELD_NUMBER: _ClassVar[int]
    STARTED_UNIX_FIELD_NUMBER: _ClassVar[int]
    EXPANSIONS_FIELD_NUMBER: _ClassVar[int]
    GROUP_SIZE_FIELD_NUMBER: _ClassVar[int]
    task: str
    round: int
    policy_version: int
    model: str
    adapter_path: str
    started_unix: int
    expansions: int
    group_size: int
    def __init__(self, task: _Optional[str] = ..., round: _Optional[int] = ..., policy_version: _Optional[int] = ..., model: _Optional[str] = ..., adapter_path: _Optional[str] = ..., started_unix: _Optional[int] = ..., expansions: _Optional[int] = ..., group_size: _Optional[int] = ...) -> None: ...

class RoundCompleted(_message.Message):
    __slots__ = ("task", "round", "model", "adapter_path", "nodes", "valid", "expansions", "phase", "best_test_metric", "best_node_id", "honest_test_metric", "rollout_file", "workspace", "gen_llm_seconds", "gen_exec_seconds", "completed_unix", "started_unix")
    TASK_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    ADAPTER_PATH_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    VALID_FIELD_NUMBER: _ClassVar[int]
    EXPANSIONS_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    BEST_TEST_METRIC_FIELD_NUMBER: _ClassVar[int]
    BEST_NODE_ID_FIELD_NUMBER: _ClassVar[int]
    HONEST_TEST_METRIC_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_FILE_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    GEN_LLM_SECONDS_FIELD_NUMBER: _ClassVar[int]
    GEN_EXEC_SECONDS_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_UNIX_FIELD_NUMBER: _ClassVar[int]
    STARTED_UNIX_FIELD_NUMBER: _ClassVar[int]
    task: str
    round: int
    model: str
    adapter_path: str
    nodes: int
    valid: int
    expansions: int
    phase: str
    best_test_metric: float
    best_node_id: str
    honest_test_metric: float
    rollout_file: str
    workspace: str
    gen_llm_seconds: float
    gen_exec_seconds: float
    completed_unix: int
    started_unix: int
    def __init__(self, task: _Optional[str] = ..., round: _Optional[int] = ..., model: _Optional[str] = ..., adapter_path: _Optional[str] = ..., nodes: _Optional[int] = ..., valid: _Optional[int] = ..., expansions: _Optional[int] = ..., phase: _Optional[str] = ..., best_test_metric: _Optional[float] = ..., best_node_id: _Optional[str] = ..., honest_test_metric: _Optional[float] = ..., rollout_file: _Optional[str] = ..., workspace: _Optional[str] = ..., gen_llm_seconds: _Optional[float] = ..., gen_exec_seconds: _Optional[float] = ..., completed_unix: _Optional[int] = ..., started_unix: _Optional[int] = ...) -> None: ...

class NodeSampled(_message.Message):
    __slots__ = ("node_id", "task", "round", "step", "parent_id", "sibling_group", "mode", "group_size", "index_in_group", "prompt_messages", "raw_completion", "thinking", "plan", "code", "response_token_ids", "response_logprobs", "policy_version", "gen_seconds", "prompt_token_ids", "sampler_id", "model", "finish_reason", "tokens_recorded", "tokens_digest")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    SIBLING_GROUP_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    GROUP_SIZE_FIELD_NUMBER: _ClassVar[int]
    INDEX_IN_GROUP_FIELD_NUMBER: _ClassVar[int]
    PROMPT_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    RAW_COMPLETION_FIELD_NUMBER: _ClassVar[int]
    THINKING_FIELD_NUMBER: _ClassVar[int]
    PLAN_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    GEN_SECONDS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    SAMPLER_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    TOKENS_RECORDED_FIELD_NUMBER: _ClassVar[int]
    TOKENS_DIGEST_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    task: str
    round: int
    step: int
    parent_id: str
    sibling_group: str
    mode: str
    group_size: int
    index_in_group: int
    prompt_messages: _containers.RepeatedCompositeFieldContainer[ChatMessage]
    raw_completion: str
    thinking: str
    plan: str
    code: str
    response_token_ids: _containers.RepeatedScalarFieldContainer[int]
    response_logprobs: _containers.RepeatedScalarFieldContainer[float]
    policy_version: int
    gen_seconds: float
    prompt_token_ids: _containers.RepeatedScalarFieldContainer[int]
    sampler_id: str
    model: str
    finish_reason: str
    tokens_recorded: bool
    tokens_digest: str
    def __init__(self, node_id: _Optional[str] = ..., task: _Optional[str] = ..., round: _Optional[int] = ..., step: _Optional[int] = ..., parent_id: _Optional[str] = ..., sibling_group: _Optional[str] = ..., mode: _Optional[str] = ..., group_size: _Optional[int] = ..., index_in_group: _Optional[int] = ..., prompt_messages: _Optional[_Iterable[_Union[ChatMessage, _Mapping]]] = ..., raw_completion: _Optional[str] = ..., thinking: _Optional[str] = ..., plan: _Optional[str] = ..., code: _Optional[str] = ..., response_token_ids: _Optional[_Iterable[int]] = ..., response_logprobs: _Optional[_Iterable[float]] = ..., policy_version: _Optional[int] = ..., gen_seconds: _Optional[float] = ..., prompt_token_ids: _Optional[_Iterable[int]] = ..., sampler_id: _Optional[str] = ..., model: _Optional[str] = ..., finish_reason: _Optional[str] = ..., tokens_recorded: bool = ..., tokens_digest: _Optional[str] = ...) -> None: ...

class TokensRecorded(_message.Message):
    __slots__ = ("node_id", "task", "round", "step", "sibling_group", "group_size", "index_in_group", "prompt_messages", "prompt_token_ids", "response_token_ids", "response_logprobs")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    SIBLING_GROUP_FIELD_NUMBER: _ClassVar[int]
    GROUP_SIZE_FIELD_NUMBER: _ClassVar[int]
    INDEX_IN_GROUP_FIELD_NUMBER: _ClassVar[int]
    PROMPT_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    task: str
    round: int
    step: int
    sibling_group: str
    group_size: int
    index_in_group: int
    prompt_messages: _containers.RepeatedCompositeFieldContainer[ChatMessage]
    prompt_token_ids: _containers.RepeatedScalarFieldContainer[int]
    response_token_ids: _containers.RepeatedScalarFieldContainer[int]
    response_logprobs: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, node_id: _Optional[str] = ..., task: _Optional[str] = ..., round: _Optional[int] = ..., step: _Optional[int] = ..., sibling_group: _Optional[str] = ..., group_size: _Optional[int] = ..., index_in_group: _Optional[int] = ..., prompt_messages: _Optional[_Iterable[_Union[ChatMessage, _Mapping]]] = ..., prompt_token_ids: _Optional[_Iterable[int]] = ..., response_token_ids: _Optional[_Iterable[int]] = ..., response_logprobs: _Optional[_Iterable[float]] = ...) -> None: ...

class NodeExecuted(_message.Message):
    __slots__ = ("node_id", "task", "round", "step", "sibling_group", "group_size", "mode", "parent_id", "status", "exc_type", "exec_time", "term_tail", "resource_gate", "resources", "decl_malformed", "decl_miss_reason", "decl_deps_ignored", "where", "exec_timings", "gpu_util", "submission_key", "attempt")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    SIBLING_GROUP_FIELD_NUMBER: _ClassVar[int]
    GROUP_SIZE_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    EXC_TYPE_FIELD_NUMBER: _ClassVar[int]
    EXEC_TIME_FIELD_NUMBER: _ClassVar[int]
    TERM_TAIL_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_GATE_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    DECL_MALFORMED_FIELD_NUMBER: _ClassVar[int]
    DECL_MISS_REASON_FIELD_NUMBER: _ClassVar[int]
    DECL_DEPS_IGNORED_FIELD_NUMBER: _ClassVar[int]
    WHERE_FIELD_NUMBER: _ClassVar[int]
    EXEC_TIMINGS_FIELD_NUMBER: _ClassVar[int]
    GPU_UTIL_FIELD_NUMBER: _ClassVar[int]
    SUBMISSION_KEY_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    task: str
    round: int
    step: int
    sibling_group: str
    group_size: int
    mode: str
    parent_id: str
    status: str
    exc_type: str
    exec_time: float
    term_tail: str
    resource_gate: bool
    resources: Resources
    decl_malformed: bool
    decl_miss_reason: str
    decl_deps_ignored: bool
    where: str
    exec_timings: ExecTimings
    gpu_util: float
    submission_key: str
    attempt: int
    def __init__(self, node_id: _Optional[str] = ..., task: _Optional[str] = ..., round: _Optional[int] = ..., step: _Optional[int] = ..., sibling_group: _Optional[str] = ..., group_size: _Optional[int] = ..., mode: _Optional[str] = ..., parent_id: _Optional[str] = ..., status: _Optional[str] = ..., exc_type: _Optional[str] = ..., exec_time: _Optional[float] = ..., term_tail: _Optional[str] = ..., resource_gate: bool = ..., resources: _Optional[_Union[Resources, _Mapping]] = ..., decl_malformed: bool = ..., decl_miss_reason: _Optional[str] = ..., decl_deps_ignored: bool = ..., where: _Optional[str] = ..., exec_timings: _Optional[_Union[ExecTimings, _Mapping]] = ..., gpu_util: _Optional[float] = ..., submission_key: _Optional[str] = ..., attempt: _Optional[int] = ...) -> None: ...

class NodeGraded(_message.Message):
    __slots__ = ("node_id", "task", "round", "step", "sibling_group", "group_size", "status", "is_buggy", "test_metric", "oriented", "grade_error", "source", "exec_time", "mode", "parent_id", "attempt")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    SIBLING_GROUP_FIELD_NUMBER: _ClassVar[int]
    GROUP_SIZE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    IS_BUGGY_FIELD_NUMBER: _ClassVar[int]
    TEST_METRIC_FIELD_NUMBER: _ClassVar[int]
    ORIENTED_FIELD_NUMBER: _ClassVar[int]
    GRADE_ERROR_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    EXEC_TIME_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    task: str
    round: int
    step: int
    sibling_group: str
    group_size: int
    status: str
    is_buggy: bool
    test_metric: float
    oriented: float
    grade_error: str
    source: str
    exec_time: float
    mode: str
    parent_id: str
    attempt: int
    def __init__(self, node_id: _Optional[str] = ..., task: _Optional[str] = ..., round: _Optional[int] = ..., step: _Optional[int] = ..., sibling_group: _Optional[str] = ..., group_size: _Optional[int] = ..., status: _Optional[str] = ..., is_buggy: bool = ..., test_metric: _Optional[float] = ..., oriented: _Optional[float] = ..., grade_error: _Optional[str] = ..., source: _Optional[str] = ..., exec_time: _Optional[float] = ..., mode: _Optional[str] = ..., parent_id: _Optional[str] = ..., attempt: _Optional[int] = ...) -> None: ...

class GroupMember(_message.Message):
    __slots__ = ("node_id", "reward", "status", "oriented")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    REWARD_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ORIENTED_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    reward: float
    status: str
    oriented: float
    def __init__(self, node_id: _Optional[str] = ..., reward: _Optional[float] = ..., status: _Optional[str] = ..., oriented: _Optional[float] = ...) -> None: ...

class GroupScored(_message.Message):
    __slots__ = ("sibling_group", "task", "round", "step", "members", "partial")
    SIBLING_GROUP_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_FIELD_NUMBER: _ClassVar[int]
    sibling_group: str
    task: str
    round: int
    step: int
    members: _containers.RepeatedCompositeFieldContainer[GroupMember]
    partial: bool
    def __init__(self, sibling_group: _Optional[str] = ..., task: _Optional[str] = ..., round: _Optional[int] = ..., step: _Optional[int] = ..., members: _Optional[_Iterable[_Union[GroupMember, _Mapping]]] = ..., partial: bool = ...) -> None: ...

class Phases(_message.Message):
    __slots__ = ("update_weights", "gen", "old_log_prob", "ref", "adv", "update_actor", "save_checkpoint", "sleep", "wake")
    UPDATE_WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    GEN_FIELD_NUMBER: _ClassVar[int]
    OLD_LOG_PROB_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    ADV_FIELD_NUMBER: _ClassVar[int]
    UPDATE_ACTOR_FIELD_NUMBER: _ClassVar[int]
    SAVE_CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    SLEEP_FIELD_NUMBER: _ClassVar[int]
    WAKE_FIELD_NUMBER: _ClassVar[int]
    update_weights: float
    gen: float
    old_log_prob: float
    ref: float
    adv: float
    update_actor: float
    save_checkpoint: float
    sleep: float
    wake: float
    def __init__(self, update_weights: _Optional[float] = ..., gen: _Optional[float] = ..., old_log_prob: _Optional[float] = ..., ref: _Optional[float] = ..., adv: _Optional[float] = ..., update_actor: _Optional[float] = ..., save_checkpoint: _Optional[float] = ..., sleep: _Optional[float] = ..., wake: _Optional[float] = ...) -> None: ...

class LearnerStepped(_message.Message):
    __slots__ = ("step", "total_s", "phases_s", "metrics", "sibling_groups", "policy_version", "staleness", "groups_with_signal", "groups_dropped_stale", "last_stream_seq")
    class MetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    STEP_FIELD_NUMBER: _ClassVar[int]
    TOTAL_S_FIELD_NUMBER: _ClassVar[int]
    PHASES_S_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    SIBLING_GROUPS_FIELD_NUMBER: _ClassVar[int]
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    STALENESS_FIELD_NUMBER: _ClassVar[int]
    GROUPS_WITH_SIGNAL_FIELD_NUMBER: _ClassVar[int]
    GROUPS_DROPPED_STALE_FIELD_NUMBER: _ClassVar[int]
    LAST_STREAM_SEQ_FIELD_NUMBER: _ClassVar[int]
    step: int
    total_s: float
    phases_s: Phases
    metrics: _containers.ScalarMap[str, float]
    sibling_groups: _containers.RepeatedScalarFieldContainer[str]
    policy_version: int
    staleness: _containers.RepeatedScalarFieldContainer[int]
    groups_with_signal: int
    groups_dropped_stale: int
    last_stream_seq: int
    def __init__(self, step: _Optional[int] = ..., total_s: _Optional[float] = ..., phases_s: _Optional[_Union[Phases, _Mapping]] = ..., metrics: _Optional[_Mapping[str, float]] = ..., sibling_groups: _Optional[_Iterable[str]] = ..., policy_version: _Optional[int] = ..., staleness: _Optional[_Iterable[int]] = ..., groups_with_signal: _Optional[int] = ..., groups_dropped_stale: _Optional[int] = ..., last_stream_seq: _Optional[int] = ...) -> None: ...

class PolicyPublished(_message.Message):
    __slots__ = ("version", "adapter_key", "sha256", "bytes", "step", "base_model")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ADAPTER_KEY_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    BASE_MODEL_FIELD_NUMBER: _ClassVar[int]
    version: int
    adapter_key: str
    sha256: str
    bytes: int
    step: int
    base_model: str
    def __init__(self, version: _Optional[int] = ..., adapter_key: _Optional[str] = ..., sha256: _Optional[str] = ..., bytes: _Optional[int] = ..., step: _Optional[int] = ..., base_model: _Optional[str] = ...) -> None: ...

class PolicyLoaded(_message.Message):
    __slots__ = ("version", "sampler_id", "load_seconds", "sha256", "sleep_seconds", "wake_seconds", "wake_waited_seconds")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SAMPLER_ID_FIELD_NUMBER: _ClassVar[int]
    LOAD_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    SLEEP_SECONDS_FIELD_NUMBER: _ClassVar[int]
    WAKE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    WAKE_WAITED_SECONDS_FIELD_NUMBER: _ClassVar[int]
    version: int
    sampler_id: str
    load_seconds: float
    sha256: str
    sleep_seconds: float
    wake_seconds: float
    wake_waited_seconds: float
    def __init__(self, version: _Optional[int] = ..., sampler_id: _Optional[str] = ..., load_seconds: _Optional[float] = ..., sha256: _Optional[str] = ..., sleep_seconds: _Optional[float] = ..., wake_seconds: _Optional[float] = ..., wake_waited_seconds: _Optional[float] = ...) -> None: ...

class DeadLettered(_message.Message):
    __slots__ = ("consumer", "subject", "reason", "payload", "stream_seq")
    CONSUMER_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    STREAM_SEQ_FIELD_NUMBER: _ClassVar[int]
    consumer: str
    subject: str
    reason: str
    payload: bytes
    stream_seq: int
    def __init__(self, consumer: _Optional[str] = ..., subject: _Optional[str] = ..., reason: _Optional[str] = ..., payload: _Optional[bytes] = ..., stream_seq: _Optional[int] = ...) -> None: ...

class LearnerRestored(_message.Message):
    __slots__ = ("version", "weights_from", "checkpoint", "adapter_version", "adapter_key", "adapter_sha256", "replayed_steps", "skipped", "lost", "restore")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_FROM_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    ADAPTER_VERSION_FIELD_NUMBER: _ClassVar[int]
    ADAPTER_KEY_FIELD_NUMBER: _ClassVar[int]
    ADAPTER_SHA256_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_STEPS_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    LOST_FIELD_NUMBER: _ClassVar[int]
    RESTORE_FIELD_NUMBER: _ClassVar[int]
    version: int
    weights_from: str
    checkpoint: str
    adapter_version: int
    adapter_key: str
    adapter_sha256: str
    replayed_steps: int
    skipped: _containers.RepeatedScalarFieldContainer[str]
    lost: _containers.RepeatedScalarFieldContainer[str]
    restore: int
    def __init__(self, version: _Optional[int] = ..., weights_from: _Optional[str] = ..., checkpoint: _Optional[str] = ..., adapter_version: _Optional[int] = ..., adapter_key: _Optional[str] = ..., adapter_sha256: _Optional[str] = ..., replayed_steps: _Optional[int] = ..., skipped: _Optional[_Iterable[str]] = ..., lost: _Optional[_Iterable[str]] = ..., restore: _Optional[int] = ...) -> None: ...

class GroupRespent(_message.Message):
    __slots__ = ("sibling_group", "task", "round", "step", "why", "mode", "extra_siblings", "respend_group", "respend_step", "parent_id", "child_mode", "reserved_tokens", "budget_left", "tokens_per_sibling", "reason")
    SIBLING_GROUP_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    WHY_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    EXTRA_SIBLINGS_FIELD_NUMBER: _ClassVar[int]
    RESPEND_GROUP_FIELD_NUMBER: _ClassVar[int]
    RESPEND_STEP_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    CHILD_MODE_FIELD_NUMBER: _ClassVar[int]
    RESERVED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    BUDGET_LEFT_FIELD_NUMBER: _ClassVar[int]
    TOKENS_PER_SIBLING_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    sibling_group: str
    task: str
    round: int
    step: int
    why: str
    mode: str
    extra_siblings: int
    respend_group: str
    respend_step: int
    parent_id: str
    child_mode: str
    reserved_tokens: int
    budget_left: int
    tokens_per_sibling: int
    reason: str
    def __init__(self, sibling_group: _Optional[str] = ..., task: _Optional[str] = ..., round: _Optional[int] = ..., step: _Optional[int] = ..., why: _Optional[str] = ..., mode: _Optional[str] = ..., extra_siblings: _Optional[int] = ..., respend_group: _Optional[str] = ..., respend_step: _Optional[int] = ..., parent_id: _Optional[str] = ..., child_mode: _Optional[str] = ..., reserved_tokens: _Optional[int] = ..., budget_left: _Optional[int] = ..., tokens_per_sibling: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class NodeRetried(_message.Message):
    __slots__ = ("node_id", "task", "round", "step", "sibling_group", "group_size", "index_in_group", "attempt", "run_attempt", "reason")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    SIBLING_GROUP_FIELD_NUMBER: _ClassVar[int]
    GROUP_SIZE_FIELD_NUMBER: _ClassVar[int]
    INDEX_IN_GROUP_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    RUN_ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    task: str
    round: int
    step: int
    sibling_group: str
    group_size: int
    index_in_group: int
    attempt: int
    run_attempt: int
    reason: str
    def __init__(self, node_id: _Optional[str] = ..., task: _Optional[str] = ..., round: _Optional[int] = ..., step: _Optional[int] = ..., sibling_group: _Optional[str] = ..., group_size: _Optional[int] = ..., index_in_group: _Optional[int] = ..., attempt: _Optional[int] = ..., run_attempt: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("envelope", "run_started", "run_completed", "round_started", "round_completed", "node_sampled", "node_executed", "node_graded", "group_scored", "learner_stepped", "policy_published", "policy_loaded", "dead_lettered", "run_ended", "run_resumed", "learner_restored", "group_respent", "node_retried", "tokens_recorded")
    ENVELOPE_FIELD_NUMBER: _ClassVar[int]
    RUN_STARTED_FIELD_NUMBER: _ClassVar[int]
    RUN_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    ROUND_STARTED_FIELD_NUMBER: _ClassVar[int]
    ROUND_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    NODE_SAMPLED_FIELD_NUMBER: _ClassVar[int]
    NODE_EXECUTED_FIELD_NUMBER: _ClassVar[int]
    NODE_GRADED_FIELD_NUMBER: _ClassVar[int]
    GROUP_SCORED_FIELD_NUMBER: _ClassVar[int]
    LEARNER_STEPPED_FIELD_NUMBER: _ClassVar[int]
    POLICY_PUBLISHED_FIELD_NUMBER: _ClassVar[int]
    POLICY_LOADED_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTERED_FIELD_NUMBER: _ClassVar[int]
    RUN_ENDED_FIELD_NUMBER: _ClassVar[int]
    RUN_RESUMED_FIELD_NUMBER: _ClassVar[int]
    LEARNER_RESTORED_FIELD_NUMBER: _ClassVar[int]
    GROUP_RESPENT_FIELD_NUMBER: _ClassVar[int]
    NODE_RETRIED_FIELD_NUMBER: _ClassVar[int]
    TOKENS_RECORDED_FIELD_NUMBER: _ClassVar[int]
    envelope: Envelope
    run_started: RunStarted
    run_completed: RunCompleted
    round_started: RoundStarted
    round_completed: RoundCompleted
    node_sampled: NodeSampled
    node_executed: NodeExecuted
    node_graded: NodeGraded
    group_scored: GroupScored
    learner_stepped: LearnerStepped
    policy_published: PolicyPublished
    policy_loaded: PolicyLoaded
    dead_lettered: DeadLettered
    run_ended: RunEnded
    run_resumed: RunResumed
    learner_restored: LearnerRestored
    group_respent: GroupRespent
    node_retried: NodeRetried
    tokens_recorded: TokensRecorded
    def __init__(self, envelope: _Optional[_Union[Envelope, _Mapping]] = ..., run_started: _Optional[_Union[RunStarted, _Mapping]] = ..., run_completed: _Optional[_Union[RunCompleted, _Mapping]] = ..., round_started: _Optional[_Union[RoundStarted, _Mapping]] = ..., round_completed: _Optional[_Union[RoundCompleted, _Mapping]] = ..., node_sampled: _Optional[_Union[NodeSampled, _Mapping]] = ..., node_executed: _Optional[_Union[NodeExecuted, _Mapping]] = ..., node_graded: _Optional[_Union[NodeGraded, _Mapping]] = ..., group_scored: _Optional[_Union[GroupScored, _Mapping]] = ..., learner_stepped: _Optional[_Union[LearnerStepped, _Mapping]] = ..., policy_published: _Optional[_Union[PolicyPublished, _Mapping]] = ..., policy_loaded: _Optional[_Union[PolicyLoaded, _Mapping]] = ..., dead_lettered: _Optional[_Union[DeadLettered, _Mapping]] = ..., run_ended: _Optional[_Union[RunEnded, _Mapping]] = ..., run_resumed: _Optional[_Union[RunResumed, _Mapping]] = ..., learner_restored: _Optional[_Union[LearnerRestored, _Mapping]] = ..., group_respent: _Optional[_Union[GroupRespent, _Mapping]] = ..., node_retried: _Optional[_Union[NodeRetried, _Mapping]] = ..., tokens_recorded: _Optional[_Union[TokensRecorded, _Mapping]] = ...) -> None: ...
