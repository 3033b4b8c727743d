"""The PEP 723 resource gate: the seed's fields and messages, and a parser that never raises."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from treegrpo_executor import (
    MALFORMED,
    ExecutorConfig,
    Limits,
    exc_type_from_output,
    parse_declaration,
    tail,
)

GATE = ExecutorConfig().gate


def block(*lines: str) -> str:
    return "\n".join(["# /// script", *lines, "# ///", "import numpy", "print(1)"])


def test_full_declaration_is_parsed_with_integral_values():
    d = parse_declaration(
        block("# [tool.resources]", "# cpu = 8", "# mem = 16", "# ephemeral = 4", "# gpu = 1"), GATE
    )
    assert d.resources == {"cpu": 8, "mem": 16, "ephemeral": 4, "gpu": 1}
    assert isinstance(d.resources["cpu"], int)
    assert (d.malformed, d.miss_reason, d.deps_ignored) == (False, None, False)


def test_partial_declaration_fills_defaults_and_omits_undeclared_gpu():
    d = parse_declaration(block("# [tool.resources]", "# mem = 2.5"), GATE)
    assert d.resources == {"cpu": 2, "mem": 2.5, "ephemeral": 4}
    assert d.gpu == 0


def test_gpu_zero_is_rejected_with_the_seeds_message():
    d = parse_declaration(block("# [tool.resources]", "# cpu = 4", "# gpu = 0"), GATE)
    assert d.resources is None
    assert d.miss_reason == "gpu=0 out of range 1..1"
    assert d.malformed is False


def test_no_block_means_no_declaration_and_no_reason():
    d = parse_declaration("import pandas as pd\nprint('# /// script')\n", GATE)
    assert (d.resources, d.malformed, d.miss_reason, d.deps_ignored) == (None, False, None, False)


def test_unclosed_block_is_malformed_with_the_seeds_message():
    d = parse_declaration("# /// script\n# [tool.resources]\n# gpu = 1\nimport os\n", GATE)
    assert d.malformed and d.resources is None and d.miss_reason == MALFORMED
    assert MALFORMED == "malformed # /// script block (unclosed or duplicated)"


def test_duplicated_block_is_malformed_even_though_each_is_valid():
    one = "# /// script\n# [tool.resources]\n# gpu = 1\n# ///\n"
    d = parse_declaration(one + one + "print(1)\n", GATE)
    assert d.malformed and d.miss_reason == MALFORMED


def test_dependencies_are_recorded_as_ignored_and_resources_stay_null_without_a_table():
    d = parse_declaration(block('# dependencies = ["lightgbm", "xgboost"]'), GATE)
    assert d.deps_ignored and d.resources is None and d.miss_reason is None


def test_non_numeric_and_boolean_values_are_rejected():
    assert (
        parse_declaration(block("# [tool.resources]", '# cpu = "eight"'), GATE).miss_reason
        == "cpu='eight' is not a number"
    )
    assert parse_declaration(block("# [tool.resources]", "# gpu = true"), GATE).resources is None


def test_invalid_toml_inside_the_block_is_malformed():
    d = parse_declaration(block("# [tool.resources", "# cpu = 8"), GATE)
    assert d.malformed and d.resources is None and d.miss_reason.startswith("malformed # /// script block")


def test_ranges_and_defaults_come_from_config():
    cfg = ExecutorConfig(gate={"gpu": {"lo": 0, "hi": 8}, "default_cpu": 1})
    d = parse_declaration(block("# [tool.resources]", "# gpu = 0"), cfg.gate)
    assert d.resources == {"cpu": 1, "mem": 8, "ephemeral": 4, "gpu": 0}


def test_limits_clip_an_accepted_declaration_to_the_caps():
    cfg = ExecutorConfig(caps={"cpu": 2, "mem_gib": 4})
    d = parse_declaration(block("# [tool.resources]", "# cpu = 16", "# mem = 64"), cfg.gate)
    lim = Limits.for_node(d, cfg)
    assert (lim.cpu, lim.mem_gib, lim.gpu) == (2, 4, 0)


def test_crlf_scripts_parse_like_lf_scripts():
    code = block("# [tool.resources]", "# gpu = 1").replace("\n", "\r\n")
    assert parse_declaration(code, GATE).resources["gpu"] == 1


header_line = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        [
            "# /// script",
            "# ///",
            "#",
            "# [tool.resources]",
            "# gpu = 1",
            "# cpu = -1e309",
            "# mem = nan",
            "# [tool]",
            "# resources = 3",
            '# dependencies = ["x"]',
            "# gpu = 1e400",
            "# /// other",
        ]
    ),
    st.builds(
        lambda k, v: f"# {k} = {v}",
        st.sampled_from(["cpu", "mem", "ephemeral", "gpu", "x"]),
        st.one_of(st.integers(), st.floats(allow_nan=True), st.text(max_size=8).map(repr)),
    ),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(header_line, max_size=12), st.booleans())
def test_parser_never_raises_on_random_and_hostile_headers(lines, crlf):
    code = ("\r\n" if crlf else "\n").join(lines)
    d = parse_declaration(code, GATE)
    assert d.resources is None or set(d.resources) <= {"cpu", "mem", "ephemeral", "gpu"}
    assert not (d.resources is not None and d.malformed)
    if d.malformed:
        assert d.miss_reason and d.miss_reason.startswith("malformed # /// script block")


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400))
def test_parser_never_raises_on_binary_garbage(data):
    parse_declaration(data.decode("latin-1"), GATE)


def test_exc_type_is_the_short_class_name_of_the_last_traceback():
    out = (
        "noise\nTraceback (most recent call last):\n  File \"x\", line 1\nKeyError: 'a'\n"
        'Traceback (most recent call last):\n  File "s.py", line 3, in <module>\n'
        "torch.cuda.OutOfMemoryError: CUDA out of memory\n"
    )
    assert exc_type_from_output(out) == "OutOfMemoryError"
    assert (
        exc_type_from_output('  File "s.py", line 1\n    def (:\n        ^\nSyntaxError: invalid syntax\n')
        == "SyntaxError"
    )
    assert exc_type_from_output("all good\n") is None


def test_term_tail_keeps_the_last_lines_within_the_byte_budget():
    text = "\n".join(f"line {i}" for i in range(1000))
    assert tail(text, 3, 1000) == "line 997\nline 998\nline 999"
    assert len(tail("x" * 10000, 5, 300).encode()) <= 300
